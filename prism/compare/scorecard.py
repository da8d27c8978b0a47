"""``comparison/scorecard.csv``: every model x condition x metric, each with a bootstrap interval over questions.

One long table a reader (or a script) filters instead of four wide ones. Per compared run and condition,
and pooled over its conditions (``condition`` = :data:`prism.compare.tables.POOLED`):

- ``accuracy``: share of observed cells whose answer is the key (UNKNOWN counts as wrong);
- ``recovery``: share of observed cells with a recovered answer;
- ``compliance``: share of observed cells that followed the answer format (runs that recorded it);
- ``consistency``: share of cells whose answer (UNKNOWN an answer of its own) equals the baseline's answer
  to the same question and repetition; not for the baseline itself, nor pooled;
- ``likelihood_accuracy``: share of cells whose likeliest first-token option is the key (runs with
  ``generation.label_probs=true`` only).

Every interval is :func:`prism.stats.basics.pooled_rate`: a 95% percentile bootstrap that resamples questions
(all of a question's cells together) with the comparison's B and seed, as the other tables draw it. A run
without an answer key has no accuracy rows; a metric whose cells are missing is left out, not zero.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from prism.compare.tables import POOLED, ModelCells, has_key
from prism.stats import basics

SCORECARD_COLUMNS = ("model", "run_id", "condition", "metric", "value", "ci_low", "ci_high", "n_cells",
                     "n_questions")
# The metrics in table order; the flag column each one pools (consistency is paired with the baseline).
METRICS = ("accuracy", "recovery", "compliance", "consistency", "likelihood_accuracy")
_FLAGS = {"accuracy": "correct", "recovery": "recovered", "compliance": "compliant",
          "likelihood_accuracy": "likelihood_correct"}


def _flag_rows(model: ModelCells, condition: str, cells: pd.DataFrame, *, n_boot: int,
               seed: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for metric, flag in _FLAGS.items():
        if metric in ("accuracy", "likelihood_accuracy") and not has_key(model):
            continue
        values = cells[flag] if flag in cells else pd.Series(dtype=object)
        kept = values.notna()
        if not kept.any():  # not recorded (compliance of an old run, likelihood without probabilities)
            continue
        est = basics.pooled_rate(values[kept].astype(float), cells.loc[kept, "question_id"].astype(str),
                                n_boot=n_boot, seed=seed)
        rows.append(_row(model, condition, metric, est, cells[kept]))
    return rows


def _row(model: ModelCells, condition: str, metric: str, est: basics.Estimate,
         cells: pd.DataFrame) -> dict[str, object]:
    return {"model": model.label, "run_id": model.run_id, "condition": condition, "metric": metric,
            "value": est.value, "ci_low": est.ci_low, "ci_high": est.ci_high, "n_cells": len(cells),
            "n_questions": int(cells["question_id"].nunique())}


def scorecard_table(models: Sequence[ModelCells], baseline: str, *, n_boot: int, seed: int) -> pd.DataFrame:
    """The scorecard: per run (in the given order), its conditions in order and then the pooled row.

    Args:
        models: The compared runs.
        baseline: The condition consistency is measured against.
        n_boot: Bootstrap resamples (B).
        seed: Bootstrap seed.

    Returns:
        Columns :data:`SCORECARD_COLUMNS`, one row per model, condition and metric that has cells, the
        metrics in :data:`METRICS` order within a condition.
    """
    rows: list[dict[str, object]] = []
    for model in models:
        cells = model.cells
        base = cells[cells["condition"] == baseline][["question_id", "repetition", "category"]]
        for condition in [*model.conditions, POOLED]:
            own = cells if condition == POOLED else cells[cells["condition"] == condition]
            found = _flag_rows(model, condition, own, n_boot=n_boot, seed=seed)
            if condition not in (POOLED, baseline) and not base.empty:
                paired = base.merge(own[["question_id", "repetition", "category"]], on=["question_id", "repetition"],
                                    suffixes=("_base", ""))
                if len(paired):
                    same = (paired["category"] == paired["category_base"]).astype(float)
                    est = basics.pooled_rate(same, paired["question_id"].astype(str), n_boot=n_boot, seed=seed)
                    found.append(_row(model, condition, "consistency", est, paired))
            rows += sorted(found, key=lambda r: METRICS.index(str(r["metric"])))
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in SCORECARD_COLUMNS})
    return pd.DataFrame(rows, columns=list(SCORECARD_COLUMNS))
