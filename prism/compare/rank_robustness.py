"""How sure a ranking is over the prompts: ``comparison/rank_robustness.csv``.

Models compared on the same questions (one frozen question set) and the same condition set are ranked by
accuracy, but the prompt a leaderboard uses is one draw from many equivalent ones. Each resample here draws
the questions with replacement *and* one condition of the set at random (the prompt as a random draw), and
ranks the models by their accuracy on those questions under that condition. Per pair of models:

- ``prob_a_above_b``: the share of resamples in which ``model_a`` is more accurate than ``model_b`` (a tie
  counts half); ``model_a`` is the one more accurate over all conditions pooled, so the figure is at least
  about one half and a ranking is robust to the prompt when it reaches :data:`ROBUST` (0.95);
- each model's rank interval (``rank_a_low``/``rank_a_high``, ``rank_b_*``): the 2.5th and 97.5th
  percentiles of its rank (1 the most accurate) among the group's models over the resamples;
- ``flips_at``: the conditions under which, on all the questions, the pair's order is the other way round.

The number of resamples is ``compare.power_simulations`` (seeded by ``compare.seed``), so the table stays
cheap: one matrix product per model and condition. Pure numpy and pandas over the runs' cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from prism.compare.tables import ModelCells, has_key

RANK_ROBUSTNESS_COLUMNS = ("model_a", "model_b", "dataset", "condition_set", "prob_a_above_b", "rank_a_low",
                           "rank_a_high", "rank_b_low", "rank_b_high", "accuracy_a", "accuracy_b", "robust",
                           "flips_at", "n_questions", "n_conditions", "resamples")
# A pair's order is robust to the prompt when the more accurate model ranks above the other this often.
ROBUST = 0.95
# Coverage of the rank intervals.
RANK_LEVEL = 0.95


def _groups(models: Sequence[ModelCells]) -> list[list[ModelCells]]:
    """Runs on one question set and one condition set, with an answer key, two or more together."""
    found: dict[tuple[str, str, str], list[ModelCells]] = {}
    for model in models:
        if has_key(model) and len(model.cells):
            found.setdefault((model.question_set, model.dataset, model.axis), []).append(model)
    return [members for members in found.values() if len(members) >= 2]


def _sums(models: Sequence[ModelCells], questions: list[str], conditions: list[str]) -> tuple[
        NDArray[np.float64], NDArray[np.float64]]:
    """(correct, observed) cell counts per model, question and condition: arrays of shape (k, n, c)."""
    q_index = {q: i for i, q in enumerate(questions)}
    c_index = {c: i for i, c in enumerate(conditions)}
    correct = np.zeros((len(models), len(questions), len(conditions)))
    observed = np.zeros_like(correct)
    for m, model in enumerate(models):
        cells = model.cells[model.cells["condition"].isin(conditions)
                            & model.cells["question_id"].astype(str).isin(q_index)]
        qi = cells["question_id"].astype(str).map(q_index).to_numpy(np.intp)
        ci = cells["condition"].map(c_index).to_numpy(np.intp)
        np.add.at(correct[m], (qi, ci), cells["correct"].astype(float).to_numpy())
        np.add.at(observed[m], (qi, ci), 1.0)
    return correct, observed


def resampled_accuracy(correct: NDArray[np.float64], observed: NDArray[np.float64], resamples: int,
                       seed: int) -> NDArray[np.float64]:
    """Each model's accuracy on each resample: questions with replacement, one condition drawn per resample.

    Args:
        correct: (k, n, c) correct cells per model, question and condition.
        observed: (k, n, c) observed cells.
        resamples: R.
        seed: Seeds ``numpy.random.default_rng``.

    Returns:
        (R, k) accuracies (NaN where a model has no observed cell in the draw).
    """
    k, n, c = correct.shape
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, n, size=(resamples, n))
    weights = np.bincount((np.arange(resamples)[:, None] * n + drawn).ravel(),
                          minlength=resamples * n).reshape(resamples, n).astype(np.float64)
    prompt = rng.integers(0, c, size=resamples)
    out = np.full((resamples, k), np.nan)
    for j in range(c):
        rows = prompt == j
        if not rows.any():
            continue
        num = weights[rows] @ correct[:, :, j].T
        den = weights[rows] @ observed[:, :, j].T
        with np.errstate(invalid="ignore", divide="ignore"):
            out[rows] = np.where(den > 0, num / den, np.nan)
    return out


def _ranks(accuracy: NDArray[np.float64]) -> NDArray[np.float64]:
    """Rank of each model per resample, 1 the most accurate, ties sharing their mean rank."""
    from scipy.stats import rankdata

    return np.asarray(rankdata(-np.nan_to_num(accuracy, nan=-1.0), axis=1, method="average"), dtype=np.float64)


def rank_robustness_table(models: Sequence[ModelCells], *, resamples: int, seed: int) -> pd.DataFrame:
    """Per pair of models on the same questions and condition set, how sure their order is (module docstring).

    Args:
        models: The compared runs.
        resamples: Resamples (``compare.power_simulations``).
        seed: Their seed.

    Returns:
        Columns :data:`RANK_ROBUSTNESS_COLUMNS`, one row per pair; empty when no two runs share a question
        set and condition set (or they have no answer key).
    """
    rows = []
    for members in _groups(models):
        conditions = [c for c in members[0].conditions if all(c in m.conditions for m in members)]
        # As lists: iterating a pyarrow-backed column costs a call per cell.
        shared = set.intersection(*(set(m.cells["question_id"].astype(str).tolist()) for m in members))
        questions = [q for q in dict.fromkeys(members[0].cells["question_id"].astype(str).tolist()) if q in shared]
        if not conditions or not questions or resamples < 1:
            continue
        correct, observed = _sums(members, questions, conditions)
        pooled = correct.sum(axis=(1, 2)) / np.maximum(observed.sum(axis=(1, 2)), 1.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            per_condition = correct.sum(axis=1) / observed.sum(axis=1)  # (k, c)
        accuracy = resampled_accuracy(correct, observed, resamples, seed)
        ranks = _ranks(accuracy)
        tail = 50 * (1 - RANK_LEVEL)
        low = np.percentile(ranks, tail, axis=0, method="lower")
        high = np.percentile(ranks, 100 - tail, axis=0, method="higher")
        for i, j in combinations(range(len(members)), 2):
            a, b = (i, j) if pooled[i] >= pooled[j] else (j, i)
            above = np.nanmean((accuracy[:, a] > accuracy[:, b]) + 0.5 * (accuracy[:, a] == accuracy[:, b]))
            flips = [conditions[c] for c in range(len(conditions)) if per_condition[b, c] > per_condition[a, c]]
            rows.append({"model_a": members[a].label, "model_b": members[b].label, "dataset": members[a].dataset,
                         "condition_set": members[a].axis, "prob_a_above_b": float(above),
                         "rank_a_low": float(low[a]), "rank_a_high": float(high[a]),
                         "rank_b_low": float(low[b]), "rank_b_high": float(high[b]),
                         "accuracy_a": float(pooled[a]), "accuracy_b": float(pooled[b]),
                         "robust": bool(above >= ROBUST), "flips_at": ",".join(flips),
                         "n_questions": len(questions), "n_conditions": len(conditions), "resamples": resamples})
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in RANK_ROBUSTNESS_COLUMNS})
    return pd.DataFrame(rows, columns=list(RANK_ROBUSTNESS_COLUMNS))


def rank_note(table: pd.DataFrame) -> str:
    """One sentence on how many pairs' order is robust to the prompt."""
    if table.empty:
        return "no two runs share a question set and condition set with an answer key: no ranking to resample"
    weak = table[~table["robust"].astype(bool)]
    resamples = int(table["resamples"].iloc[0])
    text = (f"{len(table) - len(weak)} of {len(table)} pair(s) keep their order in at least {ROBUST:.0%} of "
            f"{resamples} resamples of questions and prompt (compare.power_simulations)")
    if len(weak):
        text += "; not robust to the prompt: " + ", ".join(
            f"{a} > {b} ({p:.2f})" for a, b, p in zip(weak["model_a"], weak["model_b"], weak["prob_a_above_b"],
                                                      strict=True))
    return text + "."
