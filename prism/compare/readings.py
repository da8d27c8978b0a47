"""Descriptive readings of one run's question-level metrics: patterns in the numbers, not verdicts.

Three numbers of a run are read together (docs/architecture.md, MLflow metrics): ``question_majority_accuracy`` (how
often the answer most conditions give is right), ``mean_agreement`` (how much a question's answers agree
across conditions) and ``prompt_invariant_incorrect_rate`` (how often every condition gives the same
wrong answer). Fixed thresholds turn them into four patterns; the report states the thresholds, shows
the numbers with their intervals and says when an interval straddles a threshold, so a reader can see
how firm each reading is. Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from prism.names import METRIC_MEAN_AGREEMENT, METRIC_PROMPT_INVARIANT_INCORRECT, METRIC_QUESTION_MAJORITY_ACCURACY
from prism.stats import basics
from prism.stats.basics import Estimate

ACCURATE_AND_STABLE = "accurate and stable"
PROMPT_DEPENDENT = "capable but prompt-dependent"
CONSISTENTLY_WRONG = "consistently wrong"
INACCURATE_AND_UNSTABLE = "inaccurate and unstable"
# The first three are exclusive (the two thresholds split the plane); the last can join any of them.
PATTERNS = (ACCURATE_AND_STABLE, PROMPT_DEPENDENT, INACCURATE_AND_UNSTABLE, CONSISTENTLY_WRONG)


@dataclass(frozen=True)
class Thresholds:
    """Where the readings draw their lines (round numbers, stated on the page; not calibrated).

    Attributes:
        accurate: Question-majority accuracy at or above this reads as mostly right.
        stable: Mean agreement at or above this reads as stable (with five conditions, 0.8 is four of
            five answers to a question agreeing, on average).
        invariant_wrong: A prompt-invariant incorrect rate at or above this reads as consistently wrong.
        recovery: Below this answer recovery rate, the page warns that agreement rests on fewer answers.
    """

    accurate: float = 0.6
    stable: float = 0.8
    invariant_wrong: float = 0.2
    recovery: float = 0.9


THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class ModelNumbers:
    """The numbers one reading is made of.

    Attributes:
        label: The run's name in the tables.
        majority_accuracy: ``question_majority_accuracy`` with its interval.
        agreement: ``mean_agreement`` with its interval.
        invariant_incorrect: ``prompt_invariant_incorrect_rate`` with its interval.
        recovery: ``answer_recovery_rate`` (NaN when not logged).
        no_key: The items have no answer key (survey items): the two keyed numbers cannot exist, and are
            shown as "n/a (no answer key)" rather than as undefined.
    """

    label: str
    majority_accuracy: Estimate
    agreement: Estimate
    invariant_incorrect: Estimate
    recovery: float
    no_key: bool = False


@dataclass(frozen=True)
class Reading:
    """What a run's numbers show.

    Attributes:
        label: The run's name in the tables.
        patterns: The patterns whose rules hold (in :data:`PATTERNS` order; empty when none does).
        borderline: One note per threshold whose 95% interval straddles it: that part of the reading
            could change with another sample of questions.
        cautions: Other reasons to read with care (few recovered answers, an undefined number).
        gap: When no pattern holds although every number is defined, what the numbers show instead.
    """

    label: str
    patterns: tuple[str, ...]
    borderline: tuple[str, ...]
    cautions: tuple[str, ...]
    gap: str = ""


def read_patterns(numbers: ModelNumbers, thresholds: Thresholds = THRESHOLDS) -> Reading:
    """Apply the pattern rules to one run's numbers.

    Rules (A, S, W the thresholds): accurate and stable = accuracy >= A and agreement >= S; capable but
    prompt-dependent = accuracy >= A and agreement < S; inaccurate and unstable = accuracy < A and
    agreement < S; consistently wrong = invariant incorrect rate >= W, which may hold beside another
    pattern (a model can be right on most questions and still wrong the same way on a fifth of them).
    """
    acc, agree, wrong = (numbers.majority_accuracy.value, numbers.agreement.value,
                         numbers.invariant_incorrect.value)
    keyed = ("Question-majority accuracy", "The prompt-invariant incorrect rate")
    cautions = [f"{name} is undefined for this run, so the patterns that use it are not read."
                for name, value in (("Question-majority accuracy", acc), ("Mean agreement", agree),
                                    ("The prompt-invariant incorrect rate", wrong))
                if math.isnan(value) and not (numbers.no_key and name in keyed)]
    if numbers.no_key:
        cautions.insert(0, "The items have no answer key: question-majority accuracy and the prompt-invariant "
                           "incorrect rate are n/a (no answer key), so only how much the answers agree is read.")
    if numbers.recovery == 0:
        cautions.append("No response had a recoverable answer: none named an option in a form the parser "
                        "recognises, so every answer is UNKNOWN.")
    elif not math.isnan(numbers.recovery) and numbers.recovery < thresholds.recovery:
        cautions.append(f"Only {numbers.recovery:.0%} of responses had a recoverable answer (below "
                        f"{thresholds.recovery:.0%}); agreement counts recovered answers only, so it rests on fewer.")
    patterns, gap = [], ""
    if not (math.isnan(acc) or math.isnan(agree)):
        accurate, stable = acc >= thresholds.accurate, agree >= thresholds.stable
        patterns += [name for name, holds in ((ACCURATE_AND_STABLE, accurate and stable),
                                              (PROMPT_DEPENDENT, accurate and not stable),
                                              (INACCURATE_AND_UNSTABLE, not accurate and not stable)) if holds]
    if not math.isnan(wrong) and wrong >= thresholds.invariant_wrong:
        patterns.append(CONSISTENTLY_WRONG)
    if not patterns and not any(math.isnan(v) for v in (acc, agree, wrong)):
        # The one gap the rules leave: mostly wrong, the answers given agree, yet rarely all wrong alike.
        why = (f" (unanimity needs a recovered answer under every condition, and only {numbers.recovery:.0%} of "
               "responses had one)" if not math.isnan(numbers.recovery) and numbers.recovery < thresholds.recovery
               else "")
        gap = ("None of the four patterns fits: the majority answer is mostly wrong and the answers given agree "
               f"across conditions, yet few questions get the same wrong answer under every condition{why}.")
    borderline = [note for note in (
        _straddles("question-majority accuracy", numbers.majority_accuracy, thresholds.accurate),
        _straddles("mean agreement", numbers.agreement, thresholds.stable),
        _straddles("prompt-invariant incorrect rate", numbers.invariant_incorrect, thresholds.invariant_wrong),
    ) if note]
    ordered = tuple(p for p in PATTERNS if p in patterns)
    return Reading(numbers.label, ordered, tuple(borderline), tuple(cautions), gap)


def _straddles(name: str, estimate: Estimate, threshold: float) -> str | None:
    if math.isnan(estimate.ci_low) or not estimate.ci_low < threshold <= estimate.ci_high:
        return None
    return (f"the 95% interval of {name} [{estimate.ci_low:.2f}, {estimate.ci_high:.2f}] includes the "
            f"threshold {threshold:.2f}")


def question_estimates(question_metrics: pd.DataFrame, *, n_boot: int, seed: int) -> dict[str, Estimate]:
    """Bootstrap intervals (over questions) for the three metrics, from a run's ``question_metrics.csv``.

    Each question is first reduced to its own value, averaged over repetitions exactly as
    :func:`prism.results.metrics.summary_metrics` does, so the point values equal the run's logged metrics.

    Returns:
        ``question_majority_accuracy``, ``mean_agreement`` and ``prompt_invariant_incorrect_rate``; the first
        and last undefined when the items have no answer key (both keyed columns empty), never a 0.
    """
    return question_estimates_of([question_metrics], n_boot=n_boot, seed=seed)[0]


def question_estimates_of(frames: Sequence[pd.DataFrame], *, n_boot: int,
                          seed: int) -> list[dict[str, Estimate]]:
    """:func:`question_estimates` of each run's question metrics, their intervals drawn together.

    Each interval is :func:`prism.stats.basics.pooled_rate`'s over the run's questions; those over the same
    number of questions share one set of weights (:func:`prism.stats.basics.ratio_estimates`, the same
    estimates), so a report of many runs takes one matrix product for them instead of two matrix-vector
    products per interval.
    """
    sums: list[tuple[NDArray[np.float64], NDArray[np.float64]]] = []
    named: list[tuple[bool, list[str]]] = []
    for question_metrics in frames:
        frame = question_metrics.copy()
        # Items without an answer key leave both keyed columns empty: those two numbers do not exist.
        keyless = all(column not in frame or frame[column].isna().all()
                      for column in ("majority_correct", "invariant_incorrect"))
        for column in ("majority_correct", "invariant_incorrect"):
            # pandas reads the CSV's True/False as bool, but a column of one kind of missing value as object.
            frame[column] = frame[column].astype(str).str.lower().eq("true").astype(float)
        per_question = frame.groupby("question_id", sort=False).agg(
            majority=("majority_correct", "mean"), wrong=("invariant_incorrect", "mean"),
            agreement=("agreement", "mean"))
        agreed = per_question["agreement"].dropna()
        values = {METRIC_QUESTION_MAJORITY_ACCURACY: per_question["majority"], METRIC_MEAN_AGREEMENT: agreed,
                  METRIC_PROMPT_INVARIANT_INCORRECT: per_question["wrong"]}
        names = [METRIC_MEAN_AGREEMENT] if keyless else list(values)
        sums += [basics.question_sums(values[name], values[name].index) for name in names]
        named.append((keyless, names))
    found = iter(basics.ratio_estimates(sums, n_boot=n_boot, seed=seed))
    estimates: list[dict[str, Estimate]] = []
    for keyless, names in named:
        own = {name: next(found) for name in names}
        if keyless:
            own = {METRIC_MEAN_AGREEMENT: own[METRIC_MEAN_AGREEMENT],
                   METRIC_QUESTION_MAJORITY_ACCURACY: Estimate.undefined(),
                   METRIC_PROMPT_INVARIANT_INCORRECT: Estimate.undefined()}
        estimates.append(own)
    return estimates
