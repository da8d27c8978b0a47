"""Measures of the likelihood reading: per run and condition, between conditions, and by position and label.

Pure pandas/numpy over scored records that carry the fields of :func:`prism.label_probs.likelihood_fields`
(``option_probs``, ``likelihood_answer``, ``likelihood_correct``) beside the raw ``label_mass``. The
vocabulary of :mod:`prism.results.metrics` holds: *observed* means ``error`` is null; a record *with
probabilities* is an observed record with a likelihood answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from prism.names import (
    LIKELIHOOD_QUESTION_METRICS,
    LIKELIHOOD_RATE_METRICS,
    METRIC_ACCURACY,
    METRIC_LABEL_PROBS_MISSING,
    METRIC_LIKELIHOOD_ACCURACY,
    METRIC_LIKELIHOOD_ANSWER_UNANIMOUS,
    METRIC_LIKELIHOOD_MEAN_AGREEMENT,
    METRIC_LIKELIHOOD_QUESTION_MAJORITY_ACCURACY,
    METRIC_MEAN_LABEL_MASS,
    METRIC_MEAN_PROB_TV,
    METRIC_N_LABEL_PROBS,
    METRIC_READING_AGREEMENT,
    condition_metric,
)
from prism.results.metrics import question_summary, question_table

# Per run and per condition (``<name>/<condition>``), in logging order.
RATE_NAMES: tuple[str, ...] = LIKELIHOOD_RATE_METRICS
QUESTION_NAMES: tuple[str, ...] = LIKELIHOOD_QUESTION_METRICS
CONDITION_COLUMNS: tuple[str, ...] = ("condition", "n_observed", METRIC_N_LABEL_PROBS, METRIC_ACCURACY,
                                      METRIC_LIKELIHOOD_ACCURACY, METRIC_READING_AGREEMENT, METRIC_MEAN_LABEL_MASS,
                                      METRIC_MEAN_PROB_TV)
BIAS_COLUMNS: tuple[str, ...] = ("kind", "condition", "position", "label", "mean_prob", "likelihood_rate",
                                 "parsed_rate", "correct_rate", "n_cells")


def _frame(scored: pd.DataFrame) -> pd.DataFrame:
    """The observed records with the likelihood columns present (NaN/None where a record has none)."""
    frame = scored.copy()
    for column in ("likelihood_answer", "likelihood_correct", "label_mass", "option_probs"):
        if column not in frame.columns:
            frame[column] = None
    observed = frame[frame["error"].isna()].copy()
    observed["has_probs"] = observed["likelihood_answer"].notna()
    return observed


def _rates(rows: pd.DataFrame) -> dict[str, float]:
    """The three per-run rates over one group of observed records."""
    with_probs = rows[rows["has_probs"]]
    both = with_probs[with_probs["recovered"].astype(bool)]
    mass = pd.to_numeric(rows["label_mass"], errors="coerce").dropna()
    return {
        # Items without an answer key have no likelihood_correct and get no accuracy.
        METRIC_LIKELIHOOD_ACCURACY: _mean(with_probs["likelihood_correct"].dropna().astype(float)),
        METRIC_READING_AGREEMENT: _mean((both["answer"] == both["likelihood_answer"]).astype(float)),
        METRIC_MEAN_LABEL_MASS: _mean(mass),
    }


def _mean(values: pd.Series) -> float:
    return float(values.mean()) if len(values) else float("nan")


def prob_tv_table(scored: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Total-variation distance between each condition's option distribution and the baseline's.

    Options are compared as canonical options (``option_probs``), so reordered and relabelled conditions
    are comparable: TV = 1/2 * sum over options of |p_condition - p_baseline|. Cells pair on question and
    repetition; a pair with either side lacking probabilities is left out.

    Returns:
        Columns ``question_id``, ``condition``, ``repetition``, ``prob_tv``, one row per paired cell of a
        non-baseline condition.
    """
    frame = _frame(scored)
    frame = frame[frame["has_probs"]]
    base = {(r["question_id"], r["repetition"]): r["option_probs"]
            for r in frame[frame["condition"] == baseline].to_dict("records")}
    rows = []
    for r in frame[frame["condition"] != baseline].to_dict("records"):
        other = base.get((r["question_id"], r["repetition"]))
        if other is not None:
            rows.append((r["question_id"], r["condition"], r["repetition"], total_variation(r["option_probs"], other)))
    return pd.DataFrame(rows, columns=["question_id", "condition", "repetition", "prob_tv"])


def total_variation(p: Mapping[str, float], q: Mapping[str, float]) -> float:
    """Half the L1 distance between two distributions over the same (canonical) options."""
    return 0.5 * sum(abs(float(p.get(k, 0.0)) - float(q.get(k, 0.0))) for k in set(p) | set(q))


def likelihood_condition_table(scored: pd.DataFrame, conditions: Sequence[str], baseline: str) -> pd.DataFrame:
    """Both readings per condition: parsed accuracy beside likelihood accuracy, agreement, mass and TV.

    Returns:
        Columns :data:`CONDITION_COLUMNS`, one row per condition in the given order; ``accuracy`` is the
        parsed reading (UNKNOWN wrong, over every observed record), the other rates as in
        :func:`likelihood_metrics`; ``mean_prob_tv`` is NaN for the baseline.
    """
    frame = _frame(scored)
    tv = prob_tv_table(scored, baseline)
    rows = []
    for condition in conditions:
        own = frame[frame["condition"] == condition]
        rates = _rates(own)
        tvs = tv.loc[tv["condition"] == condition, "prob_tv"]
        rows.append({"condition": condition, "n_observed": len(own), METRIC_N_LABEL_PROBS: int(own["has_probs"].sum()),
                     METRIC_ACCURACY: _mean(own["correct"].astype(float)), **rates,
                     METRIC_MEAN_PROB_TV: float("nan") if condition == baseline else _mean(tvs)})
    return pd.DataFrame(rows, columns=list(CONDITION_COLUMNS))


def likelihood_metrics(scored: pd.DataFrame, conditions: Sequence[str], question_ids: Sequence[str],
                       repetitions: int, baseline: str, question_conditions: Sequence[str] | None = None,
                       ) -> dict[str, float]:
    """The run's likelihood metrics, logged beside the text reading's.

    The question-level ones are taken over ``question_conditions`` (default: all), as in
    :func:`prism.results.metrics.summary_metrics`: a run's invariant conditions (:mod:`prism.results.roles`).

    - ``likelihood_accuracy``: share of the records with probabilities whose likelihood answer is correct;
    - ``reading_agreement``: of the recovered responses with probabilities, the share whose parsed answer
      equals the likelihood answer;
    - ``mean_label_mass``: mean ``label_mass`` over the observed records that have one;
    - each of those three per condition as ``<name>/<condition>``;
    - ``likelihood_question_majority_accuracy``, ``likelihood_mean_agreement``,
      ``likelihood_answer_unanimous_rate``: :func:`prism.results.metrics.summary_metrics`'s question-level
      measures with the likelihood answer in place of the parsed one (a record without probabilities
      counts as UNKNOWN);
    - ``mean_prob_tv``: mean over questions and non-baseline conditions (every paired cell) of the TV
      distance to the baseline's option distribution (:func:`prob_tv_table`), and per condition;
    - ``n_label_probs`` and ``label_probs_missing``: observed records with and without ``label_probs``
      (a top-k list that held no label gives none).
    """
    frame = _frame(scored)
    metrics = _rates(frame)
    for name in RATE_NAMES:
        for condition in conditions:
            metrics[condition_metric(name, condition)] = _rates(frame[frame["condition"] == condition])[name]
    proxy = pd.DataFrame({
        "question_id": frame["question_id"], "condition": frame["condition"], "repetition": frame["repetition"],
        "answer": frame["likelihood_answer"].where(frame["has_probs"], None), "recovered": frame["has_probs"],
        "compliant": False, "correct": frame["likelihood_correct"].where(frame["has_probs"], False).astype(bool),
        "correct_answer": frame["correct_answer"], "error": None,
    })
    across = list(conditions if question_conditions is None else question_conditions)
    per_question = question_summary(question_table(proxy[proxy["condition"].isin(across)], across, question_ids,
                                                   repetitions))
    n = len(per_question)
    metrics[METRIC_LIKELIHOOD_QUESTION_MAJORITY_ACCURACY] = float(per_question["majority_correct_rate"].sum()) / n \
        if n else float("nan")
    metrics[METRIC_LIKELIHOOD_MEAN_AGREEMENT] = float(per_question["agreement"].mean()) if n else float("nan")
    metrics[METRIC_LIKELIHOOD_ANSWER_UNANIMOUS] = (float(per_question["unanimous_rate"].sum()) / n if n
                                                   else float("nan"))
    tv = prob_tv_table(scored, baseline)
    metrics[METRIC_MEAN_PROB_TV] = _mean(tv["prob_tv"])
    for condition in conditions:
        if condition != baseline:
            distances = tv.loc[tv["condition"] == condition, "prob_tv"]
            metrics[condition_metric(METRIC_MEAN_PROB_TV, condition)] = _mean(distances)
    metrics[METRIC_N_LABEL_PROBS] = float(frame["has_probs"].sum())
    metrics[METRIC_LABEL_PROBS_MISSING] = float((~frame["has_probs"]).sum())
    return metrics


# ---- position and label bias --------------------------------------------------------------------------------


def bias_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Mean probability per displayed position and per label, and the PriDe prior over positions.

    Args:
        cells: One row per (record with probabilities, displayed position) with columns ``condition``,
            ``question_id``, ``repetition``, ``position`` (1-based), ``label`` (as displayed), ``prob``,
            ``likelihood`` / ``parsed`` / ``correct`` (whether the option shown there is the likelihood
            answer, the parsed answer, the correct one) and ``baseline_labels`` (whether the cell shows the
            baseline's labels, which the prior is estimated over).

    Returns:
        Columns :data:`BIAS_COLUMNS`. ``kind`` is ``position`` (per condition and ``all``), ``label`` (per
        label over every condition) or ``pride_prior`` (:func:`pride_prior`, only when estimable).
    """
    rows: list[dict[str, Any]] = []
    if cells.empty:
        return pd.DataFrame(rows, columns=list(BIAS_COLUMNS))

    def summarize(kind: str, condition: str, group: pd.DataFrame, position: Any, label: str) -> dict[str, Any]:
        return {"kind": kind, "condition": condition, "position": position, "label": label,
                "mean_prob": float(group["prob"].mean()), "likelihood_rate": float(group["likelihood"].mean()),
                "parsed_rate": float(group["parsed"].mean()), "correct_rate": float(group["correct"].mean()),
                "n_cells": len(group)}

    for condition, by_condition in [*cells.groupby("condition", sort=False), ("all", cells)]:
        for position, group in by_condition.groupby("position"):
            labels = group["label"].unique()
            rows.append(summarize("position", str(condition), group, int(position),
                                  str(labels[0]) if len(labels) == 1 else ""))
    for label, group in cells.groupby("label", sort=False):
        rows.append(summarize("label", "all", group, "", str(label)))
    prior = pride_prior(cells[cells["baseline_labels"]])
    if prior is not None:
        shown = cells[cells["baseline_labels"]].groupby("position")["label"].first()
        for position, value in enumerate(prior, start=1):
            rows.append({"kind": "pride_prior", "condition": "all", "position": position,
                         "label": str(shown.get(position, "")), "mean_prob": float(value), "likelihood_rate": np.nan,
                         "parsed_rate": np.nan, "correct_rate": np.nan,
                         "n_cells": int(cells["baseline_labels"].sum())})
    return pd.DataFrame(rows, columns=list(BIAS_COLUMNS))


def pride_prior(cells: pd.DataFrame) -> np.ndarray | None:
    """The prior over displayed positions that permuting the options reveals, as PriDe estimates it.

    PriDe (Zheng et al. 2024) models the observed option distribution as
    ``P(position i) ∝ prior(i) * P_debiased(option shown at i)`` and estimates the prior from the same
    question under permuted options, where each option visits several positions. Here every cell's
    log-probabilities are fitted by least squares as ``a_i + b_(question, option) + c_cell``, pooling the
    questions, and the prior is ``softmax(a)``. With PriDe's full set of cyclic permutations this is its
    average of log-probabilities over permutations; with fewer it is the fit's estimate. The prior is
    defined only when the positions' effects are identified apart from the options', which needs at least
    one question asked under two orders; otherwise the result is None.

    Args:
        cells: Rows as in :func:`bias_table`, plus ``option`` (the canonical option shown at the position);
            cells with a zero probability are left out (its logarithm is undefined).
    """
    if cells.empty:
        return None
    orders = cells.groupby(["question_id", "position"])["option"].nunique()
    if not (orders > 1).any():  # no option ever moved: positions and options cannot be told apart
        return None
    usable = cells.groupby(["question_id", "condition", "repetition"])["prob"].transform("min") > 0
    cells = cells[usable]
    if cells.empty:
        return None
    positions = sorted(int(p) for p in cells["position"].unique())
    options = {key: i for i, key in enumerate(sorted(set(zip(cells["question_id"], cells["option"], strict=True))))}
    cell_ids = {key: i for i, key in enumerate(sorted(set(zip(cells["question_id"], cells["condition"],
                                                            cells["repetition"], strict=True))))}
    n_pos, n_opt = len(positions), len(options)
    design = np.zeros((len(cells), n_pos + n_opt + len(cell_ids)))
    target = np.log(cells["prob"].to_numpy(dtype=float))
    for row, r in enumerate(cells.to_dict("records")):
        design[row, positions.index(int(r["position"]))] = 1.0
        design[row, n_pos + options[(r["question_id"], r["option"])]] = 1.0
        design[row, n_pos + n_opt + cell_ids[(r["question_id"], r["condition"], r["repetition"])]] = 1.0
    solution, *_ = np.linalg.lstsq(design, target, rcond=None)
    # Estimable contrasts lie in the design's row space: check each a_i - a_0 against it.
    _, singular, vt = np.linalg.svd(design, full_matrices=False)
    basis = vt[singular > singular.max() * 1e-10]
    for i in range(1, n_pos):
        contrast = np.zeros(design.shape[1])
        contrast[0], contrast[i] = -1.0, 1.0
        if np.linalg.norm(contrast - basis.T @ (basis @ contrast)) > 1e-6:
            return None
    effects = solution[:n_pos] - solution[:n_pos].max()
    prior: np.ndarray = np.exp(effects) / np.exp(effects).sum()
    return prior
