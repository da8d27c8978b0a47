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
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from prism.compare.tables import POOLED, ModelCells, has_key
from prism.stats import basics

SCORECARD_COLUMNS = ("model", "run_id", "condition", "metric", "value", "ci_low", "ci_high", "n_cells",
                     "n_questions")
# The metrics in table order; the flag column each one pools (consistency is paired with the baseline).
METRICS = ("accuracy", "recovery", "compliance", "consistency", "likelihood_accuracy")
_FLAGS = {"accuracy": "correct", "recovery": "recovered", "compliance": "compliant",
          "likelihood_accuracy": "likelihood_correct"}
_KEY = ["question_id", "repetition"]


@dataclass
class _Row:
    """One scorecard row before its interval: the cells' values and questions, or the cells' positions."""

    model: ModelCells
    condition: str
    metric: str
    values: NDArray[np.float64]
    questions: NDArray[np.intp]  # codes of the question ids as strings, the resampling unit
    n_cells: int
    n_questions: int


class _Cells:
    """One run's cells as arrays, read once for all its rows (each row used to filter the frame again)."""

    def __init__(self, cells: pd.DataFrame) -> None:
        self.frame = cells
        self.condition = cells["condition"].to_numpy()
        # pooled_rate resamples the ids as strings (``astype(str)``); n_questions counts the ids themselves
        # (``nunique``, which leaves a missing id out): two codings, equal for the string ids of every run.
        self.questions = pd.factorize(np.asarray(cells["question_id"].astype(str)), sort=False)[0]
        self.ids = pd.factorize(cells["question_id"], sort=False)[0]
        repetitions, levels = pd.factorize(cells["repetition"], sort=False)
        # (question, repetition) as one integer, -1 where either is missing (the merge pairs those itself).
        self.keys = np.where((self.ids >= 0) & (repetitions >= 0), self.ids * max(1, len(levels)) + repetitions, -1)
        category = cells["category"]
        self.category = category.to_numpy(dtype=object)
        self.has_category = category.notna().to_numpy()

    def row(self, model: ModelCells, condition: str, metric: str, values: NDArray[np.float64],
            rows: NDArray[np.intp]) -> _Row:
        ids = self.ids[rows]
        return _Row(model, condition, metric, values, self.questions[rows], len(rows),
                    int(np.unique(ids[ids >= 0]).size))


def _flag_rows(model: ModelCells, cells: _Cells, condition: str, own: NDArray[np.bool_]) -> list[_Row]:
    rows: list[_Row] = []
    for metric, flag in _FLAGS.items():
        if metric in ("accuracy", "likelihood_accuracy") and not has_key(model):
            continue
        if flag not in cells.frame:
            continue
        values = cells.frame[flag]
        kept = values.notna().to_numpy() & own
        if not kept.any():  # not recorded (compliance of an old run, likelihood without probabilities)
            continue
        positions = np.flatnonzero(kept)
        rows.append(cells.row(model, condition, metric, values.iloc[positions].to_numpy(dtype=np.float64),
                              positions))
    return rows


def _paired(cells: _Cells, base: NDArray[np.intp], own: NDArray[np.intp]) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Positions of the baseline's and the condition's cells of each (question, repetition) both have.

    The rows of ``base.merge(own, on=["question_id", "repetition"])``, in that order: the baseline's order.
    Keys repeated on a side (or missing) pair every copy with every copy there; those take the merge itself.
    """
    left, right = cells.keys[base], cells.keys[own]
    if len(right) and (left >= 0).all() and (right >= 0).all() and np.bincount(right).max() <= 1 and \
            np.bincount(left).max() <= 1:
        where = np.full(int(max(left.max(initial=0), right.max())) + 1, -1, dtype=np.intp)
        where[right] = np.arange(len(right))
        found = where[left]
        matched = found >= 0
        return base[matched], own[found[matched]]
    frame = cells.frame
    merged = (frame.iloc[base][_KEY].reset_index(drop=True).assign(_left=np.arange(len(base)))
              .merge(frame.iloc[own][_KEY].reset_index(drop=True).assign(_right=np.arange(len(own))), on=_KEY))
    return base[merged["_left"].to_numpy()], own[merged["_right"].to_numpy()]


def _consistency(model: ModelCells, cells: _Cells, condition: str, base: NDArray[np.intp],
                 own: NDArray[np.intp]) -> _Row | None:
    left, right = _paired(cells, base, own)
    if not len(left):
        return None
    # Series equality: a missing category equals nothing, not even another missing one.
    same = (cells.category[right] == cells.category[left]) & cells.has_category[right] & cells.has_category[left]
    # The pair's question id is the baseline cell's (the merge keeps the left key).
    return cells.row(model, condition, "consistency", same.astype(float), left)


def _estimates(rows: Sequence[_Row], n_boot: int, seed: int) -> list[basics.Estimate]:
    sums = [basics.question_sums(r.values, r.questions) for r in rows]
    return basics.ratio_estimates(sums, n_boot=n_boot, seed=seed)


def scorecard_table(models: Sequence[ModelCells], baseline: str, *, n_boot: int, seed: int) -> pd.DataFrame:
    """The scorecard: per run (in the given order), its conditions in order and then the pooled row.

    Each run's cells are read into arrays once, and the intervals of all its rows are drawn together
    (:func:`prism.stats.basics.ratio_estimates`): each is the :func:`prism.stats.basics.pooled_rate` of the
    row's cells, as if drawn alone.

    Args:
        models: The compared runs.
        baseline: The condition consistency is measured against.
        n_boot: Bootstrap resamples (B).
        seed: Bootstrap seed.

    Returns:
        Columns :data:`SCORECARD_COLUMNS`, one row per model, condition and metric that has cells, the
        metrics in :data:`METRICS` order within a condition.
    """
    pending: list[_Row] = []
    for model in models:
        cells = _Cells(model.cells)
        base = np.flatnonzero(cells.condition == baseline)
        for condition in [*model.conditions, POOLED]:
            own = np.ones(len(cells.condition), dtype=bool) if condition == POOLED else cells.condition == condition
            found = _flag_rows(model, cells, condition, own)
            if condition not in (POOLED, baseline) and len(base):
                paired = _consistency(model, cells, condition, base, np.flatnonzero(own))
                found += [paired] if paired is not None else []
            pending += sorted(found, key=lambda r: METRICS.index(r.metric))
    if not pending:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in SCORECARD_COLUMNS})
    rows = [{"model": r.model.label, "run_id": r.model.run_id, "condition": r.condition, "metric": r.metric,
             "value": est.value, "ci_low": est.ci_low, "ci_high": est.ci_high, "n_cells": r.n_cells,
             "n_questions": r.n_questions} for r, est in zip(pending, _estimates(pending, n_boot, seed), strict=True)]
    return pd.DataFrame(rows, columns=list(SCORECARD_COLUMNS))
