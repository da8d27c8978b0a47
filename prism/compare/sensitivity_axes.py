"""``comparison/sensitivity_axes.csv``: which axes move a model most, ranked by their largest excess.

Per model and shift measure, every axis (a condition family, or a grid's axis) gets the step of the shifts
table (:mod:`prism.compare.noise`) with the largest excess over the model's own repetition noise, and the
axes are ranked by it, largest first. Runs without repetitions have no excess: their axes are ranked by
the largest between (the raw difference, noise included) and ``statistic`` says so. A step belongs to the
axis whose steps (:meth:`prism.conditions.axes.Axis.steps`) it is; a run whose axes are unknown falls back to each
condition's family, then to its condition set's name. A grid's cells where two axes move at once belong
to no single axis and are left out (the clustered model, ``gee_wald.csv``, reads their interactions).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from prism.compare.tables import ModelCells

AXES_COLUMNS = ("model", "measure", "rank", "axis", "scale", "n_steps", "n_shifts", "statistic", "largest",
                "ci_low", "ci_high", "p_holm", "shift", "from_condition", "to_condition")


def step_axes(model: ModelCells) -> dict[tuple[str, str], tuple[str, str]]:
    """(from condition, to condition) of each step the model's axes test -> (axis, scale)."""
    found: dict[tuple[str, str], tuple[str, str]] = {}
    for axis in model.axes:
        for step in axis.steps():
            found.setdefault(step, (axis.name, axis.scale))
    return found


def _axis_of(model: ModelCells, known: dict[tuple[str, str], tuple[str, str]], start: str,
             to: str) -> tuple[str, str] | None:
    if (start, to) in known:
        return known[start, to]
    if model.grid:  # a cell of a grid off more than one axis: no single axis
        return None
    return model.families.get(to) or model.axis or "conditions", "nominal"


def sensitivity_axes_table(models: Sequence[ModelCells], shifts: pd.DataFrame) -> pd.DataFrame:
    """The axes of each model ranked by their largest excess (or between, without repetitions), per measure.

    Args:
        models: The compared runs (their axes and families).
        shifts: The shifts table (:func:`prism.compare.noise.shifts_table`).

    Returns:
        Columns :data:`AXES_COLUMNS`: per model (in the given order) and measure, one row per axis, ``rank``
        1 the largest; ``from_condition``/``to_condition`` name the step with that largest value; an axis
        whose steps are all undefined ranks last with empty values.
    """
    rows: list[dict[str, Any]] = []
    for model in models:
        known = step_axes(model)
        own = shifts[shifts["model"] == model.label] if len(shifts) else shifts
        for measure, steps in own.groupby("measure", sort=False):
            repeated = bool(steps["within"].notna().any())
            statistic = "excess" if repeated else "between"
            by_axis: dict[tuple[str, str], list[dict[str, Any]]] = {}
            for step in steps.to_dict("records"):
                axis = _axis_of(model, known, str(step["from_condition"]), str(step["to_condition"]))
                if axis is not None:
                    by_axis.setdefault(axis, []).append({str(k): v for k, v in step.items()})
            ranked: list[dict[str, Any]] = []
            for (name, scale), members in by_axis.items():
                valued = [s for s in members if not math.isnan(float(s[statistic]))]
                top = max(valued, key=lambda s: float(s[statistic])) if valued else None
                ranked.append({
                    "model": model.label, "measure": measure, "axis": name, "scale": scale, "n_steps": len(members),
                    "n_shifts": sum(bool(s["shift"]) for s in members), "statistic": statistic,
                    "largest": top[statistic] if top else math.nan,
                    # Without repetitions the shifts table's interval is the between's.
                    "ci_low": top["excess_ci_low"] if top else math.nan,
                    "ci_high": top["excess_ci_high"] if top else math.nan,
                    "p_holm": top["p_holm"] if top else math.nan, "shift": bool(top["shift"]) if top else False,
                    "from_condition": top["from_condition"] if top else "",
                    "to_condition": top["to_condition"] if top else ""})
            ranked.sort(key=lambda r: -float(r["largest"]) if not math.isnan(float(r["largest"]))
                        else math.inf)
            rows += [{**r, "rank": i} for i, r in enumerate(ranked, start=1)]
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in AXES_COLUMNS})
    return pd.DataFrame(rows, columns=list(AXES_COLUMNS))
