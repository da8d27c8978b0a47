"""Statistics for comparisons: paired bootstrap intervals, exact McNemar, Holm, Cohen's kappa, rates.

Pure functions over numpy arrays and pandas objects, no I/O. The field's libraries do the statistics:

- ``scipy.stats.binomtest`` computes the exact McNemar p-value (a two-sided binomial test on the
  discordant pairs);
- Holm-adjusted p-values are ``statsmodels.stats.multitest.multipletests(method="holm")``'s, computed
  with its very numpy operations (a test holds them equal): the library runs a full ``gc.collect()`` on
  every call, a tenth of a second each with MLflow and pandas loaded, twice per compared run;
- ``statsmodels.stats.inter_rater.cohens_kappa`` computes Cohen's kappa from the contingency table;
- ``numpy.random.default_rng(seed)`` draws the bootstrap resamples and ``numpy.percentile`` reads the
  percentile interval off them.

scipy and statsmodels are imported inside the functions that use them, so importing this module (and
``prism.compare``) stays cheap.

Vocabulary:

- A *cell* is one (question, condition, repetition). Rates here are pooled over cells: a ratio of sums
  (e.g. the share of paired cells whose answers differ).
- Questions are the unit of resampling: every bootstrap draws questions with replacement and keeps all of
  a question's cells (its conditions, repetitions, and both sides of each pair) together. That is what
  makes the bootstrap *paired*: the two answers being compared are never separated.
- Answers are categories: a canonical label, or :data:`UNKNOWN` when the parser recovered none. UNKNOWN
  is an outcome of its own, so two UNKNOWN answers agree and UNKNOWN differs from every label.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

# The answer category of a response without a recovered answer. Canonical labels are "A", "B", ...,
# so this cannot collide with one.
UNKNOWN = "UNKNOWN"

# Coverage of every interval in PRISM.
LEVEL = 0.95

# The significance level of every test PRISM reports as significant: a condition whose Holm-adjusted
# McNemar p is below it (the comparison's significant_conditions metric, the report's highlighted rows)
# and a shift (an excess above 0 whose Holm-adjusted permutation p is below it).
SIGNIFICANCE = 0.05

# Upper bound on the size of one block of bootstrap indices (n_boot x n_questions), to bound memory.
_BLOCK_ELEMENTS = 2_000_000

# Upper bound on the resampling weights kept for reuse (64 MiB of float64; see resample_weights).
_CACHE_ELEMENTS = 8_000_000
_WEIGHTS_CACHE: OrderedDict[tuple[int, int, int], tuple[NDArray[np.float64], ...]] = OrderedDict()
_CACHE_LOCK = threading.Lock()

# Bootstrap statistics spread less than this (relative) are one value up to rounding: the interval is
# then the point itself, so that a constant statistic reads [x, x] and never [x - 1e-17, x + 1e-17].
_DEGENERATE_RTOL = 1e-12


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its percentile bootstrap interval.

    Attributes:
        value: The statistic on the observed data (NaN when it is undefined, e.g. no paired cell).
        ci_low: Lower end of the interval (NaN exactly when ``value`` is NaN).
        ci_high: Upper end of the interval.
    """

    value: float
    ci_low: float
    ci_high: float

    @classmethod
    def undefined(cls) -> Estimate:
        """The estimate of a statistic with no data behind it."""
        return cls(math.nan, math.nan, math.nan)


def answer_categories(answers: pd.Series) -> pd.Series:
    """Map canonical answers to categories: null (UNKNOWN) becomes :data:`UNKNOWN`, labels stay.

    Comparing raw answers would treat two UNKNOWNs as different (missing values never compare equal in
    pandas); comparing categories treats UNKNOWN as an outcome of its own.
    """
    return answers.astype(object).where(answers.notna(), UNKNOWN).astype(str)


def bootstrap_interval(
    statistic: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    n_questions: int,
    point: float,
    *,
    n_boot: int,
    seed: int,
    level: float = LEVEL,
) -> tuple[float, float]:
    """Percentile interval of a statistic under resampling of questions with replacement.

    Args:
        statistic: Maps a (b, n_questions) array of resampling weights (row r, column i: how many times
            resample r drew question i) to the b values of the statistic. Weights rather than indices let
            pooled sums be matrix products, several times faster than gathering. The weights are
            read-only: the same ones are handed to every call with the same arguments (:func:`resample_weights`).
        n_questions: Number of questions (clusters) to resample.
        point: The statistic on the observed data; returned as both ends when the resampled values do
            not vary (a degenerate distribution gives [x, x], never NaN).
        n_boot: Number of resamples (B).
        seed: Seed of ``numpy.random.default_rng``; the same seed and data give the same interval.
        level: Coverage, e.g. 0.95 for the 2.5th and 97.5th percentiles.

    Returns:
        (low, high) from ``numpy.percentile`` (linear interpolation) of the finite resampled values;
        (NaN, NaN) when there are no questions or ``point`` is NaN.

    Raises:
        ValueError: If ``n_boot`` < 1 or ``level`` is not in (0, 1).
    """
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if n_questions == 0 or math.isnan(point):
        return math.nan, math.nan
    values = np.empty(n_boot, dtype=np.float64)
    start = 0
    for weights in resample_weights(n_questions, n_boot, seed):
        values[start : start + len(weights)] = statistic(weights)
        start += len(weights)
    return percentile_interval(values, point, level)


def _draw_weights(n_questions: int, n_boot: int, seed: int) -> Iterator[NDArray[np.float64]]:
    """Draw the resampling weights in blocks of at most ``_BLOCK_ELEMENTS`` (see :func:`resample_weights`)."""
    rng = np.random.default_rng(seed)
    block = max(1, _BLOCK_ELEMENTS // n_questions)
    for start in range(0, n_boot, block):
        rows = min(block, n_boot - start)
        drawn = rng.integers(0, n_questions, size=(rows, n_questions))
        # Row r's draws, counted per question: offset each row's indices into its own block of n_questions.
        flat = (np.arange(rows)[:, None] * n_questions + drawn).ravel()
        weights = np.bincount(flat, minlength=rows * n_questions).reshape(rows, n_questions)
        yield weights.astype(np.float64)


def resample_weights(n_questions: int, n_boot: int, seed: int) -> Iterable[NDArray[np.float64]]:
    """The resampling weights of :func:`bootstrap_interval`, as row blocks of the (n_boot, n_questions) matrix.

    They depend on nothing but the arguments, and a comparison asks for the same ones again and again (every
    row of its tables over one set of questions, every pair of models), so the most recently used are kept,
    read-only, up to ``_CACHE_ELEMENTS`` weights in all; drawing them took most of a bootstrap's time. A
    matrix larger than that is drawn block by block each time, as before, so memory stays bounded.
    """
    key = (n_questions, n_boot, seed)
    with _CACHE_LOCK:
        cached = _WEIGHTS_CACHE.get(key)
        if cached is not None:
            _WEIGHTS_CACHE.move_to_end(key)
            return cached
    if n_questions * n_boot > _CACHE_ELEMENTS:
        return _draw_weights(n_questions, n_boot, seed)
    blocks = tuple(_draw_weights(n_questions, n_boot, seed))
    for weights in blocks:
        weights.setflags(write=False)
    with _CACHE_LOCK:
        _WEIGHTS_CACHE[key] = blocks
        while sum(n * b for n, b, _ in _WEIGHTS_CACHE) > _CACHE_ELEMENTS:
            _WEIGHTS_CACHE.popitem(last=False)
    return blocks


def percentile_interval(values: NDArray[np.float64], point: float, level: float = LEVEL) -> tuple[float, float]:
    """Read a percentile interval off resampled values of a statistic.

    Shared by every bootstrap in PRISM (:func:`bootstrap_interval` and the two-level bootstrap of
    :mod:`prism.stats.shifts`), so all intervals treat degenerate and undefined resamples alike.

    Args:
        values: The statistic on each resample; NaN and infinite values (undefined resamples) are ignored.
        point: The statistic on the observed data.
        level: Coverage, e.g. 0.95 for the 2.5th and 97.5th percentiles.

    Returns:
        (low, high) from ``numpy.percentile`` (linear interpolation) of the finite values; (point, point)
        when no value is finite or they do not vary (a degenerate distribution gives [x, x], never NaN).
    """
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return point, point
    low, high = (float(v) for v in np.percentile(finite, [50 * (1 - level), 50 * (1 + level)]))
    if high - low <= _DEGENERATE_RTOL * max(1.0, abs(point)):
        return point, point
    return low, high


def question_sums(values: ArrayLike, questions: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Sum cell values and count cells per question, in order of first appearance.

    Args:
        values: One numeric (or boolean) value per cell.
        questions: The question id of each cell.

    Returns:
        (numerators, denominators), one entry per distinct question. As in a pandas groupby, a missing
        question id is left out and a NaN value adds nothing to its question's sum. Counted with
        ``numpy.bincount`` over ``pandas.factorize`` codes, several times faster than a groupby (sums of
        whole numbers, the only values PRISM passes, are exact either way).
    """
    value = np.asarray(values, dtype=np.float64)
    codes, uniques = pd.factorize(np.asarray(questions), sort=False)  # codes in order of first appearance
    keep = codes >= 0
    codes, value = codes[keep], value[keep]
    numerators = np.bincount(codes, weights=np.where(np.isnan(value), 0.0, value), minlength=len(uniques))
    return numerators.astype(np.float64), np.bincount(codes, minlength=len(uniques)).astype(np.float64)


def ratio_estimate(
    numerators: ArrayLike, denominators: ArrayLike, *, n_boot: int, seed: int, level: float = LEVEL
) -> Estimate:
    """Estimate sum(numerators) / sum(denominators) with a bootstrap over questions.

    Args:
        numerators: Per question, the sum of the cell values (e.g. cells whose answers differ).
        denominators: Per question, the number of cells; questions with 0 are left out.
        n_boot: Bootstrap resamples.
        seed: Bootstrap seed.
        level: Interval coverage.

    Returns:
        The pooled rate and its percentile interval (resampling questions; :func:`bootstrap_interval`).
    """
    num = np.asarray(numerators, dtype=np.float64)
    den = np.asarray(denominators, dtype=np.float64)
    keep = den > 0
    num, den = num[keep], den[keep]
    if num.size == 0:
        return Estimate.undefined()
    point = float(num.sum() / den.sum())

    def statistic(weights: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray((weights @ num) / (weights @ den), dtype=np.float64)

    low, high = bootstrap_interval(statistic, num.size, point, n_boot=n_boot, seed=seed, level=level)
    return Estimate(point, low, high)


# Whole numbers up to this are exact in float64, and so is every sum of them below it.
_EXACT = 2.0**52

# Most statistics of one matrix product in :func:`ratio_estimates` (bounds its (n_boot, 2 x this) result).
_BATCH = 64


def _whole(values: NDArray[np.float64]) -> bool:
    return bool(np.all(np.isfinite(values)) and np.all(values == np.floor(values)))


def ratio_estimates(sums: Sequence[tuple[ArrayLike, ArrayLike]], *, n_boot: int, seed: int,
                    level: float = LEVEL) -> list[Estimate]:
    """:func:`ratio_estimate` of each (numerators, denominators), the statistics of one question count at once.

    Every estimate is the one :func:`ratio_estimate` returns: same weights, same values, same interval.
    The estimates over the same number of questions share one set of weights (:func:`resample_weights`),
    so their resampled sums are taken in one matrix product instead of two matrix-vector products each,
    which read the whole (n_boot, n) weights from memory every time (most of the scorecard's time). That
    product sums in another order than the matrix-vector product, which is exact only for whole numbers:
    sums whose numerators and denominators are whole (counts of cells, as every PRISM rate is) and small
    enough that every resampled sum stays below 2**52 are batched; any other is estimated alone by
    :func:`ratio_estimate`.

    Args:
        sums: Per statistic, (numerators, denominators) per question (:func:`question_sums`).
        n_boot: Bootstrap resamples.
        seed: Bootstrap seed.
        level: Interval coverage.

    Returns:
        One :class:`Estimate` per entry of ``sums``, in order.
    """
    found: list[Estimate | None] = [None] * len(sums)
    batches: dict[int, list[tuple[int, NDArray[np.float64], NDArray[np.float64]]]] = {}
    for i, (numerators, denominators) in enumerate(sums):
        num = np.asarray(numerators, dtype=np.float64)
        den = np.asarray(denominators, dtype=np.float64)
        keep = den > 0
        num, den = num[keep], den[keep]
        # A resample draws n questions, so its sums are at most n times the largest entry.
        bound = num.size * max(float(np.abs(num).max(initial=0.0)), float(np.abs(den).max(initial=0.0)))
        if num.size == 0 or not (_whole(num) and _whole(den) and bound < _EXACT):
            found[i] = ratio_estimate(num, den, n_boot=n_boot, seed=seed, level=level)
            continue
        batches.setdefault(num.size, []).append((i, num, den))
    if batches and n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    if batches and not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    for n, members in batches.items():
        for start in range(0, len(members), _BATCH):
            chunk = members[start : start + _BATCH]
            # Columns: every member's numerators, then every member's denominators.
            stacked = np.column_stack([num for _, num, _ in chunk] + [den for _, _, den in chunk])
            resampled = np.empty((n_boot, stacked.shape[1]), dtype=np.float64)
            row = 0
            for weights in resample_weights(n, n_boot, seed):
                resampled[row : row + len(weights)] = weights @ stacked
                row += len(weights)
            for j, (i, num, den) in enumerate(chunk):
                point = float(num.sum() / den.sum())
                values = resampled[:, j] / resampled[:, len(chunk) + j]
                found[i] = Estimate(point, *percentile_interval(values, point, level))
    return [e if e is not None else Estimate.undefined() for e in found]


def pooled_rate(values: ArrayLike, questions: ArrayLike, *, n_boot: int, seed: int, level: float = LEVEL) -> Estimate:
    """Mean of a per-cell value pooled over cells, with a bootstrap that resamples questions.

    When each value is a paired quantity (1 where two answers differ, or correct_c - correct_baseline),
    this is the paired bootstrap: both sides of a pair always travel together with their question.

    Args:
        values: One value per cell (e.g. 1 where two answers differ, or correct_c - correct_base).
        questions: The question id of each cell (the resampling unit).
        n_boot: Bootstrap resamples.
        seed: Bootstrap seed.
        level: Interval coverage.

    Returns:
        The pooled mean and its percentile interval; undefined (NaN) with no cells.
    """
    num, den = question_sums(values, questions)
    return ratio_estimate(num, den, n_boot=n_boot, seed=seed, level=level)


def disagreement(
    answers_a: ArrayLike, answers_b: ArrayLike, questions: ArrayLike, *, n_boot: int, seed: int, level: float = LEVEL
) -> Estimate:
    """Share of paired cells whose answer categories differ (UNKNOWN an outcome of its own).

    Used between two models (same question, condition and repetition) and, as the flip rate, between a
    condition and the baseline of one model (same question and repetition).

    Args:
        answers_a: Answer categories (see :func:`answer_categories`) of one side of each pair.
        answers_b: Answer categories of the other side.
        questions: The question id of each pair.
        n_boot: Bootstrap resamples.
        seed: Bootstrap seed.
        level: Interval coverage.
    """
    differ = np.asarray(answers_a, dtype=object) != np.asarray(answers_b, dtype=object)
    return pooled_rate(differ, questions, n_boot=n_boot, seed=seed, level=level)


def flip_rate(
    baseline: ArrayLike, answers: ArrayLike, questions: ArrayLike, *, n_boot: int, seed: int, level: float = LEVEL
) -> Estimate:
    """Share of paired cells whose answer differs from the baseline condition's (:func:`disagreement`)."""
    return disagreement(baseline, answers, questions, n_boot=n_boot, seed=seed, level=level)


def delta_accuracy(
    baseline_correct: ArrayLike, correct: ArrayLike, questions: ArrayLike, *, n_boot: int, seed: int,
    level: float = LEVEL,
) -> Estimate:
    """Change in accuracy from the baseline over paired cells, with a paired bootstrap over questions."""
    diff = np.asarray(correct, dtype=np.float64) - np.asarray(baseline_correct, dtype=np.float64)
    return pooled_rate(diff, questions, n_boot=n_boot, seed=seed, level=level)


def discordant_counts(baseline_correct: ArrayLike, correct: ArrayLike) -> tuple[int, int]:
    """Count the discordant pairs: (baseline right and other wrong, baseline wrong and other right)."""
    base = np.asarray(baseline_correct, dtype=bool)
    other = np.asarray(correct, dtype=bool)
    return int((base & ~other).sum()), int((~base & other).sum())


def mcnemar_exact(only_baseline: int, only_other: int) -> float:
    """Exact McNemar p-value: a two-sided binomial test (p = 1/2) on the discordant pairs.

    Computed by ``scipy.stats.binomtest(only_other, only_baseline + only_other, 0.5).pvalue``; it equals
    statsmodels' ``mcnemar(table, exact=True)``. With no discordant pair there is no evidence of a
    difference and the p-value is 1.

    Args:
        only_baseline: Pairs where only the baseline is correct.
        only_other: Pairs where only the other condition is correct.
    """
    from scipy.stats import binomtest

    n = only_baseline + only_other
    if n == 0:
        return 1.0
    return float(binomtest(only_other, n, 0.5, alternative="two-sided").pvalue)


def holm(pvalues: Sequence[float] | NDArray[np.float64]) -> NDArray[np.float64]:
    """Holm-adjusted p-values, equal to ``statsmodels.stats.multitest.multipletests(method="holm")[1]``.

    The p-values sorted ascending are multiplied by m, m - 1, ..., 1, made non-decreasing by a running
    maximum, capped at 1 and put back in their order: statsmodels' own operations, without the full garbage
    collection it runs on every call. NaN entries (no test) stay NaN and do not count towards the number
    of tests m.
    """
    p = np.asarray(pvalues, dtype=np.float64)
    adjusted = np.full_like(p, np.nan)
    tested = ~np.isnan(p)
    if tested.any():
        order = np.argsort(p[tested])
        ranked = np.take(p[tested], order)
        corrected = np.maximum.accumulate(ranked * np.arange(ranked.size, 0, -1))
        corrected[corrected > 1] = 1
        unsorted = np.empty_like(corrected)
        unsorted[order] = corrected
        adjusted[tested] = unsorted
    return adjusted


def cohens_kappa(answers_a: ArrayLike, answers_b: ArrayLike) -> float:
    """Cohen's kappa between two sequences of answer categories (UNKNOWN a category of its own).

    The square contingency table over the union of categories is counted with ``numpy.bincount`` (over
    ``pandas.factorize`` codes; ``pandas.crosstab`` built the same table ten times slower, and a
    comparison builds one per pair of models and condition) and kappa = (p_o - p_e) / (1 - p_e) is
    computed by ``statsmodels.stats.inter_rater.cohens_kappa``.

    Returns:
        Kappa, or NaN when it is undefined: no pairs, or p_e = 1 (both sides always give the same single
        category, so chance agreement is already perfect).
    """
    a = np.asarray(answers_a, dtype=object)
    b = np.asarray(answers_b, dtype=object)
    if a.size == 0:
        return math.nan
    codes, categories = pd.factorize(np.concatenate([a, b]), sort=True)
    k = len(categories)
    if k < 2:
        return math.nan  # p_e = 1: kappa is 0 / 0
    return kappa_of_codes(codes[: a.size], codes[a.size :], k)


def kappa_of_codes(code_a: NDArray[np.intp], code_b: NDArray[np.intp], k: int) -> float:
    """:func:`cohens_kappa` of answers given as codes 0..k-1 of their k sorted categories (-1: missing).

    Every code in 0..k-1 must occur (the table has a row and a column per category seen, as in crosstab).
    """
    if code_a.size == 0 or k < 2:
        return math.nan
    from statsmodels.stats.inter_rater import cohens_kappa as sm_cohens_kappa

    observed = (code_a >= 0) & (code_b >= 0)  # a missing value is in no cell of the table (as in crosstab)
    table = np.bincount(code_a[observed] * k + code_b[observed], minlength=k * k).reshape(k, k).astype(np.float64)
    expected = (table.sum(axis=1) * table.sum(axis=0)).sum() / float(code_a.size) ** 2
    if expected >= 1.0:
        return math.nan
    return float(sm_cohens_kappa(table, return_results=False))


def within_pair_sums(frame: pd.DataFrame) -> pd.DataFrame:
    """Per question, how many pairs of conditions give different answers within one model.

    For each (question, repetition) with k observed conditions there are k(k-1)/2 condition pairs; with
    n_c conditions answering category c, the pairs that differ number (k^2 - sum_c n_c^2) / 2. Both
    counts are summed over the question's repetitions (pairs are formed within a repetition only).

    Args:
        frame: One row per observed cell with columns ``question_id``, ``repetition``, ``condition`` and
            ``category`` (see :func:`answer_categories`).

    Returns:
        Indexed by question_id: ``differ`` (pairs whose answers differ) and ``pairs`` (condition pairs);
        questions with fewer than two observed conditions in every repetition have ``pairs`` 0.
    """
    counts = frame.groupby(["question_id", "repetition", "category"], sort=False).size().astype(np.float64)
    per_cell = pd.DataFrame({"k": counts, "squares": counts**2}).groupby(
        level=["question_id", "repetition"], sort=False).sum()
    k = per_cell["k"]
    per_cell["differ"] = (k**2 - per_cell["squares"]) / 2
    per_cell["pairs"] = k * (k - 1) / 2
    by_question = per_cell.groupby(level="question_id", sort=False)
    return pd.DataFrame({"differ": by_question["differ"].sum(), "pairs": by_question["pairs"].sum()}).astype(np.float64)


def excess(
    between: pd.DataFrame, within_a: pd.DataFrame, within_b: pd.DataFrame, *, n_boot: int, seed: int,
    level: float = LEVEL,
) -> Estimate:
    """Between-model disagreement minus the mean of the two models' own across-condition disagreement.

    excess = D_between - (W_a + W_b) / 2, where D_between is the share of paired cells whose answers
    differ between the models and W_m the share of model m's condition pairs whose answers differ (see
    :func:`within_pair_sums`). All three are pooled over one set of questions, those where all three are
    defined (a paired cell, and two observed conditions in each model), and the interval resamples those
    questions, recomputing all three from the same draw.

    Args:
        between: Indexed by question_id, columns ``differ`` and ``cells`` (paired cells).
        within_a: :func:`within_pair_sums` of model a.
        within_b: :func:`within_pair_sums` of model b.
        n_boot: Bootstrap resamples.
        seed: Bootstrap seed.
        level: Interval coverage.

    Returns:
        The excess with its interval; undefined when no question has both a paired cell and two
        conditions in each model (e.g. runs with a single condition).
    """
    joined = between[["differ", "cells"]].join(within_a[["differ", "pairs"]].add_suffix("_a"), how="inner")
    joined = joined.join(within_b[["differ", "pairs"]].add_suffix("_b"), how="inner")
    joined = joined[(joined["cells"] > 0) & (joined["pairs_a"] > 0) & (joined["pairs_b"] > 0)]
    if joined.empty:
        return Estimate.undefined()
    arrays = {name: joined[name].to_numpy(np.float64) for name in joined.columns}

    def value(weights: NDArray[np.float64]) -> NDArray[np.float64]:
        def pooled(num: str, den: str) -> NDArray[np.float64]:
            return np.asarray((weights @ arrays[num]) / (weights @ arrays[den]), dtype=np.float64)

        return pooled("differ", "cells") - (pooled("differ_a", "pairs_a") + pooled("differ_b", "pairs_b")) / 2

    point = float(value(np.ones((1, len(joined))))[0])
    low, high = bootstrap_interval(value, len(joined), point, n_boot=n_boot, seed=seed, level=level)
    return Estimate(point, low, high)
