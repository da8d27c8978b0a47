"""prism.stats.shifts: between / within / excess by hand for each measure, and the tests' behaviour in seeded
simulations.

Simulations draw each question's answer distribution over five outcomes (A-D and UNKNOWN) from a Dirichlet,
then R sampled answers per condition. For the ``answer`` measure every quantity has a closed form in the
answer counts, computed here independently of the implementation:
between_q = 1 - sum_k n_ck n_dk / (R_c R_d), within_c = 1 - sum_k n_ck (n_ck - 1) / (R_c (R_c - 1)).
"""

from __future__ import annotations

import json
import math
from itertools import combinations, product

import numpy as np
import pytest

from prism.stats import shifts
from prism.stats.shifts import StepData, difference_matrix

OUTCOMES = np.array(["A", "B", "C", "D", "UNKNOWN"], dtype=object)


def letters(texts: object) -> np.ndarray:
    """A text's letter counts, a-z: an embedding whose cosine is easy to write down (the model's is checked in
    tests/compare/test_embedding.py)."""
    return np.array([[t.lower().count(c) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts],  # type: ignore[attr-defined]
                    dtype=np.float64)


def step(*questions: tuple[list[str | None], list[str | None]], measure: str = "answer") -> StepData:
    """Pack questions given as (from-responses, to-responses)."""
    return StepData.from_blocks([(difference_matrix([*a, *b], measure, letters), len(a), len(b))
                                 for a, b in questions])


def hand(questions: list[tuple[list[str], list[str]]], diff: object) -> tuple[float, float, float]:
    """Between, within, excess by the definition: cross pairs, and distinct ordered pairs inside each side."""
    betweens, withins = [], []
    for a, b in questions:
        betweens.append(np.mean([diff(x, y) for x, y in product(a, b)]))  # type: ignore[operator]
        inside = [np.mean([diff(side[i], side[j]) for i in range(len(side)) for j in range(len(side)) if i != j])  # type: ignore[operator]
                  for side in (a, b)]
        withins.append(np.mean(inside))
    between, within = float(np.mean(betweens)), float(np.mean(withins))
    return between, within, float(np.mean(np.array(betweens) - np.array(withins)))


def levenshtein(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, start=1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


def jaccard(a: str, b: str) -> float:
    import re

    sa, sb = set(re.findall(r"\w+", a.lower())), set(re.findall(r"\w+", b.lower()))
    return 0.0 if not sa | sb else 1 - len(sa & sb) / len(sa | sb)


def prob_tv(x: str, y: str) -> float:
    """Total variation between two option distributions given as JSON, by the definition."""
    p, q = json.loads(x), json.loads(y)
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q))


def cosine(x: str, y: str) -> float:
    """1 - cosine of the letter counts; the same text is 0 apart, a text without letters 1 from any other."""
    u, v = letters([x])[0], letters([y])[0]
    if x == y:
        return 0.0
    norms = float(np.linalg.norm(u) * np.linalg.norm(v))
    return 1.0 if norms == 0 else 1.0 - float(u @ v) / norms


DIFFS = {
    "embedding_cosine": cosine,
    "prob_tv": prob_tv,
    "answer": lambda x, y: float(x != y),
    "token_jaccard": jaccard,
    "edit_distance": lambda x, y: 0.0 if not (x or y) else levenshtein(x, y) / max(len(x), len(y)),
}

# ------------------------------------------------------------------------------------- by hand


def test_answer_measure_by_hand_with_unknown_and_unequal_sizes() -> None:
    q1 = (["A", "UNKNOWN", "UNKNOWN"], ["B", "B", "UNKNOWN"])  # between 7/9; within (2/3 + 2/3) / 2
    q2 = (["A", "A"], ["A", "B", "B"])  # between 2/3; within (0 + 2/3) / 2
    est = shifts.shift(step(q1, q2), n_boot=200, n_permutations=200, seed=0)
    assert est.between == pytest.approx((7 / 9 + 2 / 3) / 2)
    assert est.within == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert est.excess == pytest.approx((1 / 9 + 1 / 3) / 2) == pytest.approx(est.between - est.within)
    assert (est.n_questions, est.n_permutations) == (2, 200)
    assert est.ci_low <= est.excess <= est.ci_high and 0 < est.p <= 1


def test_token_jaccard_by_hand() -> None:
    # Token sets {the, answer, is, b}, {b} | {answer, c}, {c}: within (3/4 + 1/2) / 2 = 5/8; cross pairs
    # 4/5 (one shared token of five), 1, 1, 1: between 0.95; "(B)" and "b." are the same token set.
    q = (["The answer is B", "(B)"], ["Answer: C", "c."])
    est = shifts.shift(step(q, measure="token_jaccard"), n_boot=50, n_permutations=50, seed=0)
    assert (est.between, est.within, est.excess) == pytest.approx((0.95, 5 / 8, 0.95 - 5 / 8))
    assert difference_matrix(["(B)", "b.", "", ""], "token_jaccard")[[0, 2], [1, 3]].tolist() == [0.0, 0.0]


def test_edit_distance_by_hand() -> None:
    # lev(abc, abd) = 1 of 3; lev(xyz, ab) = 3 of 3; cross: abc-xyz 1, abc-ab 1/3, abd-xyz 1, abd-ab 1/3.
    q = (["abc", "abd"], ["xyz", "ab"])
    est = shifts.shift(step(q, measure="edit_distance"), n_boot=50, n_permutations=50, seed=0)
    assert (est.between, est.within, est.excess) == pytest.approx((2 / 3, 2 / 3, 0.0))


@pytest.mark.parametrize("measure", shifts.MEASURES)
def test_every_measure_equals_the_definition_on_random_responses(measure: str) -> None:
    rng = np.random.default_rng(7)
    words = ["A", "B", "The answer is C.", "I think (D)", "", "answer: b", "Option A is right", "UNKNOWN"]
    if measure == "prob_tv":  # option distributions, one of them without option D
        words = [json.dumps(dict(zip("ABCD", (w / w.sum()).tolist(), strict=False))) for w in rng.random((7, 4))]
        words.append(json.dumps({"A": 0.5, "B": 0.5, "C": 0.0}))
    questions = [([str(w) for w in rng.choice(words, size=int(rng.integers(2, 5)))],
                  [str(w) for w in rng.choice(words, size=int(rng.integers(2, 5)))]) for _ in range(6)]
    est = shifts.shift(step(*questions, measure=measure), n_boot=20, n_permutations=20, seed=1)
    assert (est.between, est.within, est.excess) == pytest.approx(hand(questions, DIFFS[measure]))
    texts = [w for a, b in questions for w in (*a, *b)]
    matrix = difference_matrix(texts, measure, letters)
    assert matrix == pytest.approx(np.array([[DIFFS[measure](x, y) for y in texts] for x in texts]))


def test_permutation_p_equals_the_exact_permutation_probability() -> None:
    # One question, A A | B B: of the 6 equally likely splits of its four responses, 2 give excess 1 (the
    # observed) and 4 give -1/2, so the exact permutation probability of excess >= 1 is 1/3.
    est = shifts.shift(step((["A", "A"], ["B", "B"])), n_boot=100, n_permutations=6000, seed=3)
    assert (est.between, est.within, est.excess) == (1.0, 0.0, 1.0)
    assert est.p == pytest.approx(1 / 3, abs=0.02)  # binomial sd of the estimate: 0.006


def test_identical_answers_give_zero_everything_a_degenerate_interval_and_p_one() -> None:
    est = shifts.shift(step(*[(["A"] * 5, ["A"] * 5)] * 4), n_boot=100, n_permutations=100, seed=0)
    assert (est.between, est.within, est.excess, est.ci_low, est.ci_high, est.p) == (0, 0, 0, 0, 0, 1)


def test_one_repetition_gives_between_with_its_interval_and_no_within_or_p() -> None:
    est = shifts.shift(step((["A"], ["B"]), (["A"], ["A"]), (["C"], ["UNKNOWN"])), n_boot=300,
                       n_permutations=100, seed=0)
    assert est.between == pytest.approx(2 / 3)
    assert math.isnan(est.within) and math.isnan(est.excess) and math.isnan(est.p)
    assert est.ci_low <= est.between <= est.ci_high and est.n_permutations == 0
    assert not shifts.is_shift(est.excess, est.p)


def test_questions_without_two_of_each_are_left_out_of_all_three() -> None:
    full = (["A", "B"], ["B", "B"])
    est = shifts.shift(step(full, (["A"], ["B", "C"]), ([], ["A"])), n_boot=50, n_permutations=50, seed=0)
    alone = shifts.shift(step(full), n_boot=50, n_permutations=50, seed=0)
    assert est.n_questions == 1 and (est.between, est.within, est.excess) == (alone.between, alone.within,
                                                                              alone.excess)
    assert shifts.shift(step(([], ["A"])), n_boot=5, n_permutations=5, seed=0) == shifts.Shift.undefined()


def test_seeded_and_checked() -> None:
    data = step((["A", "B", "A"], ["B", "C", "B"]), (["A", "A", "A"], ["A", "B", "A"]))
    one = shifts.shift(data, n_boot=200, n_permutations=200, seed=5)
    assert one == shifts.shift(data, n_boot=200, n_permutations=200, seed=5)
    assert one != shifts.shift(data, n_boot=200, n_permutations=200, seed=6)
    # B and the permutations draw from separate streams: changing B never changes p.
    assert shifts.shift(data, n_boot=50, n_permutations=200, seed=5).p == one.p
    with pytest.raises(ValueError, match="unknown difference measure 'cosine'"):
        difference_matrix(["a"], "cosine")
    with pytest.raises(ValueError, match="at least 1"):
        shifts.shift(data, n_boot=0, n_permutations=10, seed=0)
    with pytest.raises(ValueError, match="matrix for 1 \\+ 1 responses"):
        StepData.from_blocks([(np.zeros((3, 3)), 1, 1)])


def test_a_shift_needs_a_positive_excess_and_a_small_corrected_p() -> None:
    assert shifts.is_shift(0.1, 0.01) and not shifts.is_shift(-0.1, 0.01) and not shifts.is_shift(0.1, 0.05)
    assert not shifts.is_shift(math.nan, math.nan)


# ------------------------------------------------------------------------------- simulations

TRIALS, N, R = 200, 20, 5


def draw_answers(rng: np.random.Generator, probabilities: np.ndarray, reps: int) -> np.ndarray:
    """(trials, n, reps) answer indices, one distribution per (trial, question)."""
    cumulative = probabilities.cumsum(axis=-1)
    u = rng.random((*probabilities.shape[:-1], reps, 1))
    return np.asarray((u > cumulative[..., None, :]).sum(axis=-1))


def closed_form_excess(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Excess of the answer measure per trial from the answer counts (module docstring)."""
    ca = (a[..., None] == np.arange(len(OUTCOMES))).sum(axis=-2)
    cb = (b[..., None] == np.arange(len(OUTCOMES))).sum(axis=-2)
    between = 1 - (ca * cb).sum(-1) / (R * R)
    within = (2 - (ca * (ca - 1)).sum(-1) / (R * (R - 1)) - (cb * (cb - 1)).sum(-1) / (R * (R - 1))) / 2
    return np.asarray((between - within).mean(axis=-1))


def population(rng: np.random.Generator, size: tuple[int, ...], move: float) -> tuple[np.ndarray, np.ndarray]:
    """Per question: the from-distribution (Dirichlet) and the to-distribution, ``move`` of whose mass goes
    from each answer to the next one (a planted shift; 0 keeps the conditions identical)."""
    p_from = rng.dirichlet([3.0, 1.0, 1.0, 1.0, 0.5], size=size)
    p_to = (1 - move) * p_from + move * np.roll(p_from, 1, axis=-1)
    return p_from, p_to


def run_tests(p_from: np.ndarray, p_to: np.ndarray, seed: int, n_boot: int, n_permutations: int) -> list[
        shifts.Shift]:
    rng = np.random.default_rng(seed)
    a, b = draw_answers(rng, p_from, R), draw_answers(rng, p_to, R)
    results = []
    for t in range(p_from.shape[0]):
        data = step(*[(list(OUTCOMES[a[t, q]]), list(OUTCOMES[b[t, q]])) for q in range(N)])
        results.append(shifts.shift(data, n_boot=n_boot, n_permutations=n_permutations, seed=t))
    return results


def test_identical_sampled_conditions_are_flagged_no_more_often_than_nominal() -> None:
    # 200 trials of two identical conditions (n = 20, R = 5, 200 permutations). The permutation test is
    # exact, so the flag rate is at most 5%; its binomial sd over 200 trials is 1.5 points, and 9% is the
    # one-sided 99% bound. The p-values of a valid test are (super-)uniform: their mean is near 1/2 or above.
    p_from, p_to = population(np.random.default_rng(11), (TRIALS, N), 0.0)
    results = run_tests(p_from, p_to, seed=12, n_boot=20, n_permutations=200)
    flagged = np.mean([shifts.is_shift(r.excess, r.p) for r in results])
    assert flagged <= 0.09
    assert np.mean([r.p for r in results]) >= 0.45


def test_planted_shift_is_found_with_the_expected_power() -> None:
    # Moving half of each answer's mass to the next one. The expected power of a one-sided 5% test is computed
    # here without the implementation: the 95th percentile of the closed-form excess under the pooled null
    # (both conditions draw from the mixture) is the critical value; the power is the share of 20,000
    # closed-form excesses under the shift above it. The permutation test's rate over 200 trials must be
    # within 0.1 of it (binomial sd about 0.03, plus the normal-approximation slack of a conditional test).
    rng = np.random.default_rng(21)
    p_from, p_to = population(rng, (20_000, N), 0.5)
    mixture = (p_from + p_to) / 2
    null = closed_form_excess(draw_answers(rng, mixture, R), draw_answers(rng, mixture, R))
    alternative = closed_form_excess(draw_answers(rng, p_from, R), draw_answers(rng, p_to, R))
    expected = float(np.mean(alternative > np.quantile(null, 0.95)))
    assert 0.4 <= expected <= 0.9, "the planted effect is meant to be neither trivial nor hopeless"
    results = run_tests(p_from[:TRIALS], p_to[:TRIALS], seed=22, n_boot=20, n_permutations=200)
    power = np.mean([shifts.is_shift(r.excess, r.p) for r in results])
    assert abs(power - expected) <= 0.1, (power, expected)


def test_two_level_bootstrap_interval_covers_the_true_excess() -> None:
    # The truth is the population mean of the per-question excess, sum_k (p_ck - p_dk)^2 / 2 (the expected
    # between minus the expected within of the answer measure), over 200,000 questions. Resampling both
    # levels counts the repetition noise twice, so the interval is conservative: coverage at least 0.95
    # minus the binomial slack of 200 trials (0.05). (Observed: 200 of 200; a questions-only bootstrap, half
    # as wide, covers 183 of 200.)
    p_from, p_to = population(np.random.default_rng(31), (200_000,), 0.25)
    truth = float((((p_from - p_to) ** 2).sum(axis=-1) / 2).mean())
    p_from, p_to = population(np.random.default_rng(32), (TRIALS, N), 0.25)
    results = run_tests(p_from, p_to, seed=33, n_boot=300, n_permutations=1)
    coverage = np.mean([r.ci_low <= truth <= r.ci_high for r in results])
    assert coverage >= 0.90, coverage


def test_between_interval_covers_with_one_repetition() -> None:
    p_from, p_to = population(np.random.default_rng(41), (200_000,), 0.25)
    truth = float((1 - (p_from * p_to).sum(axis=-1)).mean())
    p_from, p_to = population(np.random.default_rng(42), (TRIALS, N), 0.25)
    rng = np.random.default_rng(43)
    a, b = draw_answers(rng, p_from, 1), draw_answers(rng, p_to, 1)
    hits = 0
    for t in range(TRIALS):
        data = step(*[([OUTCOMES[a[t, q, 0]]], [OUTCOMES[b[t, q, 0]]]) for q in range(N)])
        est = shifts.shift(data, n_boot=300, n_permutations=1, seed=t)
        hits += est.ci_low <= truth <= est.ci_high
    assert abs(hits / TRIALS - 0.95) <= 0.06  # percentile bootstrap at n = 20 undercovers slightly


def test_closed_form_agrees_with_the_implementation() -> None:
    p_from, p_to = population(np.random.default_rng(51), (3, N), 0.25)
    rng = np.random.default_rng(52)
    a, b = draw_answers(rng, p_from, R), draw_answers(rng, p_to, R)
    for t in range(3):
        data = step(*[(list(OUTCOMES[a[t, q]]), list(OUTCOMES[b[t, q]])) for q in range(N)])
        assert shifts.shift(data, n_boot=5, n_permutations=5, seed=0).excess == pytest.approx(
            closed_form_excess(a[t:t + 1], b[t:t + 1])[0])


def test_pairs_are_distinct_repetitions_never_a_response_with_itself() -> None:
    # Three identical "A" and one "B" in a condition: distinct ordered pairs 12, of which 6 differ.
    matrix = difference_matrix(["A", "A", "A", "B", "A"], "answer")
    data = StepData.from_blocks([(matrix, 4, 1)])
    assert shifts.question_components(data)[1][0] != shifts.question_components(data)[1][0]  # one to: NaN
    within = np.mean([x != y for x, y in combinations(["A", "A", "A", "B"], 2)])
    full = shifts.shift(step((["A", "A", "A", "B"], ["A", "A"])), n_boot=5, n_permutations=5, seed=0)
    assert full.within == pytest.approx((within + 0) / 2)


def _bootstrap_by_definition(data: StepData, n_boot: int, seed: int) -> np.ndarray:
    """The two-level bootstrap drawn number by number in the order :func:`prism.stats.shifts.shift` draws them.

    Questions are drawn per resample; then question by question, every copy of it (in resample order)
    draws its from-responses, then its to-responses. Without repetitions the value is the between.
    """
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[0])
    n = len(data.matrices)
    drawn = rng.integers(0, n, size=(n_boot, n))
    values: list[list[float]] = [[] for _ in range(n_boot)]
    for q, matrix in enumerate(data.matrices):
        a, b = int(data.n_from[q]), int(data.n_to[q])
        copies = [r for r in range(n_boot) for _ in range(int((drawn[r] == q).sum()))]
        picks_from = rng.integers(0, a, size=(len(copies), a))
        picks_to = a + rng.integers(0, b, size=(len(copies), b))
        for row, r in enumerate(copies):
            values[r].append(float(np.mean([matrix[i, j] for i in picks_from[row] for j in picks_to[row]])))
    return np.asarray([np.mean(v) for v in values])


def test_one_response_of_each_is_resampled_as_by_the_definition() -> None:
    # Questions with one response of each condition are added in bulk; the others still draw their
    # repetitions, from the same random stream as if every question were visited in turn.
    rng = np.random.default_rng(7)
    blocks = []
    for q in range(12):
        a, b = (1, 1) if q % 3 else (1, 3)
        values = [str(v) for v in rng.integers(0, 3, size=a + b)]
        blocks.append((difference_matrix(values, "answer"), a, b))
    data = StepData.from_blocks(blocks)
    assert not data.repeated
    expected = _bootstrap_by_definition(data, 60, seed=3)
    got = shifts._bootstrap(data, 60, seed=3, repeated=False)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    est = shifts.shift(data, n_boot=60, n_permutations=10, seed=3)
    low, high = shifts.percentile_interval(expected, est.between, shifts.LEVEL)
    assert (est.ci_low, est.ci_high) == pytest.approx((low, high))


def test_the_cached_outer_draw_gives_every_resample_as_a_fresh_generator_does() -> None:
    # _outer_draws keeps the B x n outer draw per (seed, B, n) for the next step of a comparison; a step
    # that meets it in the cache must get exactly the bootstrap of one that drew it afresh.
    rng = np.random.default_rng(11)
    blocks = [(difference_matrix([str(v) for v in rng.integers(0, 3, size=4)], "answer"), 1, 3) for _ in range(9)]
    data = StepData.from_blocks(blocks)
    shifts._outer_draws.cache_clear()
    fresh = shifts._bootstrap(data, 40, seed=4, repeated=False)
    cached = shifts._bootstrap(data, 40, seed=4, repeated=False)
    assert shifts._outer_draws.cache_info().hits >= 1
    np.testing.assert_array_equal(cached, fresh)
    np.testing.assert_allclose(fresh, _bootstrap_by_definition(data, 40, seed=4), rtol=0, atol=1e-12)


def test_embedding_cosine_needs_the_embeddings_and_gives_identical_texts_zero() -> None:
    with pytest.raises(ValueError, match="embedding_cosine measure needs the texts' embeddings"):
        difference_matrix(["A", "B"], "embedding_cosine")
    # Rows that round differently still give the same text exactly 0; other rows 1 - cosine, symmetric.
    vectors = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0 + 1e-12], [-1.0, -2.0, -3.0], [0.0, 0.0, 0.0]])
    matrix = shifts.cosine_distances(vectors, ["x", "x", "y", "z"])
    assert matrix[0, 1] == 0.0 and matrix[1, 0] == 0.0
    assert matrix[0, 2] == pytest.approx(2.0) and matrix[0, 3] == pytest.approx(1.0)
    assert np.array_equal(matrix, matrix.T) and np.all(np.diag(matrix) == 0.0)
    with pytest.raises(ValueError, match="m keys"):
        shifts.cosine_distances(vectors, ["x"])
