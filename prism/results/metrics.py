"""PRISM metrics over scored records: per condition, per question, and the run's summary.

Pure pandas/numpy, no I/O. Every function takes a DataFrame of scored records (``scoring.score_record``
output, one row per record) with at least the columns in :data:`REQUIRED_COLUMNS`.

Vocabulary used in every docstring below:

- *observed*: a record whose ``error`` is null. A failed request (``error`` set, no completion) is not an
  observed response and is excluded from every count, numerator and denominator. UNKNOWN responses (the
  parser recovered no answer) are observed.
- *recovered*: an observed record whose ``recovered`` is true; its ``answer`` is the canonical label.
- *cell*: one (question_id, condition, repetition). At most one observed record per cell is allowed
  (the store is keyed by it); a retried cell may also carry failed records, which are ignored.
- ``repetition`` is the 0-based repetition index: ``0 .. repetitions - 1``.
- Per-question quantities are computed per (question_id, repetition) over that repetition's conditions,
  then averaged over the question's repetitions (NaN ignored), then over the questions of the frozen set.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from prism.names import (
    METRIC_ACCURACY,
    METRIC_ANSWER_RECOVERY,
    METRIC_ANSWER_UNANIMOUS,
    METRIC_COMPLETE_QUESTIONS,
    METRIC_CONDITIONAL_ACCURACY,
    METRIC_INSTRUCTION_COMPLIANCE,
    METRIC_MEAN_AGREEMENT,
    METRIC_MEAN_PROMPT_SENSITIVITY,
    METRIC_N_QUESTIONS,
    METRIC_N_RESPONSES,
    METRIC_PROMPT_INVARIANT_INCORRECT,
    METRIC_QUESTION_MAJORITY_ACCURACY,
    METRIC_UNKNOWN_RATE,
    PARSE_METHOD_PREFIX,
    QUESTION_METRICS,
    RATE_METRICS,
    condition_metric,
)
from prism.records import CELL_COLUMNS

REQUIRED_COLUMNS: tuple[str, ...] = (
    "question_id",
    "condition",
    "repetition",
    "answer",
    "recovered",
    "compliant",
    "correct",
    "correct_answer",
    "error",
)

# Rates reported overall and per condition (as ``<rate>/<condition>``), in logging order.
RATE_NAMES: tuple[str, ...] = RATE_METRICS

# The keys of summary_metrics() besides the rates, in logging order.
QUESTION_METRIC_NAMES: tuple[str, ...] = QUESTION_METRICS

# Metrics that need an answer key: a run on items without one (survey items, ``correct_answer`` null)
# leaves them out of summary_metrics() altogether rather than logging a number that means nothing.
KEYED_RATES: tuple[str, ...] = (METRIC_ACCURACY, METRIC_CONDITIONAL_ACCURACY)
KEYED_QUESTION_METRICS: tuple[str, ...] = (METRIC_QUESTION_MAJORITY_ACCURACY, METRIC_PROMPT_INVARIANT_INCORRECT)
NO_KEY = "n/a (no answer key)"

_CELL = list(CELL_COLUMNS)
_QUESTION_REPETITION = ["question_id", "repetition"]
_COUNT_COLUMNS = ["n_observed", "n_recovered", "n_correct", "n_compliant"]
_FLAGS = ("recovered", "compliant", "correct")


def condition_table(scored: pd.DataFrame, conditions: Sequence[str]) -> pd.DataFrame:
    """Count and rate the observed responses of each condition.

    Args:
        scored: Scored records (see the module docstring).
        conditions: Condition names in report order; every record's condition must be one of them.

    Returns:
        One row per condition, in the order of ``conditions`` (a condition without records gets zero
        counts and NaN rates), with columns:

        - ``condition``;
        - ``n_observed``, ``n_recovered``, ``n_correct``, ``n_compliant``: counts of observed responses,
          of those with a recovered answer, of those whose answer is correct, of those that followed the
          output instruction exactly; ``n_failed``: failed requests (not observed, excluded from the rest);
        - ``accuracy`` = n_correct / n_observed (UNKNOWN counts as wrong);
        - ``conditional_accuracy`` = n_correct / n_recovered (NaN when nothing was recovered);
        - ``answer_recovery_rate`` = n_recovered / n_observed;
        - ``unknown_rate`` = 1 - answer_recovery_rate;
        - ``instruction_compliance_rate`` = n_compliant / n_observed.

        Every rate over n_observed is NaN when n_observed is 0.

    Raises:
        ValueError: If a column is missing, a record names an unlisted condition, a cell has two observed
            records, or the flags contradict each other (see :func:`question_table`).
    """
    names = _check_conditions(conditions)
    frame = _prepare(scored, names)
    observed = frame[frame["observed"]]
    counts = observed.groupby("condition").agg(
        n_observed=("recovered", "size"),
        n_recovered=("recovered", "sum"),
        n_correct=("correct", "sum"),
        n_compliant=("compliant", "sum"),
    )
    table = counts.reindex(names, fill_value=0).astype("int64")
    failed = frame[~frame["observed"]].groupby("condition").size()
    table["n_failed"] = failed.reindex(names, fill_value=0).astype("int64")
    table = _add_rates(table)
    if not has_answer_key(scored):
        table[list(KEYED_RATES)] = np.nan  # nothing is correct or wrong without a key
    table.index.name = "condition"
    return table.reset_index()


def question_table(
    scored: pd.DataFrame, conditions: Sequence[str], question_ids: Sequence[str], repetitions: int
) -> pd.DataFrame:
    """Compare each question's answers across the conditions of one repetition.

    Args:
        scored: Scored records (see the module docstring).
        conditions: Condition names; k = len(conditions) conditions make a complete repetition.
        question_ids: The frozen set's question ids, in order. Questions without any record still get rows.
        repetitions: Number of repetitions of the run; records carry ``repetition`` in 0..repetitions-1.

    Returns:
        One row per (question_id, repetition), ordered by question (as in ``question_ids``) then
        repetition, with columns:

        - ``question_id``, ``repetition``;
        - ``correct_answer``: canonical label of the correct option (None if the question has no record);
        - ``n_observed``: observed responses (conditions answered, UNKNOWN included);
        - ``n_recovered``: observed responses with a recovered answer;
        - ``agreement`` = (count of the most frequent recovered answer) / n_recovered, NaN when
          n_recovered is 0. UNKNOWN responses are deliberately left out of both counts, so it lies in
          [1/k, 1];
        - ``prompt_sensitivity`` = 1 - agreement (NaN with it);
        - ``majority_answer``: the recovered answer strictly more frequent than every other, or None when
          the top count is tied or nothing was recovered;
        - ``majority_correct``: majority_answer exists and equals correct_answer (empty without a key);
        - ``unanimous``: all k conditions observed and recovered, all with the same answer;
        - ``invariant_incorrect``: unanimous and that answer is wrong (empty without a key);
        - ``complete``: all k conditions have an observed response (an UNKNOWN response counts).

    Raises:
        ValueError: If a column is missing; a record names an unlisted condition or question or a
            repetition outside 0..repetitions-1; a cell has two observed records; a question has two
            different correct answers; or an observed record's flags contradict each other (recovered
            without an answer or vice versa, ``correct`` different from answer == correct_answer).
    """
    names = _check_conditions(conditions)
    ids = _check_question_ids(question_ids)
    if repetitions < 1:
        raise ValueError(f"repetitions must be at least 1, got {repetitions}")
    frame = _prepare(scored, names)
    frame["repetition"] = _check_in_run(frame, ids, repetitions)

    index = pd.MultiIndex.from_product([ids, range(repetitions)], names=_QUESTION_REPETITION)
    observed = frame[frame["observed"]]
    by_cell = observed.groupby(_QUESTION_REPETITION)
    # One observed record per cell (checked in _prepare), so records counted here are conditions counted.
    n_observed = by_cell.size().reindex(index, fill_value=0)

    # How often each recovered answer was given, per (question, repetition).
    recovered = observed.loc[observed["recovered"], [*_QUESTION_REPETITION, "answer"]]  # only what is grouped
    answer_counts = recovered.groupby([*_QUESTION_REPETITION, "answer"]).size()
    by_answers = answer_counts.groupby(level=_QUESTION_REPETITION)
    n_recovered = by_answers.sum().reindex(index, fill_value=0)
    top_count = by_answers.max().reindex(index)
    n_distinct = by_answers.size().reindex(index, fill_value=0)
    # The majority is the answer holding the top count alone: drop (question, repetition)s with a tie.
    leaders = answer_counts[answer_counts.eq(by_answers.transform("max"))].reset_index()
    leaders = leaders.drop_duplicates(subset=_QUESTION_REPETITION, keep=False)
    majority = _nullable(leaders.set_index(_QUESTION_REPETITION)["answer"].reindex(index))

    key = _correct_answers(frame).reindex(index.get_level_values("question_id"))
    correct_answer = _nullable(pd.Series(key.to_numpy(), index=index))

    k = len(names)
    agreement = _ratio(top_count.astype("float64"), n_recovered)
    unanimous = (n_recovered == k) & (n_distinct == 1)
    majority_correct = majority.notna() & (majority == correct_answer)
    table = pd.DataFrame(
        {
            "correct_answer": correct_answer,
            "n_observed": n_observed.astype("int64"),
            "n_recovered": n_recovered.astype("int64"),
            "agreement": agreement,
            "prompt_sensitivity": 1.0 - agreement,
            "majority_answer": majority,
            "majority_correct": majority_correct.astype(bool),
            "unanimous": unanimous.astype(bool),
            # A unanimous answer is the majority answer, so "wrong" is "majority not correct".
            "invariant_incorrect": (unanimous & ~majority_correct).astype(bool),
            "complete": (n_observed == k).astype(bool),
        },
        index=index,
    )
    if not has_answer_key(scored):
        # Without a key no answer is correct or wrong: leave these empty rather than False.
        table["majority_correct"] = pd.Series(pd.NA, index=index, dtype="boolean")
        table["invariant_incorrect"] = pd.Series(pd.NA, index=index, dtype="boolean")
    return table.reset_index()


def question_summary(questions: pd.DataFrame) -> pd.DataFrame:
    """Average a :func:`question_table` over each question's repetitions.

    Args:
        questions: Output of :func:`question_table`.

    Returns:
        One row per question (in the table's order) with columns:

        - ``question_id``, ``correct_answer``;
        - ``n_observed``, ``n_recovered``: summed over repetitions;
        - ``agreement``: mean of the per-repetition agreement, ignoring NaN (NaN when no repetition
          recovered any answer); ``prompt_sensitivity`` = 1 - agreement;
        - ``majority_correct_rate``, ``unanimous_rate``, ``invariant_incorrect_rate``: the fraction of the
          question's repetitions in which majority_correct / unanimous / invariant_incorrect holds;
        - ``complete``: every repetition is complete, i.e. every (condition, repetition) cell has an
          observed response.
    """
    grouped = questions.groupby("question_id", sort=False)
    summary = grouped.agg(
        correct_answer=("correct_answer", "first"),
        n_observed=("n_observed", "sum"),
        n_recovered=("n_recovered", "sum"),
        agreement=("agreement", "mean"),
        majority_correct_rate=("majority_correct", "mean"),
        unanimous_rate=("unanimous", "mean"),
        invariant_incorrect_rate=("invariant_incorrect", "mean"),
        complete=("complete", "all"),
    )
    summary["correct_answer"] = _nullable(summary["correct_answer"])
    summary["prompt_sensitivity"] = 1.0 - summary["agreement"]
    columns = [*summary.columns[:4], "prompt_sensitivity", *summary.columns[4:-1]]
    return summary[columns].reset_index()


def summary_metrics(
    scored: pd.DataFrame, conditions: Sequence[str], question_ids: Sequence[str], repetitions: int,
    question_conditions: Sequence[str] | None = None,
) -> dict[str, float]:
    """Compute the run-level metrics logged to MLflow (docs/architecture.md, "MLflow").

    Args:
        scored: Scored records (see the module docstring).
        conditions: Condition names in report order.
        question_conditions: The conditions the question-level metrics compare answers across (default:
            all of ``conditions``); a run passes its invariant ones (:mod:`prism.results.roles`), since answers
            scored against different keys are not the same question asked twice. The rates use every
            condition, each against its own key.
        question_ids: The frozen set's question ids; n_questions = len(question_ids), so questions with
            no record at all still count in every per-question denominator.
        repetitions: Number of repetitions of the run.

    Returns:
        A dict with exactly these keys (NaN where a denominator is 0); for items without an answer key
        (every ``correct_answer`` null) the keys :func:`needs_key` names are left out:

        - ``accuracy``, ``conditional_accuracy``, ``answer_recovery_rate``, ``unknown_rate``,
          ``instruction_compliance_rate``: as in :func:`condition_table`, pooled over all observed
          responses of all conditions and repetitions;
        - the same five per condition, as ``<rate>/<condition>`` (e.g. ``accuracy/P0``);
        - ``question_majority_accuracy``: sum over questions of the fraction of their repetitions whose
          majority answer is correct, / n_questions (no majority counts as not correct);
        - ``mean_agreement``: mean over questions of their agreement (:func:`question_summary`), over
          the questions with at least one recovered answer only;
        - ``mean_prompt_sensitivity`` = 1 - mean_agreement;
        - ``answer_unanimous_rate``: sum over questions of their unanimous fraction / n_questions;
        - ``prompt_invariant_incorrect_rate``: same with invariant_incorrect;
        - ``complete_questions``: number of questions with an observed response in every
          (condition, repetition) cell of ``question_conditions``;
        - ``n_questions``: size of the frozen set;
        - ``n_responses``: number of observed responses (failed requests excluded).

    Raises:
        ValueError: As :func:`question_table`.
    """
    conditions_df = condition_table(scored, conditions)
    across = list(conditions if question_conditions is None else question_conditions)
    shared = scored[scored["condition"].isin(across)] if len(scored) else scored
    per_question = question_summary(question_table(shared, across, question_ids, repetitions))
    keyed = has_answer_key(scored)

    metrics: dict[str, float] = {}
    overall = _add_rates(conditions_df[_COUNT_COLUMNS].sum().to_frame().T)
    for name in RATE_NAMES:
        metrics[name] = float(overall[name].iloc[0])
    for name in RATE_NAMES:
        for condition, value in zip(conditions_df["condition"], conditions_df[name], strict=True):
            metrics[condition_metric(name, condition)] = float(value)

    n_questions = len(per_question)
    # Question-level rates divide by the whole frozen set, not by the questions that got answers.
    mean_agreement = float(per_question["agreement"].mean()) if n_questions else float("nan")
    metrics[METRIC_QUESTION_MAJORITY_ACCURACY] = _fraction(
        per_question["majority_correct_rate"].sum(), n_questions
    )
    metrics[METRIC_MEAN_AGREEMENT] = mean_agreement
    metrics[METRIC_MEAN_PROMPT_SENSITIVITY] = 1.0 - mean_agreement
    metrics[METRIC_ANSWER_UNANIMOUS] = _fraction(per_question["unanimous_rate"].sum(), n_questions)
    metrics[METRIC_PROMPT_INVARIANT_INCORRECT] = _fraction(
        per_question["invariant_incorrect_rate"].sum(), n_questions
    )
    metrics[METRIC_COMPLETE_QUESTIONS] = float(per_question["complete"].sum())
    metrics[METRIC_N_QUESTIONS] = float(n_questions)
    metrics[METRIC_N_RESPONSES] = float(conditions_df["n_observed"].sum())
    if not keyed:
        metrics = {name: value for name, value in metrics.items() if not needs_key(name)}
    return metrics


def parse_method_shares(scored: pd.DataFrame, methods: Sequence[str]) -> dict[str, float]:
    """The share of observed responses each parser rule decided, so a user sees why recovery is low.

    Args:
        scored: Scored records; only observed ones (``error`` null) are counted.
        methods: Every method the parser can return (``prism.parsing.METHODS``): each gets a key, 0.0 when
            no response took it, so runs compare key by key.

    Returns:
        ``{"parse_method/<method>": share}``, NaN for every method when no response was observed.
    """
    observed = scored.loc[scored["error"].isna(), "method"] if len(scored) else pd.Series(dtype=str)
    counts = observed.value_counts()
    return {PARSE_METHOD_PREFIX + method: _fraction(float(counts.get(method, 0)), len(observed)) for method in methods}
def needs_key(metric: str) -> bool:
    """Whether a summary metric (``accuracy``, ``accuracy/P0``...) is only defined for items with a key."""
    return metric.split("/")[0] in (*KEYED_RATES, *KEYED_QUESTION_METRICS)


def has_answer_key(scored: pd.DataFrame) -> bool:
    """Whether the run's items have an answer key: True unless every record's ``correct_answer`` is null.

    An empty run counts as keyed (nothing says otherwise), so its metrics keep their usual NaN keys.

    Raises:
        ValueError: If some records have a key and others do not (one run holds one dataset's items).
    """
    if len(scored) == 0 or "correct_answer" not in scored.columns:
        return True
    missing = scored["correct_answer"].isna()
    if missing.all():
        return False
    if missing.any():
        raise ValueError(f"{int(missing.sum())} of {len(scored)} records have no correct_answer while the others "
                         "have one; a run holds items of one dataset, all with a key or all without")
    return True


def _add_rates(counts: pd.DataFrame) -> pd.DataFrame:
    """Return ``counts`` with the RATE_NAMES columns computed from its count columns."""
    table = counts.copy()
    table[METRIC_ACCURACY] = _ratio(counts["n_correct"], counts["n_observed"])
    table[METRIC_CONDITIONAL_ACCURACY] = _ratio(counts["n_correct"], counts["n_recovered"])
    table[METRIC_ANSWER_RECOVERY] = _ratio(counts["n_recovered"], counts["n_observed"])
    table[METRIC_UNKNOWN_RATE] = 1.0 - table[METRIC_ANSWER_RECOVERY]
    table[METRIC_INSTRUCTION_COMPLIANCE] = _ratio(counts["n_compliant"], counts["n_observed"])
    return table


def _ratio(numerator: pd.Series, denominator: pd.Series) -> pd.Series:
    """Elementwise numerator / denominator as float, NaN where the denominator is 0."""
    den = denominator.astype("float64")
    return (numerator.astype("float64") / den.where(den > 0)).astype("float64")


def _fraction(numerator: float, denominator: int) -> float:
    """Return numerator / denominator, NaN when the denominator is 0."""
    return float(numerator) / denominator if denominator else float("nan")


def _nullable(values: pd.Series) -> pd.Series:
    """Return ``values`` as an object Series whose missing entries are None (not NaN), for labels."""
    return values.astype(object).where(values.notna(), None)


def _check_conditions(conditions: Sequence[str]) -> list[str]:
    names = list(conditions)
    if not names:
        raise ValueError("at least one condition is required")
    if len(set(names)) != len(names):
        raise ValueError(f"condition names must be distinct, got {names}")
    return names


def _check_question_ids(question_ids: Sequence[str]) -> list[str]:
    ids = list(question_ids)
    if len(set(ids)) != len(ids):
        raise ValueError("question ids must be distinct")
    return ids


def _prepare(scored: pd.DataFrame, conditions: list[str]) -> pd.DataFrame:
    """Validate the scored records and return them with boolean flags and an ``observed`` column."""
    if len(scored) == 0:
        # An empty run (e.g. every record still pending) may not even have the columns.
        scored = scored.reindex(columns=list(REQUIRED_COLUMNS))
    missing = [column for column in REQUIRED_COLUMNS if column not in scored.columns]
    if missing:
        raise ValueError(f"scored records lack the columns {missing}")
    # A new frame of the same columns, not a copy of them: the flags below are replaced, never written into.
    frame = scored.loc[:, list(REQUIRED_COLUMNS)]
    frame["observed"] = frame["error"].isna()
    observed = frame["observed"]

    keyless = frame["correct_answer"].isna()
    for flag in _FLAGS:
        # Items without a key carry correct=None (scoring.score_record); every other flag is always set.
        nulls = frame.loc[observed & ~keyless, flag].isna() if flag == "correct" else frame.loc[observed, flag].isna()
        if nulls.any():
            raise ValueError(f"observed records have a null {flag!r}")
        # Failed records carry False (scoring.score_record); a null there is harmless.
        frame[flag] = frame[flag].astype("boolean").fillna(False).astype(bool)

    unknown = sorted(set(frame["condition"]) - set(conditions), key=str)
    if unknown:
        raise ValueError(f"records name conditions {unknown} not in {conditions}")
    rows = frame[observed]
    duplicated = rows.duplicated(subset=_CELL, keep=False)
    if duplicated.any():
        cells = rows[duplicated][_CELL].drop_duplicates().head(3).to_dict("records")
        raise ValueError(f"more than one observed record per (question, condition, repetition), e.g. {cells}")

    has_answer = rows["answer"].notna()
    if (rows["recovered"] != has_answer).any():
        raise ValueError("observed records must have an answer exactly when recovered is true")
    expected = rows["recovered"] & has_answer & (rows["answer"] == rows["correct_answer"])
    keyed = rows["correct_answer"].notna()
    if (rows.loc[keyed, "correct"] != expected[keyed]).any():
        raise ValueError("observed records must have correct == (answer == correct_answer)")
    return frame


def _check_in_run(frame: pd.DataFrame, question_ids: list[str], repetitions: int) -> pd.Series:
    """Raise ValueError for records outside the frozen set or the run's repetitions.

    Returns:
        The repetition column as int64, so it matches the integer repetitions of the result's index.
    """
    strangers = sorted(set(frame["question_id"]) - set(question_ids), key=str)
    if strangers:
        raise ValueError(f"{len(strangers)} question ids are not in the frozen set, e.g. {strangers[:3]}")
    repetition = pd.to_numeric(frame["repetition"], errors="coerce")
    outside = ~repetition.isin(np.arange(repetitions))
    if outside.any():
        values = sorted(set(frame.loc[outside, "repetition"]), key=str)[:3]
        raise ValueError(f"repetition must be an integer in 0..{repetitions - 1}, got {values}")
    return repetition.astype("int64")


def _correct_answers(frame: pd.DataFrame) -> pd.Series:
    """Return each recorded question's correct answer, indexed by question_id."""
    keyed = frame.loc[frame["correct_answer"].notna(), ["question_id", "correct_answer"]]  # not every column
    per_question = keyed.groupby("question_id")["correct_answer"]
    conflicting = per_question.nunique() > 1
    if conflicting.any():
        raise ValueError(
            f"questions with several correct answers: {list(conflicting[conflicting].index[:3])}"
        )
    return per_question.first()
