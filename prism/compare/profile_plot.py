"""The profile figure and the report's profile rows: each axis's tested steps in value order, per model and axis.

A point is the step's excess (between - within) with its 95% interval, or its between when the run has
no repetitions (then no step can be a shift). A shift is drawn filled and the first shifting value is
marked, so the figure answers "from which value on does the answer move?". matplotlib is imported inside
:func:`write_profile_plot`, and the figure is drawn without pyplot, as in :mod:`prism.compare.plots`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from prism.compare.comparison_tables import ComparisonTables

PROFILE_PNG = "profile.png"


def write_profile_plot(out: Path, profile: pd.DataFrame, measure: str = "answer") -> Path | None:
    """Draw ``profile.png`` from :func:`prism.compare.noise.profile_table` for one measure.

    Returns:
        The file, or None when the comparison has no profile for that measure.
    """
    rows = profile[profile["measure"] == measure] if len(profile) else profile
    if rows.empty:
        return None
    from matplotlib.figure import Figure

    panels = list(rows.groupby(["model", "axis"], sort=False))
    # A Figure without pyplot (as in prism.compare.plots): savefig renders it with Agg.
    fig = Figure(figsize=(7.0, 2.4 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False)
    for ax, ((model, axis), steps) in zip(axes[:, 0], panels, strict=True):
        repeated = steps["within"].notna().any()
        values = steps["excess"] if repeated else steps["between"]
        x = range(len(steps))
        low = [v - lo if not math.isnan(lo) else 0.0 for v, lo in zip(values, steps["excess_ci_low"], strict=True)]
        high = [hi - v if not math.isnan(hi) else 0.0 for v, hi in zip(values, steps["excess_ci_high"], strict=True)]
        ax.errorbar(x, values, yerr=[low, high], fmt="none", ecolor="grey", capsize=3)
        shifted = steps["shift"].astype(bool).to_numpy()
        ax.scatter([i for i in x if shifted[i]], values[shifted], color="crimson", zorder=3, label="shift")
        ax.scatter([i for i in x if not shifted[i]], values[~shifted], facecolors="white", edgecolors="black",
                   zorder=3, label="no shift")
        for i, first in enumerate(steps["first_shift"].astype(bool)):
            if first:
                ax.annotate("first shift", (i, values.iloc[i]), textcoords="offset points", xytext=(0, 10),
                            ha="center", fontsize=8, color="crimson")
        ax.axhline(0.0, color="black", linewidth=0.6)
        ax.set_xticks(list(x), [f"{a} -> {b}" for a, b in zip(steps["from"], steps["to"], strict=True)],
                      rotation=20, ha="right", fontsize=8)
        scale = steps["scale"].iloc[0]
        compared = "each value vs the previous" if scale != "nominal" else "each value vs the baseline"
        ax.set_title(f"{model}: {axis} ({scale}; {compared})", fontsize=9)
        ax.set_ylabel("excess" if repeated else "between (no repetitions)", fontsize=8)
    axes[0, 0].legend(fontsize=7, loc="upper left")
    path = out / PROFILE_PNG
    fig.savefig(path, dpi=110)
    return path


def profile_panels(tables: ComparisonTables,
                   measure: str = "answer") -> list[tuple[str, list[dict[str, Any]]]]:
    """The report's profile section (``sections/profile.j2``): per model and axis, each step and its verdict.

    Returns:
        (title, rows) per model and axis, rows with ``step``, the shift numbers and ``verdict``; empty when
        the comparison has no profile for ``measure``.
    """
    profile = tables.profile
    if profile is None or profile.empty:
        return []
    panels = []
    for (model, axis), steps in profile[profile["measure"] == measure].groupby(["model", "axis"], sort=False):
        rows = [{**{str(k): v for k, v in r.items()}, "step": f"{r['from']} → {r['to']}",
                 "verdict": "first shift" if r["first_shift"] else "shift" if r["shift"] else "–"}
                for r in steps.to_dict("records")]
        panels.append((f"{model}: {axis} ({steps['scale'].iloc[0]})", rows))
    return panels
