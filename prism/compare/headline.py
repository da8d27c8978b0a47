"""The headline metrics of a comparison run: the numbers a reader looks at first, logged to MLflow.

Read off the comparison tables (:func:`prism.compare.core.build_tables`); pure, no I/O.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from prism.compare.tables import POOLED
from prism.stats.basics import SIGNIFICANCE

if TYPE_CHECKING:
    from prism.compare.comparison_tables import ComparisonTables


def metric_key(*parts: str) -> str:
    """An MLflow metric name from parts, with characters MLflow rejects replaced by ``_``."""
    return "/".join(re.sub(r"[^A-Za-z0-9_\-. :]", "_", p) for p in parts)


def headline_metrics(tables: ComparisonTables, n_questions: int) -> dict[str, float]:
    """The numbers a reader looks at first, logged as metrics of the comparison run.

    Per model: baseline accuracy, mean flip rate and largest |delta accuracy| over the non-baseline
    conditions, and how many conditions differ from the baseline at Holm-adjusted p below
    :data:`prism.stats.basics.SIGNIFICANCE`. Per pair of models (pooled over conditions): disagreement, kappa and
    excess. Per model, axis and measure that shifts somewhere: ``first_shift/...``, the position among the
    axis's values of the first that shifts.
    """
    metrics: dict[str, float] = {"n_runs": float(tables.sensitivity["model"].nunique()),
                                 "n_questions": float(n_questions)}
    for model, rows in tables.sensitivity.groupby("model", sort=False):
        base = rows[rows["condition"] == rows["baseline"]]
        others = rows[rows["condition"] != rows["baseline"]]
        metrics[metric_key("sensitivity", str(model), "baseline_accuracy")] = float(base["accuracy"].iloc[0])
        if not others.empty:
            metrics[metric_key("sensitivity", str(model), "mean_flip_rate")] = float(others["flip_rate"].mean())
            metrics[metric_key("sensitivity", str(model), "max_abs_delta_accuracy")] = float(
                others["delta_accuracy"].abs().max())
            metrics[metric_key("sensitivity", str(model), "significant_conditions")] = float(
                (others["mcnemar_p_holm"] < SIGNIFICANCE).sum())
    if tables.divergence is not None:
        for row in tables.divergence[tables.divergence["condition"] == POOLED].itertuples(index=False):
            pair = f"{row.model_a}_vs_{row.model_b}"
            for name in ("disagreement", "kappa", "excess"):
                metrics[metric_key("divergence", pair, name)] = float(getattr(row, name))
    if True:  # how many steps are shifts, per model and measure
        for key, steps in tables.shifts.groupby(["model", "measure"], sort=False):
            metrics[metric_key("shifts", *(str(k) for k in key))] = float(steps["shift"].sum())
    if True:  # where each axis first shifts: the position of that value (the baseline is 0)
        for key, steps in tables.profile.groupby(["model", "axis", "measure"], sort=False):
            first = [i for i, flag in enumerate(steps["first_shift"], start=1) if flag]
            if first:
                metrics[metric_key("first_shift", *(str(k) for k in key))] = float(first[0])
    return metrics
