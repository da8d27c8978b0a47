"""prism.stats.basics against closed forms computed here, and bootstrap coverage in seeded simulations."""

from __future__ import annotations

import math
from collections import Counter
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from prism.stats import basics


def exact_mcnemar(b: int, c: int) -> float:
    """Two-sided exact McNemar by hand: twice the binomial(b + c, 1/2) tail at min(b, c), capped at 1."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def hand_kappa(a: list[str], b: list[str]) -> float:
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    count_a, count_b = Counter(a), Counter(b)
    expected = sum(count_a[k] * count_b[k] for k in set(a) | set(b)) / n**2
    return (observed - expected) / (1 - expected)


# ----------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize(("b", "c"), [(0, 0), (3, 0), (0, 3), (5, 1), (4, 4), (6, 0), (10, 3), (1, 0)])
def test_mcnemar_exact_equals_the_binomial_tail_by_hand(b: int, c: int) -> None:
    assert basics.mcnemar_exact(b, c) == pytest.approx(exact_mcnemar(b, c), abs=1e-12)


def test_mcnemar_without_discordant_pairs_is_one_and_known_values() -> None:
    assert basics.mcnemar_exact(0, 0) == 1.0
    assert basics.mcnemar_exact(3, 0) == pytest.approx(0.25)  # 2 / 2^3
    assert basics.mcnemar_exact(6, 0) == pytest.approx(2 / 64)
    assert basics.discordant_counts([1, 1, 0, 0, 1], [0, 1, 1, 0, 0]) == (2, 1)


def test_holm_matches_the_step_down_by_hand_and_skips_nan() -> None:
    p = [0.01, 0.04, 0.03, 0.5, math.nan]
    # Sorted 0.01, 0.03, 0.04, 0.5 over m = 4 tests: x4, x3, x2, x1, then running maximum, capped at 1.
    expected = [0.04, 0.09, 0.09, 0.5, math.nan]
    np.testing.assert_allclose(basics.holm(p), expected)
    assert basics.holm([1.0, 1.0])[0] == 1.0
    assert np.isnan(basics.holm([math.nan])).all()


def test_holm_equals_statsmodels_multipletests_exactly() -> None:
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(0)
    for size in (1, 2, 5, 19, 100):
        p = rng.random(size) ** 3
        p[rng.random(size) < 0.2] = p[0]  # ties
        assert np.array_equal(basics.holm(p), multipletests(p, method="holm")[1])


def test_cohens_kappa_equals_the_formula_with_unknown_as_a_category() -> None:
    a = ["A", "B", "C", "UNKNOWN", "A", "B", "B", "D"]
    b = ["A", "B", "A", "UNKNOWN", "C", "B", "UNKNOWN", "D"]
    assert basics.cohens_kappa(a, b) == pytest.approx(hand_kappa(a, b))
    assert basics.cohens_kappa(a, a) == pytest.approx(1.0)


def test_cohens_kappa_is_undefined_when_chance_agreement_is_perfect() -> None:
    assert math.isnan(basics.cohens_kappa(["A", "A"], ["A", "A"]))
    assert math.isnan(basics.cohens_kappa([], []))


def test_answer_categories_make_unknown_agree_with_unknown() -> None:
    a = basics.answer_categories(pd.Series(["A", None, None]))
    b = basics.answer_categories(pd.Series(["A", None, "B"]))
    assert list(a) == ["A", basics.UNKNOWN, basics.UNKNOWN]
    assert list(a != b) == [False, False, True]


def test_degenerate_bootstrap_gives_the_point_twice_never_nan() -> None:
    for values in ([0.0] * 7, [1.0] * 3, [0.1] * 11, [0.25]):
        est = basics.pooled_rate(values, list(range(len(values))), n_boot=300, seed=1)
        assert (est.ci_low, est.ci_high) == (est.value, est.value)
        assert not math.isnan(est.value)
    same = basics.flip_rate(["A", "B", "C"], ["A", "B", "C"], ["q1", "q2", "q3"], n_boot=100, seed=0)
    assert (same.value, same.ci_low, same.ci_high) == (0.0, 0.0, 0.0)


def test_estimates_without_data_are_undefined() -> None:
    est = basics.pooled_rate([], [], n_boot=10, seed=0)
    assert math.isnan(est.value) and math.isnan(est.ci_low) and math.isnan(est.ci_high)


def test_bootstrap_is_reproducible_from_its_seed_and_resamples_questions() -> None:
    rng = np.random.default_rng(5)
    values = rng.integers(0, 2, size=60)
    questions = np.repeat(np.arange(20), 3)  # three cells per question: resampled together
    one = basics.pooled_rate(values, questions, n_boot=400, seed=3)
    two = basics.pooled_rate(values, questions, n_boot=400, seed=3)
    other = basics.pooled_rate(values, questions, n_boot=400, seed=4)
    assert one == two and one != other
    assert one.value == pytest.approx(values.mean())
    assert one.ci_low <= one.value <= one.ci_high


def test_ratio_pools_cells_and_bootstrap_rejects_bad_arguments() -> None:
    # Two questions: 1 of 1 cell, 1 of 3 cells -> pooled 2/4, not the mean of the shares (2/3).
    assert basics.pooled_rate([1, 1, 0, 0], ["a", "b", "b", "b"], n_boot=50, seed=0).value == pytest.approx(0.5)
    with pytest.raises(ValueError, match="n_boot"):
        basics.pooled_rate([1, 0], ["a", "b"], n_boot=0, seed=0)
    with pytest.raises(ValueError, match="level"):
        basics.pooled_rate([1, 0], ["a", "b"], n_boot=10, seed=0, level=1.0)


def test_within_pair_sums_count_differing_condition_pairs_by_brute_force() -> None:
    rows = []
    answers = {  # (question, repetition) -> answers of the conditions observed
        ("q1", 0): ["A", "A", "B", "UNKNOWN", "A"],
        ("q1", 1): ["A", "A", "A", "A", "A"],
        ("q2", 0): ["C", "D", "UNKNOWN"],
        ("q3", 0): ["B"],
    }
    for (q, r), cats in answers.items():
        rows += [{"question_id": q, "repetition": r, "condition": f"P{i}", "category": c} for i, c in enumerate(cats)]
    sums = basics.within_pair_sums(pd.DataFrame(rows))
    for q in ("q1", "q2", "q3"):
        pairs = [(x, y) for (qq, _), cats in answers.items() if qq == q for x, y in combinations(cats, 2)]
        assert sums.loc[q, "pairs"] == len(pairs)
        assert sums.loc[q, "differ"] == sum(x != y for x, y in pairs)


def test_excess_is_between_minus_mean_within_on_the_same_questions() -> None:
    between = pd.DataFrame({"differ": [2.0, 0.0, 5.0], "cells": [5.0, 5.0, 5.0]}, index=["q1", "q2", "q3"])
    within_a = pd.DataFrame({"differ": [4.0, 0.0, 0.0], "pairs": [10.0, 10.0, 0.0]}, index=["q1", "q2", "q3"])
    within_b = pd.DataFrame({"differ": [1.0, 3.0, 2.0], "pairs": [10.0, 10.0, 10.0]}, index=["q1", "q2", "q3"])
    est = basics.excess(between, within_a, within_b, n_boot=200, seed=0)
    # q3 has no condition pair in model a, so only q1 and q2 count.
    assert est.value == pytest.approx(2 / 10 - (4 / 20 + 4 / 20) / 2)
    assert est.ci_low <= est.value <= est.ci_high
    empty = basics.excess(between, within_a.iloc[2:], within_b, n_boot=10, seed=0)
    assert math.isnan(empty.value)


# ------------------------------------------------------------------------------------ coverage (seeded)

# 200 simulated data sets, B = 500 each: the observed coverage of a nominal 95% interval has a binomial
# standard error of about 1.5 points, and the percentile bootstrap undercovers slightly on small n, so
# the tolerance is 0.95 +/- 0.05.
SIMULATIONS, B, TOLERANCE = 200, 500, 0.05


def coverage(draw: object, truth: float, estimate: object) -> float:
    rng = np.random.default_rng(20240601)
    hits = 0
    for i in range(SIMULATIONS):
        est = estimate(*draw(rng), seed=i)  # type: ignore[operator]
        hits += est.ci_low <= truth <= est.ci_high
    return hits / SIMULATIONS


def test_paired_delta_interval_covers_the_true_change() -> None:
    n = 40
    # Per question: baseline right with 0.6; the condition fixes 30% of the wrong ones and breaks 10% of the
    # right ones, so the true change in accuracy is 0.4 * 0.3 - 0.6 * 0.1 = 0.06.
    truth = 0.4 * 0.3 - 0.6 * 0.1

    def draw(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        base = rng.random(n) < 0.6
        flip = np.where(base, rng.random(n) < 0.1, rng.random(n) < 0.3)
        return base, base ^ flip, np.arange(n)

    def estimate(base: np.ndarray, other: np.ndarray, q: np.ndarray, seed: int) -> basics.Estimate:
        return basics.delta_accuracy(base, other, q, n_boot=B, seed=seed)

    assert abs(coverage(draw, truth, estimate) - 0.95) <= TOLERANCE


def test_clustered_rate_interval_covers_with_repetitions() -> None:
    n, reps = 30, 3
    # Each question has its own disagreement probability (Beta(2, 5), mean 2/7); its three repetitions
    # share it, so cells within a question are correlated and only a question-level bootstrap is right.
    truth = 2 / 7

    def draw(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        p = np.repeat(rng.beta(2, 5, size=n), reps)
        differ = rng.random(n * reps) < p
        a = np.where(differ, "B", "A")
        return np.full(n * reps, "A"), a, np.repeat(np.arange(n), reps)

    def estimate(a: np.ndarray, b: np.ndarray, q: np.ndarray, seed: int) -> basics.Estimate:
        return basics.disagreement(a, b, q, n_boot=B, seed=seed)

    assert abs(coverage(draw, truth, estimate) - 0.95) <= TOLERANCE
