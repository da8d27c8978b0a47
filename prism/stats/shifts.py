"""Change beyond noise: how far two conditions' responses differ, set against the model's own disagreement.

For two conditions ``c`` (the baseline) and ``d`` of one model and a difference measure, per question:

- *between* is the mean difference over all cross pairs (a response of c with a response of d);
- *within* is the mean difference over distinct pairs of repetitions (i != j) inside c, and inside d,
  averaged over the two conditions: the model's noise. A response is never paired with itself;
- *excess* = between - within.

Each is averaged over questions (every question weighs the same). The excess gets a 95% percentile
interval from a two-level bootstrap (questions with replacement, and inside each drawn question its
repetitions with replacement, per condition) and a one-sided permutation p-value (condition labels
shuffled among each question's responses). With one repetition there is no within: the between gets the
interval and there is no p-value.

Pure functions over numpy arrays, no I/O; the libraries do the work:

- ``rapidfuzz.process.cdist`` with ``rapidfuzz.distance.Levenshtein.normalized_distance`` computes the
  ``edit_distance`` matrix (character Levenshtein distance over the longer response's length, in C);
- ``embedding_cosine`` is 1 - cosine similarity of the responses' sentence embeddings, which the caller
  supplies (``embed``: texts -> vectors; :mod:`prism.compare.embedding` makes them), one matrix product;
- ``numpy.random.default_rng`` draws every resample and permutation (seeded; one stream each, so
  changing B never changes a p-value);
- ``numpy.matmul`` evaluates the quadratic forms of all resamples of a question at once, and
  :func:`prism.stats.basics.percentile_interval` reads the interval off the resampled values.

Vectorization: per question, the differences among its responses form one m x m matrix D (the c
responses first, then the d ones). A resample or a permutation is a pair of weight vectors over those
responses (how often each counts as c, and as d), so every statistic is a quadratic form ``w_c' D w_d``;
all resamples and permutations of a question are evaluated together in two matrix products, and the
loop runs over questions only.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prism.stats.basics import LEVEL, SIGNIFICANCE, percentile_interval

# Difference measures, by the names configs use. ``answer`` compares canonical answers (UNKNOWN an outcome
# of its own) and is the default; the next two compare raw response texts' wording; ``prob_tv`` compares the
# first-token distributions over canonical options (runs with generation.label_probs=true);
# ``embedding_cosine`` compares the texts' meaning, their sentence embeddings (the ``[meaning]`` extra).
MEASURES: tuple[str, ...] = ("answer", "token_jaccard", "edit_distance", "prob_tv", "embedding_cosine")
# Measures that need the texts' embeddings (``embed`` of :func:`difference_matrix`).
EMBEDDING_MEASURES: tuple[str, ...] = ("embedding_cosine",)

# Texts -> their embeddings, one row per text.
Embed = Callable[[Sequence[str]], NDArray[np.float64]]
DEFAULT_MEASURE = "answer"

# Permuted statistics within this of the observed one count as ties (as large as it): sums taken in another
# order differ in the last bits, and with the 0/1 ``answer`` measure exact ties are common.
_TIE_TOLERANCE = 1e-9

# Word tokens of ``token_jaccard``: runs of letters, digits and underscores, compared in lower case, so
# "(B)" and "b." are the same token set and punctuation alone never makes two responses differ.
_TOKEN = re.compile(r"\w+")


# ---------------------------------------------------------------------------------------- measures


def difference_matrix(values: Sequence[str | None], measure: str, embed: Embed | None = None) -> NDArray[np.float64]:
    """Pairwise differences, in [0, 1] (``embedding_cosine``: [0, 2]), among the responses of one question.

    Args:
        values: For ``answer``, answer categories (:func:`prism.stats.basics.answer_categories`: a canonical
            label or UNKNOWN); for ``token_jaccard``, ``edit_distance`` and ``embedding_cosine``, raw response
            texts (None is read as the empty text); for ``prob_tv``, canonical JSON objects of option ->
            probability.
        measure: ``answer`` (1 when the categories differ), ``token_jaccard`` (1 - |A n B| / |A u B| of
            the two responses' word-token sets; 0 for two responses without tokens), ``edit_distance``
            (Levenshtein distance over the longer text's length, by ``rapidfuzz``; 0 for two empty texts),
            ``prob_tv`` (total-variation distance between the two option distributions) or
            ``embedding_cosine`` (:func:`cosine_distances` of the texts' embeddings).
        embed: Texts -> their embeddings; needed by ``embedding_cosine`` only.

    Returns:
        A symmetric m x m matrix with a zero diagonal.

    Raises:
        ValueError: If the measure is not one of :data:`MEASURES`, or ``embedding_cosine`` has no ``embed``.
    """
    if measure == "answer":
        cats = np.asarray([str(v) for v in values], dtype=object)
        matrix: NDArray[np.float64] = np.asarray(cats[:, None] != cats[None, :], dtype=np.float64)
    elif measure == "token_jaccard":
        matrix = _token_jaccard([v or "" for v in values])
    elif measure == "edit_distance":
        from rapidfuzz.distance import Levenshtein
        from rapidfuzz.process import cdist

        texts = [v or "" for v in values]
        distances: NDArray[np.float64] = np.asarray(
            cdist(texts, texts, scorer=Levenshtein.normalized_distance, dtype=np.float64), dtype=np.float64)
        matrix = distances.reshape(len(texts), len(texts))
    elif measure == "prob_tv":
        import json

        dists = [json.loads(v) if v else {} for v in values]
        options = sorted({k for d in dists for k in d})
        probs = np.asarray([[float(d.get(k, 0.0)) for k in options] for d in dists], dtype=np.float64)
        matrix = 0.5 * np.abs(probs[:, None, :] - probs[None, :, :]).sum(axis=2)
    elif measure == "embedding_cosine":
        if embed is None:
            raise ValueError("the embedding_cosine measure needs the texts' embeddings (embed=...); "
                             "prism.compare.embedding makes them")
        texts = [v or "" for v in values]
        matrix = cosine_distances(embed(texts), texts)
    else:
        raise ValueError(f"unknown difference measure {measure!r}; known: {', '.join(MEASURES)}")
    np.fill_diagonal(matrix, 0.0)  # a response never differs from itself (and is never paired with itself)
    return matrix


def cosine_distances(vectors: NDArray[np.float64], keys: Sequence[str] | None = None) -> NDArray[np.float64]:
    """1 - cosine similarity between every two rows of ``vectors``, in [0, 2].

    Rows are scaled to unit length first (a zero row stays zero: its similarity is 0, distance 1). Two rows
    with the same key (the same text) are exactly 0 apart, whatever the floating-point rounding of their
    product; the result is symmetric and clipped to [0, 2] for the same reason.

    Args:
        vectors: (m, d) embeddings, one row per response.
        keys: Optional (m,) identities of the rows (their texts).

    Returns:
        A symmetric m x m matrix with a zero diagonal.
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    if vectors.ndim != 2 or (keys is not None and len(keys) != vectors.shape[0]):
        raise ValueError(f"cosine_distances needs an (m, d) matrix and m keys, got {vectors.shape} and "
                         f"{None if keys is None else len(keys)} keys")
    norms = np.linalg.norm(vectors, axis=1)
    unit = vectors / np.where(norms > 0, norms, 1.0)[:, None]
    distances = np.clip(1.0 - unit @ unit.T, 0.0, 2.0)
    distances = (distances + distances.T) / 2
    if keys is not None:
        labels = np.asarray(_codes(keys))
        distances[labels[:, None] == labels[None, :]] = 0.0
    np.fill_diagonal(distances, 0.0)
    return np.asarray(distances, dtype=np.float64)


def _codes(keys: Sequence[str]) -> list[int]:
    """Integer codes of ``keys``, equal for equal keys (in order of first appearance)."""
    seen: dict[str, int] = {}
    return [seen.setdefault(k, len(seen)) for k in keys]


def _token_jaccard(texts: Sequence[str]) -> NDArray[np.float64]:
    """Jaccard distances between word-token sets, from one incidence matrix product."""
    token_sets = [set(_TOKEN.findall(text.lower())) for text in texts]
    vocabulary = {token: i for i, token in enumerate(sorted(set().union(*token_sets)))}
    incidence = np.zeros((len(texts), max(1, len(vocabulary))), dtype=np.float64)
    for row, tokens in enumerate(token_sets):
        incidence[row, [vocabulary[t] for t in tokens]] = 1.0
    shared = incidence @ incidence.T
    sizes = incidence.sum(axis=1)
    union = sizes[:, None] + sizes[None, :] - shared
    return np.asarray(np.where(union > 0, 1.0 - shared / np.maximum(union, 1.0), 0.0), dtype=np.float64)


# ------------------------------------------------------------------------------------- step data


@dataclass(frozen=True)
class StepData:
    """One step's responses, question by question.

    Attributes:
        matrices: Per question, the differences among its responses (:func:`difference_matrix`): the
            ``n_from[q]`` responses of the from-condition (the baseline) first, then the ``n_to[q]`` of
            the to-condition.
        n_from: (n,) responses of the from-condition per question.
        n_to: (n,) responses of the to-condition per question.
    """

    matrices: tuple[NDArray[np.float64], ...]
    n_from: NDArray[np.int64]
    n_to: NDArray[np.int64]

    @classmethod
    def from_blocks(cls, blocks: Sequence[tuple[NDArray[np.float64], int, int]]) -> StepData:
        """Collect per-question (difference matrix, n_from, n_to); questions lacking a side are left out.

        Raises:
            ValueError: If a matrix is not (n_from + n_to) square.
        """
        kept = [(np.asarray(d, dtype=np.float64), int(a), int(b)) for d, a, b in blocks if a > 0 and b > 0]
        for q, (matrix, a, b) in enumerate(kept):
            if matrix.shape != (a + b, a + b):
                raise ValueError(f"question {q}: a {matrix.shape} matrix for {a} + {b} responses")
        return cls(tuple(d for d, _, _ in kept), np.asarray([a for _, a, _ in kept], dtype=np.int64),
                   np.asarray([b for _, _, b in kept], dtype=np.int64))

    @property
    def repeated(self) -> bool:
        """Whether a within can be computed: some question has two responses of each condition."""
        return bool(np.any((self.n_from >= 2) & (self.n_to >= 2)))

    def subset(self, keep: NDArray[np.bool_]) -> StepData:
        """The questions where ``keep`` holds."""
        return StepData(tuple(m for m, k in zip(self.matrices, keep, strict=True) if k), self.n_from[keep],
                        self.n_to[keep])


@dataclass(frozen=True)
class Shift:
    """Between, within and excess of one step, with the interval and the permutation p-value.

    Attributes:
        between: Mean over questions of the mean cross-pair difference.
        within: Mean over questions of the mean within-condition difference (NaN with one repetition).
        excess: between - within (NaN with one repetition).
        ci_low: Lower end of the 95% interval of the excess, or of the between when there is no within.
        ci_high: Upper end of that interval.
        p: One-sided permutation p-value of the excess (NaN with one repetition).
        n_questions: Questions the three values average over.
        n_permutations: Permutations behind ``p`` (0 when there is none).
        null: The permuted excesses behind ``p`` (None without a test), for the detectable effect
            (:func:`prism.stats.power.permutation_detectable`).
    """

    between: float
    within: float
    excess: float
    ci_low: float
    ci_high: float
    p: float
    n_questions: int
    n_permutations: int
    null: NDArray[np.float64] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def undefined(cls) -> Shift:
        """The shift of a step without a question that has a response of each condition."""
        return cls(math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, 0, 0)


# ----------------------------------------------------------------------------------- statistics


def _components(
    matrix: NDArray[np.float64], w_from: NDArray[np.float64], w_to: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """One question's between and within under k weightings of its responses.

    A weighting says how often each response counts as a from-response and as a to-response: 0/1
    indicators for the observed labels or a permutation, draw counts for a bootstrap resample. Then

    - between = w_from' D w_to / (sum w_from * sum w_to);
    - within of a condition = sum_{i != j} w_i w_j D_ij / sum_{i != j} w_i w_j = w' D w / ((sum w)^2 -
      sum w^2): pairs of *distinct* responses, so a response drawn twice by the bootstrap is still never
      paired with itself (D has a zero diagonal and the denominator leaves the i = j terms out). A
      condition with no such pair (one response, or every draw hit one) has a NaN within.

    Args:
        matrix: (m, m) differences among the question's responses (symmetric, zero diagonal).
        w_from: (k, m) weights of the from-condition.
        w_to: (k, m) weights of the to-condition.

    Returns:
        (between, within), k values each; within is the mean of the two conditions' withins.
    """
    # Two matrix products give all three quadratic forms (D is symmetric, so w @ D is (D w)'); einsum
    # takes the row-wise dot products without a temporary.
    d_from, d_to = w_from @ matrix, w_to @ matrix
    n_f, n_t = w_from.sum(axis=1), w_to.sum(axis=1)
    pairs_f = n_f**2 - np.einsum("ij,ij->i", w_from, w_from)
    pairs_t = n_t**2 - np.einsum("ij,ij->i", w_to, w_to)
    return _ratios(np.einsum("ij,ij->i", d_from, w_to), np.einsum("ij,ij->i", d_from, w_from),
                   np.einsum("ij,ij->i", d_to, w_to), n_f * n_t, pairs_f, pairs_t)


def _ratios(cross: NDArray[np.float64], same_from: NDArray[np.float64], same_to: NDArray[np.float64],
            cross_pairs: NDArray[np.float64] | float, pairs_f: NDArray[np.float64] | float,
            pairs_t: NDArray[np.float64] | float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(between, within) from the three sums of differences and their numbers of (ordered) pairs."""
    between = cross / cross_pairs
    with np.errstate(invalid="ignore", divide="ignore"):
        within = (same_from / pairs_f + same_to / pairs_t) / 2
    within = np.where((np.asarray(pairs_f) > 0) & (np.asarray(pairs_t) > 0), within, np.nan)
    return np.asarray(between, dtype=np.float64), np.asarray(within, dtype=np.float64)


def _labels(n_from: int, n_to: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The observed labels as one weighting: 1 on each condition's own responses."""
    w_from = np.zeros((1, n_from + n_to))
    w_from[0, :n_from] = 1.0
    return w_from, 1.0 - w_from


def question_components(data: StepData) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per question, the between and the within of the observed responses (within NaN without two of each)."""
    between = np.empty(len(data.matrices), dtype=np.float64)
    within = np.full(len(data.matrices), np.nan, dtype=np.float64)
    for q, (m, a, b) in enumerate(zip(data.matrices, data.n_from, data.n_to, strict=True)):
        if a == 1 and b == 1:  # one response of each: the one cross pair, and no within
            between[q] = m[0, 1]
            continue
        parts = _components(m, *_labels(int(a), int(b)))
        between[q], within[q] = parts[0][0], parts[1][0]
    return between, within


def _draw_counts(rng: np.random.Generator, copies: int, size: int, offset: int, width: int) -> NDArray[np.float64]:
    """For each copy, how often each of ``size`` responses (at ``offset``..) is drawn in ``size`` draws."""
    picks = offset + rng.integers(0, size, size=(copies, size))
    flat = (np.arange(copies)[:, None] * width + picks).ravel()
    return np.bincount(flat, minlength=copies * width).reshape(copies, width).astype(np.float64)


@functools.lru_cache(maxsize=4)
def _outer_draws(seed: int, n_boot: int, n: int) -> tuple[NDArray[np.intp], Mapping[str, Any]]:
    """The outer level of every resample: copies of each question per resample, and the generator after it.

    A comparison calls :func:`shift` for every step of every run with the same seed, B and (mostly) the same
    number of questions, so this first draw -- the largest, B x n numbers -- is made once and the generator
    resumes from where it stood after it: every later number is exactly the one drawn without the cache.
    """
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[0])
    drawn = rng.integers(0, n, size=(n_boot, n))
    counts = np.bincount((np.arange(n_boot)[:, None] * n + drawn).ravel(), minlength=n_boot * n).reshape(n_boot, n)
    counts.setflags(write=False)  # shared by every caller
    return counts, rng.bit_generator.state


@functools.lru_cache(maxsize=1)
def _outer_weights(seed: int, n_boot: int, n: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """:func:`_outer_draws`' counts as float64 weights and their row sums, for steps of single responses only.

    Such a step (every question one response of each condition: runs without repetitions) is all one matrix
    product with these weights; converting and copying the (B, n) counts for each of them took most of its
    time. The product is the one the general path takes on the same (copied) matrix.
    """
    counts, _ = _outer_draws(seed, n_boot, n)
    weights = counts.astype(np.float64)
    weights.setflags(write=False)  # shared by every caller
    drawn = weights.sum(axis=1)
    drawn.setflags(write=False)
    return weights, drawn


def _bootstrap(data: StepData, n_boot: int, seed: int, repeated: bool) -> NDArray[np.float64]:
    """The excess (or, without repetitions, the between) on each two-level bootstrap resample.

    Outer level: n questions drawn with replacement per resample. Inner level: every drawn copy of a
    question, on its own, draws its from-responses and its to-responses with replacement, as many as it
    has. A copy whose within is undefined in its draw (every draw of a condition hit one response) is
    left out of its resample's mean. Work is done question by question over all copies of it at once.
    """
    n = len(data.matrices)
    # counts[b, q]: how many copies of question q resample b holds.
    counts, state = _outer_draws(seed, n_boot, n)
    rng = np.random.default_rng()
    rng.bit_generator.state = state
    totals = np.zeros(n_boot, dtype=np.float64)
    used = np.zeros(n_boot, dtype=np.float64)
    # A question with one response of each condition has nothing to redraw (drawing one of one consumes
    # no random numbers), and every copy of it has the same between and no within: all such questions
    # are added at once, and the loop below draws exactly the numbers it drew when it visited them too.
    single = (data.n_from == 1) & (data.n_to == 1)
    if single.any() and not repeated:
        value = np.asarray([m[0, 1] for m, s in zip(data.matrices, single, strict=True) if s], dtype=np.float64)
        finite = np.isfinite(value)
        if single.all() and finite.all():
            weights, drawn = _outer_weights(seed, n_boot, n)
        else:
            weights = counts[:, single][:, finite].astype(np.float64)
            drawn = weights.sum(axis=1)
        totals += weights @ value[finite]
        used += drawn
    for q, matrix in enumerate(data.matrices):
        if single[q] and not repeated:
            continue
        resample = np.repeat(np.arange(n_boot), counts[:, q])
        if resample.size == 0:
            continue
        a, b = int(data.n_from[q]), int(data.n_to[q])
        w_from = _draw_counts(rng, resample.size, a, 0, a + b)
        w_to = _draw_counts(rng, resample.size, b, a, a + b)
        between, within = _components(matrix, w_from, w_to)
        value = between - within if repeated else between
        finite = np.isfinite(value)
        totals += np.bincount(resample[finite], weights=value[finite], minlength=n_boot)
        used += np.bincount(resample[finite], minlength=n_boot)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.where(used > 0, totals / used, np.nan), dtype=np.float64)


def _permutations(data: StepData, n_permutations: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """The excess under each permutation of condition labels inside each question (group sizes kept)."""
    totals = np.zeros(n_permutations, dtype=np.float64)
    for matrix, a, b in zip(data.matrices, data.n_from, data.n_to, strict=True):
        # A uniform random order of the question's responses per permutation: the first a are "from".
        order = rng.random((n_permutations, int(a + b))).argsort(axis=1)
        w_from = np.zeros((n_permutations, int(a + b)))
        np.put_along_axis(w_from, order[:, : int(a)], 1.0, axis=1)
        # Labels are 0/1 and cover every response once, so one product gives all three sums: with
        # r = D w_from, same_from = w_from' r, cross = 1' r - same_from, same_to = 1' D 1 - same_from - 2 cross.
        product = w_from @ matrix
        same_from = np.einsum("ij,ij->i", product, w_from)
        cross = product.sum(axis=1) - same_from
        same_to = matrix.sum() - same_from - 2 * cross
        between, within = _ratios(cross, same_from, same_to, float(a * b), float(a * (a - 1)), float(b * (b - 1)))
        totals += between - within
    return totals / len(data.matrices)


def permuted_excess(data: StepData, n_permutations: int, seed: int) -> NDArray[np.float64]:
    """The excess under ``n_permutations`` seeded permutations of the labels (no bootstrap, no observed value).

    For :func:`prism.stats.power.shift_detectable`, which needs the permutation null of planted copies of a step.
    """
    return _permutations(data, n_permutations, np.random.default_rng(seed))


def shift(data: StepData, *, n_boot: int, n_permutations: int, seed: int, level: float = LEVEL) -> Shift:
    """Between, within and excess of one step with their interval and permutation p-value.

    With repetitions (some question has two responses of each condition), the questions averaged over are
    those with at least two responses of each condition (the others are left out of all three, so
    excess = between - within holds exactly); the interval is that of the excess and
    p = (1 + #{permuted excess >= observed}) / (1 + n_permutations), one-sided: a shift makes the
    conditions differ more than the model differs from itself. Without repetitions: the between over the
    questions with a response of each, its interval, and no within, excess or p.

    The interval resamples both levels, as specified. That counts the repetition noise twice (once
    in each question's own spread, once by redrawing its repetitions), so it is conservative: in the seeded
    simulations of ``tests/stats/test_shifts.py`` (n = 20, R = 5) it covered the true excess in 200 of 200 trials
    and was about twice as wide as a questions-only bootstrap (which covered 92%). The shift verdict rests on
    the permutation p-value, which is exact, not on the interval; a shift whose interval reaches below 0 is
    therefore possible.

    Args:
        data: The step's responses (:meth:`StepData.from_blocks`).
        n_boot: Two-level bootstrap resamples (B).
        n_permutations: Label permutations.
        seed: Seeds one ``numpy.random.SeedSequence`` whose two children drive the bootstrap and the
            permutations; the same seed and data give the same interval and p-value.
        level: Interval coverage.

    Returns:
        The step's :class:`Shift`; undefined when no question has a response of each condition.

    Raises:
        ValueError: If ``n_boot`` or ``n_permutations`` is below 1.
    """
    if n_boot < 1 or n_permutations < 1:
        raise ValueError(f"n_boot and n_permutations must be at least 1, got {n_boot} and {n_permutations}")
    if not data.matrices:
        return Shift.undefined()
    perm_seed = np.random.SeedSequence(seed).spawn(2)[1]  # the first child drives the bootstrap (_outer_draws)
    repeated = data.repeated
    if repeated:
        data = data.subset((data.n_from >= 2) & (data.n_to >= 2))
    between_q, within_q = question_components(data)
    between = float(between_q.mean())
    resampled = _bootstrap(data, n_boot, seed, repeated)
    if not repeated:
        low, high = percentile_interval(resampled, between, level)
        return Shift(between, math.nan, math.nan, low, high, math.nan, len(data.matrices), 0)
    within = float(within_q.mean())
    excess = float((between_q - within_q).mean())
    low, high = percentile_interval(resampled, excess, level)
    permuted = _permutations(data, n_permutations, np.random.default_rng(perm_seed))
    p = (1 + int((permuted >= excess - _TIE_TOLERANCE).sum())) / (1 + n_permutations)
    return Shift(between, within, excess, low, high, p, len(data.matrices), n_permutations, permuted)


# Most steps of one matrix product in :func:`shifts_of` (bounds its (B, this) result).
_BATCH = 64


def _single_values(data: StepData) -> NDArray[np.float64] | None:
    """The step's one difference per question, or None unless it is a step :func:`shifts_of` batches.

    That is: every question has one response of each condition and every difference is a whole number
    (``answer``'s 0 or 1).
    """
    if not data.matrices or not (np.all(data.n_from == 1) and np.all(data.n_to == 1)):
        return None
    value = np.asarray([m[0, 1] for m in data.matrices], dtype=np.float64)
    if not (np.all(np.isfinite(value)) and np.all(value == np.floor(value))
            and len(value) * float(np.abs(value).max()) < 2.0**52):
        return None
    return value


def shifts_of(steps: Sequence[StepData], *, n_boot: int, n_permutations: int, seed: int,
              level: float = LEVEL) -> list[Shift]:
    """:func:`shift` of each step, the steps without repetitions over the same questions in one product.

    A step whose every question has one response of each condition resamples only its questions: its
    bootstrap is one product of the outer draws' weights with its differences, which reads the whole (B, n)
    weights from memory each time. Steps of whole-number differences (the ``answer`` measure) over the same
    number of questions take that product together; their sums of whole numbers are exact in any order, so
    each result is the one :func:`shift` returns alone. Every other step is :func:`shift` itself.

    Raises:
        ValueError: If ``n_boot`` or ``n_permutations`` is below 1.
    """
    if steps and (n_boot < 1 or n_permutations < 1):  # as shift refuses them, at its first step
        raise ValueError(f"n_boot and n_permutations must be at least 1, got {n_boot} and {n_permutations}")
    found: list[Shift | None] = [None] * len(steps)
    batches: dict[int, list[tuple[int, NDArray[np.float64]]]] = {}
    for i, data in enumerate(steps):
        value = _single_values(data)
        if value is None:
            found[i] = shift(data, n_boot=n_boot, n_permutations=n_permutations, seed=seed, level=level)
        else:
            batches.setdefault(len(value), []).append((i, value))
    for n, members in batches.items():
        weights, drawn = _outer_weights(seed, n_boot, n)
        for start in range(0, len(members), _BATCH):
            chunk = members[start : start + _BATCH]
            totals = weights @ np.column_stack([value for _, value in chunk])
            for j, (i, value) in enumerate(chunk):
                with np.errstate(invalid="ignore", divide="ignore"):
                    resampled = np.asarray(np.where(drawn > 0, totals[:, j] / drawn, np.nan), dtype=np.float64)
                between = float(value.mean())
                low, high = percentile_interval(resampled, between, level)
                found[i] = Shift(between, math.nan, math.nan, low, high, math.nan, n, 0)
    return [f if f is not None else Shift.undefined() for f in found]


def is_shift(excess: float, p_holm: float, alpha: float = SIGNIFICANCE) -> bool:
    """A step is a shift when its excess is positive and its corrected p-value is below ``alpha``."""
    return bool(not math.isnan(excess) and not math.isnan(p_holm) and excess > 0 and p_holm < alpha)
