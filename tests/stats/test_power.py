"""prism.stats.power: each detectable effect checked against the power it claims, by seeded simulation."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from prism.plan.simulate import Population, _draw, shift_study, stated_population
from prism.stats import basics, power, shifts
from prism.stats.shifts import StepData


def test_mcnemar_detectable_reaches_eighty_percent_power_in_simulation() -> None:
    n, psi = 200, 0.3
    d = power.mcnemar_detectable(n, psi)
    assert 0.05 < d < psi
    rng = np.random.default_rng(1)
    rejected = 0
    for _ in range(600):
        draws = rng.multinomial(n, [(psi - d) / 2, (psi + d) / 2, 1 - psi])
        rejected += basics.mcnemar_exact(int(draws[0]), int(draws[1])) < 0.05
    assert abs(rejected / 600 - power.POWER) < 0.05  # 600 draws: a standard error of 1.6 points


@pytest.mark.parametrize(("n", "psi", "d", "alpha"), [(60, 0.3, 0.15, 0.05), (25, 0.4, 0.3, 0.0125)])
def test_mcnemar_power_is_the_exact_tests_rejection_rate(n: int, psi: float, d: float, alpha: float) -> None:
    # Summing the exact test's rejection region must give what running the test on draws gives.
    rng = np.random.default_rng(2)
    draws = rng.multinomial(n, [(psi - d) / 2, (psi + d) / 2, 1 - psi], size=3000)
    rate = np.mean([basics.mcnemar_exact(int(x[0]), int(x[1])) < alpha for x in draws])
    assert power.mcnemar_power(n, psi, d, alpha) == pytest.approx(rate, abs=0.025)
    assert power.mcnemar_power(n, psi, -d, alpha) == power.mcnemar_power(n, psi, d, alpha)  # two-sided
    assert power.mcnemar_power(n, psi, 0.0, alpha) <= alpha  # the exact test holds its level


def test_mcnemar_detectable_counts_the_discordance_a_change_makes() -> None:
    # Questions of differing difficulty (logits ~ N(logit 0.7, 1)); the other condition's logits all move down so
    # its accuracy drops by the figure. Where most pairs are both correct, a drop makes more of them discordant,
    # which costs power: the figure from the observed 2 x 2 shares holds 80%, the one at the null's share does not.
    rng = np.random.default_rng(6)
    p = 1 / (1 + np.exp(-(np.log(0.7 / 0.3) + rng.normal(0.0, 1.0, 4000))))
    psi, both = float(np.mean(2 * p * (1 - p))), float(np.mean(p * p))
    assert power.alternative_discordance(psi, both, -0.2) > psi > power.alternative_discordance(psi, both, 0.2)
    figure = power.mcnemar_detectable(60, psi, 0.0125, both_correct=both)
    assert figure > power.mcnemar_detectable(60, psi, 0.0125)
    logits = np.log(p / (1 - p))
    low, high = -5.0, 0.0  # the logit move that drops the mean accuracy by the figure
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if (1 / (1 + np.exp(-(logits + mid)))).mean() < p.mean() - figure else (low, mid)
    moved = 1 / (1 + np.exp(-(logits + (low + high) / 2)))
    found = 0
    for _ in range(600):
        idx = rng.integers(0, len(p), 60)
        a, b = rng.random(60) < p[idx], rng.random(60) < moved[idx]
        found += basics.mcnemar_exact(*basics.discordant_counts(a, b)) < 0.0125
    assert 0.76 < found / 600 < 0.92, found / 600  # at least 80%, a few points conservative at 60 pairs


def _null_step(population: Population, n: int, reps: int, seed: int) -> StepData:
    rng = np.random.default_rng(seed)
    base = population.probs[rng.integers(0, len(population.probs), n), 0]
    source, other = _draw(rng, base, reps), _draw(rng, base, reps)
    blocks = []
    for a, b in zip(source, other, strict=True):
        cats = np.concatenate([a, b])
        blocks.append((np.asarray(cats[:, None] != cats[None, :], dtype=np.float64), reps, reps))
    return StepData.from_blocks(blocks)


def test_shift_detectable_reaches_eighty_percent_power_where_the_moved_null_does_not() -> None:
    # The figure of a null study, then fresh studies with a shift of that size planted, tested as compare tests.
    population = stated_population(0.6, 0.5, 4, ["C0", "C1"], seed=3)
    data = _null_step(population, 30, 3, 11)
    est = shifts.shift(data, n_boot=1, n_permutations=2000, seed=1)
    assert est.null is not None
    figure = power.shift_detectable(data, est.null, 0.05, seed=1)
    moved = power.permutation_detectable(est.null, 0.05)
    assert figure > moved  # the spread a shift adds costs power
    assert figure == power.shift_detectable(data, est.null, 0.05, seed=1)  # seeded
    sims = 300
    found = sum(shift_study(population, 30, 3, figure, 0.05, 400, 100 + i) for i in range(sims)) / sims
    assert abs(found - power.POWER) < 0.08, found
    assert math.isnan(power.shift_detectable(data, np.array([]), 0.05))


def test_mcnemar_detectable_shrinks_with_n_and_grows_at_a_holm_level() -> None:
    assert power.mcnemar_detectable(400, 0.2) < power.mcnemar_detectable(100, 0.2)
    assert power.mcnemar_detectable(100, 0.2, power.holm_level(4)) > power.mcnemar_detectable(100, 0.2)
    assert math.isnan(power.mcnemar_detectable(0, 0.2))
    assert math.isnan(power.mcnemar_detectable(2, 0.0))  # two pairs can never reject at 5%


def test_permutation_detectable_is_the_critical_value_plus_the_power_quantile() -> None:
    null = np.random.default_rng(0).normal(0.0, 1.0, 200_000)
    assert power.permutation_detectable(null) == pytest.approx(1.645 + 0.842, abs=0.03)
    assert math.isnan(power.permutation_detectable(np.array([])))


def test_wald_detectable_tends_to_the_normal_formula_with_many_clusters() -> None:
    cov = np.array([[0.04]])  # se 0.2
    assert power.wald_detectable(cov, 5000) == pytest.approx((1.960 + 0.842) * 0.2, rel=0.01)
    assert power.wald_detectable(cov, 20) > power.wald_detectable(cov, 5000)  # Hotelling's reference costs power
    assert math.isnan(power.wald_detectable(np.eye(3), 3))  # no reference with G <= q
    # Of two coefficients, the least precise decides; a 2-df test needs more than a 1-df one.
    two = power.wald_detectable(np.diag([0.01, 0.09]), 5000)
    assert two == pytest.approx(power.wald_detectable(np.diag([0.09, 0.09]), 5000))
    assert two > power.wald_detectable(np.array([[0.09]]), 5000)


def _binomial_precision(eta: float, scale: float) -> Callable[[int, float], float]:
    """A cell of independent responses at logit ``eta``: its precision moves with ``mu (1 - mu)``."""

    def precision(j: int, d: float) -> float:
        p = 1 / (1 + math.exp(-(eta + d)))
        return scale * p * (1 - p)

    return precision


def test_wald_directions_solve_the_moved_noncentrality_and_the_figure_is_the_larger() -> None:
    cov, clusters = np.array([[0.09]]), 40
    lam = power.wald_noncentrality(1, clusters)
    v = _binomial_precision(1.2, 1.0)
    drop, rise = power.wald_detectable_directions(cov, clusters, v)
    first = power.wald_detectable(cov, clusters)
    # At 0.77: a drop moves the cell towards 50% (more information), a rise towards the ceiling (less).
    assert drop < first < rise
    for d in (-drop, rise):  # each is where d^2 (cov^-1)_jj precision(d) / precision(0) reaches lambda
        assert d * d / 0.09 * v(0, d) / v(0, 0.0) == pytest.approx(lam, rel=1e-4)
    assert power.larger_move(drop, rise) == (rise, power.ANALYTIC_WALD)
    # Only the ratio to the unmoved precision counts, not its scale.
    assert power.wald_detectable_directions(cov, clusters, _binomial_precision(1.2, 7.0)) == pytest.approx((drop, rise))
    # A cell at 50%: both directions lose information, so both need more than the first version's figure.
    drop, rise = power.wald_detectable_directions(cov, clusters, _binomial_precision(0.0, 1.0))
    assert drop == pytest.approx(rise, rel=1e-4) and drop > first


def test_a_rise_no_move_of_which_reaches_the_power_is_not_claimed() -> None:
    # Near the ceiling with a wide covariance, lambda(d) peaks below the target: no rise is found 80% of the
    # time however large, so the figure is the drop's and the method says the rise has none.
    cov, clusters = np.array([[1.0]]), 40
    drop, rise = power.wald_detectable_directions(cov, clusters, _binomial_precision(3.0, 1.0))
    assert math.isfinite(drop) and math.isnan(rise)
    assert power.larger_move(drop, rise) == (drop, power.ANALYTIC_WALD_DROP_ONLY)
    assert power.larger_move(1.0, math.nan)[1] in power.METHODS
    assert math.isnan(power.larger_move(math.nan, math.nan)[0])
    # The smallest root of a lambda that rises, peaks and falls: the first crossing, not a later one.
    cell = _binomial_precision(2.0, 1.0)
    _, rise = power.wald_detectable_directions(np.array([[0.07]]), clusters, cell)
    lam = power.wald_noncentrality(1, clusters)
    moves = np.linspace(0.01, rise, 400)
    reached = moves**2 / 0.07 * np.array([cell(0, d) for d in moves]) / cell(0, 0.0)
    assert (reached[:-1] < lam).all() and reached[-1] == pytest.approx(lam, rel=1e-4)
    assert (np.linspace(rise, 10, 50) ** 2 / 0.07 * np.array([cell(0, d) for d in np.linspace(rise, 10, 50)])
            / cell(0, 0.0) < lam).any()  # it falls below again further out: a later crossing exists


def _bisected_with_whole_sums(n: int, discordance: Callable[[float], float], alpha: float) -> float:
    # The bisection as it was before _power_below: every step the whole sum of mcnemar_power.
    if power.mcnemar_power(n, discordance(1.0), 1.0, alpha) < power.POWER:
        return math.nan
    low, high = 0.0, 1.0
    for _ in range(32):
        mid = (low + high) / 2
        low, high = (mid, high) if power.mcnemar_power(n, discordance(mid), mid, alpha) < power.POWER else (low, mid)
    return high


@pytest.mark.parametrize(("n", "psi", "both", "alpha"), [(1000, 0.08, 0.6, 0.0125), (1000, 0.19, 0.35, 0.05),
                                                         (400, 0.3, 0.5, 0.05 / 3), (3000, 0.02, 0.9, 0.0125),
                                                         (60, 0.3, 0.4, 0.05)])
def test_mcnemar_detectable_is_the_bisection_on_the_whole_power_sum(n: int, psi: float, both: float,
                                                                    alpha: float) -> None:
    # The windowed sums decide each step as the whole sum does, so the figure is the same float.
    def drop(d: float) -> float:
        return power.alternative_discordance(psi, both, -d)

    def rise(d: float) -> float:
        return power.alternative_discordance(psi, both, d)

    expected = max(_bisected_with_whole_sums(n, drop, alpha), _bisected_with_whole_sums(n, rise, alpha))
    assert power.mcnemar_detectable(n, psi, alpha, both_correct=both) == expected


def test_power_below_answers_as_the_whole_sum_does_even_at_a_near_tie() -> None:
    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(1, 2000))
        psi, d, alpha = float(rng.uniform(0.0, 0.5)), float(rng.uniform(0.0, 0.5)), float(rng.choice([0.05, 0.0125]))
        exact = power.mcnemar_power(n, psi, d, alpha)
        for target in (0.8, exact, float(np.nextafter(exact, 1.0)), float(np.nextafter(exact, 0.0))):
            assert power._power_below(n, psi, d, alpha, target) == (exact < target)


def test_the_windows_binomial_functions_are_scipys() -> None:
    from scipy.stats import binom

    pmf, cdf = power._binomial_functions()
    n = np.arange(0, 400, dtype=np.float64)
    k = np.floor(n / 3)
    for p in (0.05, 0.5, 0.62, 0.97):
        assert np.allclose(pmf(k, n, p), binom.pmf(k, n, p), rtol=1e-13, atol=1e-300)
        assert np.allclose(cdf(k, n, p), binom.cdf(k, n, p), rtol=1e-13, atol=1e-300)
        # the upper tail as the lower tail of the complementary share, as _power_below takes it
        assert np.allclose(cdf(k, n, 1 - p), binom.sf(n - k - 1, n, p), rtol=1e-11, atol=1e-15)
