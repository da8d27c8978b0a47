"""Detectable effects: the smallest effect a test had 80% power to detect at its n.

Each test PRISM reports gets the size of effect (in the units of its own effect) that it would have found
with probability :data:`POWER` at the level it was run at, so "no shift" reads "no shift larger than X".
Where a formula exists it is used (``analytic``); otherwise the figure is read off simulated draws the test
already made (``simulated``). The method is recorded beside the figure (:data:`METHODS`).

- The exact McNemar test of ``comparison/sensitivity.csv`` (a change in accuracy over paired cells): the
  test's exact power (:func:`mcnemar_power`: the number of discordant pairs binomial, the split of them
  binomial given that number, summed over the exact test's rejection region), solved for the difference
  ``d``, at the discordant share a change of ``d`` makes (:func:`alternative_discordance`, from the observed
  2 x 2 shares), the larger of a drop and a rise.
- The permutation test of a shift (``comparison/shifts.csv``, ``roles.csv``, ``divergence_noise.csv``):
  :func:`shift_detectable`, the step's own permutation null, widened by what a planted shift adds (the
  statistic's spread under the alternative, and the wider permutation null of planted data), read off the
  step's permuted statistics and seeded plantings in its own responses.
- A term of the clustered model (``comparison/gee_wald.csv``): the Wald statistic on Hotelling's reference
  is a noncentral F(q, G - q, lambda) under an alternative; lambda reaching the power is solved with
  ``scipy.stats.ncf``, for one coefficient of the term moved alone (the least precisely estimated one: an
  effect that large on any one level or cell would have been found). Moving it moves its cell's information
  ``mu (1 - mu)``, so the precision at each size of move is the sandwich recomputed at the moved estimates
  (:class:`prism.stats.gee_sparse.MovedCoefficient`), and the figure is the larger of the smallest drop and
  the smallest rise that reach lambda (:func:`wald_detectable_directions`, :func:`larger_move`).

Holm families: a test corrected by Holm over ``m`` tests is rejected at ``alpha / m`` when it is the only
real effect among them, the hardest case, so its detectable effect is computed at ``alpha / m``.

Checked by simulation (BENCHMARKS.md section 17): at the reported figure the shift test finds the effect 79-81%
of the time (three designs) and McNemar 81-84% (the first version, the null moved by the effect and Connor's
normal approximation, reached 66-73%). The first Wald figure took the moved coefficient's information as
fitted: a cell moved towards 50% consistency was found 89-93% of the time, one moved towards the ceiling
66-71%. With the information moved, the planted coefficient's own figure away from 50% (the one the reported
figure is) is found 77-84% of the time; its figure towards 50% is optimistic (66-76%), but smaller than the
other, so not the one reported; and the reported figure, the least precise coefficient's, is found
88-94% of the time when planted in a typical coefficient of a term whose cells are alike.

Pure functions; scipy is imported inside them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prism.stats import shifts
from prism.stats.basics import SIGNIFICANCE
from prism.stats.shifts import StepData

# The power every detectable effect is computed for.
POWER = 0.8
# shift_detectable: plantings of the shift whose excesses give the spread it adds; planted copies whose
# permutation nulls give how much wider the test's null gets, and their permutations; fixed-point steps.
PLANTINGS = 400
PLANTED_NULLS = 4
PLANTED_PERMUTATIONS = 250
FIXED_POINT_STEPS = 3

ANALYTIC_MCNEMAR = "analytic: exact McNemar power (conditional binomial)"
SIMULATED_PERMUTATION = "simulated: permutation null, widened by planted shifts"
ANALYTIC_WALD = "analytic: noncentral F, one coefficient"
ANALYTIC_WALD_DROP_ONLY = "analytic: noncentral F, one coefficient, a drop: no rise of it reaches 80% power"
ANALYTIC_WALD_RISE_ONLY = "analytic: noncentral F, one coefficient, a rise: no drop of it reaches 80% power"
METHODS = (ANALYTIC_MCNEMAR, SIMULATED_PERMUTATION, ANALYTIC_WALD, ANALYTIC_WALD_DROP_ONLY, ANALYTIC_WALD_RISE_ONLY)
# wald_detectable_directions: the largest move (logits) tried in either direction before a direction is
# declared to have no detectable move (a cell that far out is all consistent or none).
LARGEST_MOVE = 10.0


def holm_level(m: int, alpha: float = SIGNIFICANCE) -> float:
    """The level a lone real effect in a Holm family of ``m`` tests must reach: ``alpha / m``."""
    return alpha / max(1, m)


def mcnemar_power(n_pairs: int, discordant: float, difference: float, alpha: float = SIGNIFICANCE) -> float:
    """The exact power of compare's two-sided exact McNemar test at ``alpha`` against a change ``difference``.

    The number of discordant pairs is ``N ~ Binomial(n_pairs, psi)`` (``psi`` the discordant share), and given
    ``N`` the pairs going one way are ``Binomial(N, (psi + d) / (2 psi))``; the test
    (:func:`prism.stats.basics.mcnemar_exact`, a binomial test at 1/2 on the discordant pairs) rejects when
    ``p < alpha``, that is when the smaller count is at most ``k_N``, the largest ``k`` with
    ``2 P(Bin(N, 1/2) <= k) < alpha``. The power sums both tails over ``N``: exact, no approximation.

    Args:
        n_pairs: Paired cells.
        discordant: The discordant share ``psi`` under the alternative (at least ``difference``).
        difference: The change in accuracy ``d`` (its sign does not matter: the test is two-sided).
        alpha: The test's level.

    Returns:
        The probability of rejecting, in [0, 1].
    """
    from scipy.stats import binom

    psi = min(1.0, max(float(discordant), abs(difference)))
    if n_pairs < 1 or psi <= 0:
        return 0.0
    counts, k = _mcnemar_region(n_pairs, alpha)
    weight = binom.pmf(counts, n_pairs, psi)
    share = (psi + abs(difference)) / (2 * psi)
    tails = np.where(k >= 0, binom.cdf(k, counts, share) + binom.sf(counts - k - 1, counts, share), 0.0)
    return float(np.clip((weight * tails).sum(), 0.0, 1.0))


@functools.lru_cache(maxsize=64)
def _mcnemar_region(n_pairs: int, alpha: float) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Per number of discordant pairs N = 0..n_pairs, the largest smaller count the exact test rejects (-1: none).

    k_N is the largest k with ``2 P(Bin(N, 1/2) <= k) < alpha``; ``binom.ppf`` gives the smallest k whose cdf
    reaches alpha / 2, and one less when that k itself does not reject. Cached: every bisection step reuses it.
    """
    from scipy.stats import binom

    counts = np.arange(n_pairs + 1, dtype=np.int64)
    k = binom.ppf(alpha / 2, counts, 0.5).astype(np.int64)
    k = np.where(2 * binom.cdf(k, counts, 0.5) < alpha, k, k - 1)
    counts.setflags(write=False)
    k.setflags(write=False)
    return counts, k


def alternative_discordance(discordant: float, both_correct: float, difference: float) -> float:
    """The discordant share under a change ``difference`` in the other condition's accuracy (signed).

    The change falls on the other condition's answers at random, whatever the baseline's: a drop of ``d`` turns
    ``d`` of its correct answers wrong, taken from the both-correct pairs (which become discordant) and the
    only-other-correct pairs (which become concordant) in proportion to their shares; a rise takes from the
    both-wrong and only-baseline-correct pairs alike. Both null discordant directions are ``discordant / 2``.
    """
    half = discordant / 2
    if difference < 0:
        gain, lose = both_correct, half  # b's correct answers: both-correct pairs, and only-b-correct ones
    else:
        gain, lose = max(0.0, 1.0 - discordant - both_correct), half  # b's wrong answers: both-wrong, only-a
    if gain + lose <= 0:
        return max(discordant, abs(difference))
    moved = discordant + abs(difference) * (gain - lose) / (gain + lose)
    return min(1.0, max(abs(difference), moved))


def mcnemar_detectable(n_pairs: int, discordant: float, alpha: float = SIGNIFICANCE,
                       power: float = POWER, both_correct: float | None = None) -> float:
    """The smallest |change in accuracy| compare's exact McNemar test at ``alpha`` detects with ``power``.

    Solved by bisection on :func:`mcnemar_power` (exact; it rises with the difference). The discordant share
    under the alternative: with ``both_correct`` (the share of pairs both conditions answered correctly) it is
    :func:`alternative_discordance` (a change makes more pairs discordant where most are correct, which costs
    power), and the figure is the larger of a drop and a rise (the test is two-sided: no change larger in
    either direction); without it, the observed share, or the difference when that is larger.

    Args:
        n_pairs: Paired cells.
        discordant: The observed share of discordant pairs (either direction).
        alpha: The test's level (two-sided).
        power: The power wanted.
        both_correct: The observed share of pairs both answered correctly, if known.

    Returns:
        The difference in accuracy, in (0, 1]; NaN without pairs or when no difference up to 1 reaches it.
    """
    if n_pairs < 1 or math.isnan(discordant):
        return math.nan
    if both_correct is None or math.isnan(both_correct):
        return _detectable_difference(n_pairs, lambda d: max(discordant, d), alpha, power)
    known = float(both_correct)

    def drop(d: float) -> float:
        return alternative_discordance(discordant, known, -d)

    def rise(d: float) -> float:
        return alternative_discordance(discordant, known, d)

    return max(_detectable_difference(n_pairs, drop, alpha, power), _detectable_difference(n_pairs, rise, alpha, power))


def _detectable_difference(n_pairs: int, discordance: Callable[[float], float], alpha: float,
                           power: float) -> float:
    """Bisection for the smallest difference whose exact power (at ``discordance(d)``) reaches ``power``.

    Each step asks only whether the power is below ``power``; :func:`_power_below` answers exactly as
    :func:`mcnemar_power` would, mostly from the discordant counts that carry weight.
    """
    if _power_below(n_pairs, discordance(1.0), 1.0, alpha, power):
        return math.nan
    low, high = 0.0, 1.0
    for _ in range(32):  # bisection to 1e-9: power rises with d
        mid = (low + high) / 2
        low, high = (mid, high) if _power_below(n_pairs, discordance(mid), mid, alpha, power) else (low, mid)
    return high


# _power_below: the discordant counts summed are those within WINDOW_SDS standard deviations (plus
# WINDOW_PAD counts) of the binomial's mean; the rest carry less than 1e-13 of its weight. A window this
# much narrower than 0..n_pairs is what pays; wider, the whole sum is cheaper to take as it is.
WINDOW_SDS = 8.0
WINDOW_PAD = 10
WINDOW_SHARE = 0.7
# The bound on everything but the left-out weight: the two sums' rounding (a few ulps of numbers <= 1) and the
# window's own probabilities (boost's binomial, ~1e-15 relative, the upper tail taken as the lower tail of
# the complementary share), with a wide margin.
ROUNDING_SLACK = 1e-12


def _power_below(n_pairs: int, discordant: float, difference: float, alpha: float, power: float) -> bool:
    """Whether ``mcnemar_power(n_pairs, discordant, difference, alpha) < power``: the same answer, faster.

    The power is a sum over the number of discordant pairs N = 0..n_pairs, each term at most its binomial
    weight. Summed over the window of N where that weight lies, it differs from the whole sum by at most the
    weight left out (one minus the window's, as computed) plus rounding, so when it is farther than that
    from ``power`` its side of ``power`` is the whole sum's; otherwise (a near tie, or a window too wide to
    pay) the whole sum decides. Every answer, hence every bisection, is :func:`mcnemar_power`'s (the
    bisection's last steps are ~1e-8 from ``power``, far above the bound).
    """
    psi = min(1.0, max(float(discordant), abs(difference)))
    if n_pairs < 1 or psi <= 0:
        return power > 0.0  # mcnemar_power is 0 here
    mean, spread = n_pairs * psi, WINDOW_SDS * math.sqrt(n_pairs * psi * (1.0 - psi)) + WINDOW_PAD
    low, high = max(0, math.floor(mean - spread)), min(n_pairs, math.ceil(mean + spread))
    if high - low + 1 > WINDOW_SHARE * (n_pairs + 1):
        return mcnemar_power(n_pairs, discordant, difference, alpha) < power
    every, region = _mcnemar_region(n_pairs, alpha)
    counts, k = every[low:high + 1].astype(np.float64), region[low:high + 1]
    pmf, cdf = _binomial_functions()
    weight = np.asarray(pmf(counts, float(n_pairs), psi), dtype=np.float64)
    share = (psi + abs(difference)) / (2 * psi)
    tested = k >= 0
    at, n = k[tested].astype(np.float64), counts[tested]
    # Both tails as lower tails (P(X >= N - k) at share is P(X <= k) at 1 - share, exact in floats for a share
    # in [1/2, 1]): one cdf over twice the counts instead of a cdf and the slower survival function.
    both = np.asarray(cdf(np.concatenate([at, at]), np.concatenate([n, n]),
                          np.concatenate([np.full(n.size, share), np.full(n.size, 1.0 - share)])), dtype=np.float64)
    tails = np.zeros(counts.size, dtype=np.float64)
    tails[tested] = both[:n.size] + both[n.size:]
    within = float(np.clip((weight * tails).sum(), 0.0, 1.0))
    left_out = max(0.0, 1.0 - float(weight.sum()))
    if abs(within - power) > left_out + ROUNDING_SLACK:
        return within < power
    return mcnemar_power(n_pairs, discordant, difference, alpha) < power


@functools.cache
def _binomial_functions() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The binomial pmf and cdf as element-wise functions of (k, n, p), for :func:`_power_below`'s window.

    scipy's own ufuncs behind ``binom.pmf`` and ``binom.cdf`` where this scipy has them (the same numbers
    without the distribution's argument checks: half the time of a window's sum); else the public functions.
    Only the window's sums use them, and those are trusted only beyond :data:`ROUNDING_SLACK` of a tie.
    """
    try:
        from scipy.special import _ufuncs

        return _ufuncs._binom_pmf, _ufuncs._binom_cdf
    except (ImportError, AttributeError):
        from scipy.stats import binom

        return binom.pmf, binom.cdf


def permutation_detectable(null: NDArray[np.float64], alpha: float = SIGNIFICANCE, power: float = POWER) -> float:
    """The excess a one-sided permutation test at ``alpha`` detects with ``power`` if a shift only moved its null.

    The null moved by the effect: the null's ``1 - alpha`` quantile minus its ``1 - power`` quantile plus its
    mean. It ignores the spread a real shift adds, so it is optimistic (BENCHMARKS.md section 17: 67% power
    at it, not 80%); :func:`shift_detectable` adds that spread and is what compare reports. Kept as its
    starting point and as the figure when there is no step data to plant a shift in.

    Args:
        null: The permuted statistics of the step (at least a few hundred for a stable quantile).
        alpha: The test's level (one-sided).
        power: The power wanted.

    Returns:
        The excess; NaN without permuted values.
    """
    values = np.asarray(null, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return math.nan
    critical = float(np.quantile(values, 1 - alpha))
    return max(0.0, critical - float(np.quantile(values, 1 - power)) + float(values.mean()))


def shift_detectable(data: StepData, null: NDArray[np.float64], alpha: float = SIGNIFICANCE,
                     power: float = POWER, seed: int = 0) -> float:
    """The smallest excess the step's permutation test at ``alpha`` detects with ``power``, spread included.

    The planted shift is the plan's (:func:`prism.plan.simulate.shift_target`): every to-response is, with
    probability ``t``, replaced by a response unlike every other (difference 1 from each, 0 from another such),
    which adds ``t^2 (1 - w_q / 2)`` to question q's expected excess (``w_q`` its within), so an excess ``d``
    is ``t^2`` times the mean of ``1 - w_q / 2``. Under it (normal approximation):

    - the statistic's spread grows: its variance is the permutation null's plus the variance of the excess
      over :data:`PLANTINGS` seeded plantings of the shift in the step's own responses (which of them move,
      and how unequally the questions take it);
    - the test's critical value grows with it: the permutation null recomputed on :data:`PLANTED_NULLS`
      planted copies (:data:`PLANTED_PERMUTATIONS` permutations each, at the starting ``t``; its extra
      variance taken as proportional to ``t``, the share of responses moved, at later steps) is wider, and
      the step's own null is scaled by the ratio of the two spreads, so its shape is kept;
    - ``d = c(d) - mean + z_power * sd(d)``, solved by a few fixed-point steps from
      :func:`permutation_detectable` (the dependence on ``d`` is mild, so it settles in three or four).

    Args:
        data: The step's responses as its test saw them (:class:`prism.stats.shifts.StepData`).
        null: The step's permuted excesses (:attr:`prism.stats.shifts.Shift.null`).
        alpha: The test's level (one-sided).
        power: The power wanted.
        seed: Seeds the plantings and their permutations.

    Returns:
        The excess; NaN without permuted values or a question with two responses of each condition.
    """
    from scipy.stats import norm

    values = np.asarray(null, dtype=np.float64)
    values = values[np.isfinite(values)]
    start = permutation_detectable(values, alpha, power)
    if values.size < 2 or math.isnan(start):
        return math.nan
    data = data.subset((data.n_from >= 2) & (data.n_to >= 2))  # the questions the test averaged over
    if not data.matrices:
        return math.nan
    _, within = shifts.question_components(data)
    reach = float(np.mean(1.0 - within / 2))  # the excess a shift of t = 1 plants
    mean, spread = float(values.mean()), float(values.std())
    critical = float(np.quantile(values, 1 - alpha))
    if reach <= 0 or spread <= 0:
        return start
    z_power = float(norm.ppf(power))
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
    # Common random numbers: one uniform per to-response and planting, a response moving when its uniform is
    # below t, so every t of the iteration sees the same plantings.
    uniforms = [rng.random((PLANTINGS, int(b))) for b in data.n_to]
    detectable = start
    first = min(1.0, math.sqrt(start / reach))
    # The permutation null of planted copies, once, at the starting t: its extra variance grows in proportion
    # to the share of responses moved, so later steps scale it (recomputing it costs as much as the test).
    widened = float(np.mean([np.var(shifts.permuted_excess(_planted_step(data, uniforms, first, k),
                                                          PLANTED_PERMUTATIONS, seed + 1 + k))
                             for k in range(PLANTED_NULLS)])) / spread**2
    for _ in range(FIXED_POINT_STEPS):
        t = min(1.0, math.sqrt(detectable / reach))
        planted = _planted_excess(data, uniforms, t)
        ratio = math.sqrt(max(1.0, 1.0 + (widened - 1.0) * t / first)) if first > 0 else 1.0
        moved = mean + (critical - mean) * ratio
        sd = math.sqrt(spread**2 + float(planted.var()))
        detectable = max(0.0, moved - mean + z_power * sd)
        if detectable >= reach:  # even moving every to-response is not enough
            return math.nan
    return detectable


def _planted_excess(data: StepData, uniforms: list[NDArray[np.float64]], t: float) -> NDArray[np.float64]:
    """The step's excess under each planting (to-response j of question q moves when ``uniforms[q][k, j] < t``).

    A moved response differs by 1 from every other response and by 0 from another moved one, so with
    ``keep`` the to-responses that stay, the cross sum is ``sum_j keep_j colsum_j + n_from * moved`` and the
    to-side's within sum is ``keep' D_tt keep + 2 moved * kept``; the from side is untouched.
    """
    totals = np.zeros(uniforms[0].shape[0] if uniforms else 0, dtype=np.float64)
    for matrix, a, b, u in zip(data.matrices, data.n_from, data.n_to, uniforms, strict=True):
        a, b = int(a), int(b)
        keep = (u >= t).astype(np.float64)
        moved, kept = b - keep.sum(axis=1), keep.sum(axis=1)
        cross = keep @ matrix[:a, a:].sum(axis=0) + a * moved
        same_to = np.einsum("kj,jl,kl->k", keep, matrix[a:, a:], keep) + 2 * moved * kept
        same_from = matrix[:a, :a].sum()
        totals += cross / (a * b) - (same_from / (a * (a - 1)) + same_to / (b * (b - 1))) / 2
    return totals / len(data.matrices)


def _planted_step(data: StepData, uniforms: list[NDArray[np.float64]], t: float, k: int) -> StepData:
    """The step's responses with planting ``k`` applied (moved to-responses made unlike every other)."""
    matrices = []
    for matrix, a, u in zip(data.matrices, data.n_from, uniforms, strict=True):
        moved = np.concatenate([np.zeros(int(a), dtype=bool), u[k] < t])
        planted = matrix.copy()
        planted[moved, :] = 1.0
        planted[:, moved] = 1.0
        planted[np.ix_(moved, moved)] = 0.0
        np.fill_diagonal(planted, 0.0)
        matrices.append(planted)
    return StepData(tuple(matrices), data.n_from, data.n_to)


def wald_noncentrality(df: int, clusters: int, alpha: float = SIGNIFICANCE, power: float = POWER) -> float:
    """The noncentrality of F(df, clusters - df) at which the Hotelling-referred Wald test reaches ``power``.

    Returns:
        lambda; NaN when ``clusters <= df`` (no reference distribution, see :func:`prism.stats.gee.wald_p`).
    """
    from scipy.optimize import brentq
    from scipy.stats import f, ncf

    if clusters <= df or df < 1:
        return math.nan
    d2 = clusters - df
    critical = float(f.isf(alpha, df, d2))

    def gap(lam: float) -> float:
        return float(ncf.sf(critical, df, d2, lam)) - power

    high = 1.0
    while gap(high) < 0 and high < 1e6:
        high *= 2
    if gap(high) < 0:
        return math.nan
    return float(brentq(gap, 0.0, high, xtol=1e-8))


def wald_detectable(cov: NDArray[np.float64], clusters: int, alpha: float = SIGNIFICANCE,
                    power: float = POWER) -> float:
    """The smallest single-coefficient effect (logits) a term's Wald test detects with ``power``, information fixed.

    With ``beta = d e_j`` the Wald statistic is ``d^2 (cov^-1)_jj``; ``d`` reaching the noncentrality of
    :func:`wald_noncentrality` for the least precise coefficient ``j`` (smallest ``(cov^-1)_jj``) is returned.
    The first version of the GEE's figure: it takes the precision as fitted, whichever way the coefficient
    moves, so it is optimistic for a move towards the ceiling. What compare reports is
    :func:`wald_detectable_directions` (which starts its search here).

    Args:
        cov: The term's (q, q) cluster-robust covariance.
        clusters: Question clusters (G).
        alpha: The test's level.
        power: The power wanted.
    """
    block = np.atleast_2d(np.asarray(cov, dtype=np.float64))
    lam = wald_noncentrality(block.shape[0], clusters, alpha, power)
    if math.isnan(lam):
        return math.nan
    try:
        precision = np.diag(np.linalg.inv(block))
    except np.linalg.LinAlgError:
        return math.nan
    least = float(precision.min())
    return math.sqrt(lam / least) if least > 0 else math.nan


def wald_detectable_directions(cov: NDArray[np.float64], clusters: int,
                               precision: Callable[[int, float], float], alpha: float = SIGNIFICANCE,
                               power: float = POWER, coefficient: int | None = None) -> tuple[float, float]:
    """The single-coefficient drop and rise (logits) a term's Wald test detects with ``power``, information moved.

    :func:`wald_detectable` takes the coefficient's precision as the fit measured it, but moving a cell moves
    its information ``mu (1 - mu)``: a cell moved towards 50% consistency is measured more precisely, one moved
    towards the ceiling (or the floor) less. Here the noncentrality of a move ``d`` of coefficient ``j`` (the
    least precise at the fit, as in :func:`wald_detectable`) is
    ``lambda(d) = d^2 (cov^-1)_jj precision(j, d) / precision(j, 0)``: the term's precision scaled by how much
    the move changes it (:class:`prism.stats.gee_sparse.MovedCoefficient`), and each direction's figure is the
    smallest ``|d|`` at which ``lambda`` reaches :func:`wald_noncentrality`'s, found by bracketing from the
    unmoved figure and Brent's method. ``lambda`` rises with ``|d|`` up to a peak and falls beyond it (a cell
    pushed against the ceiling carries no information); a direction whose ``lambda`` does not reach the target
    within :data:`LARGEST_MOVE` logits has no detectable move (NaN).

    Args:
        cov: The term's (q, q) cluster-robust covariance (the one its test used).
        clusters: Question clusters (G).
        precision: ``precision(j, d)``: the moved coefficient's precision in the term's block with coefficient
            ``j`` (its position in ``cov``) moved by ``d`` (signed, logits); only its ratio to ``d = 0`` is used.
        alpha: The test's level.
        power: The power wanted.
        coefficient: The moved coefficient's position in ``cov``; None (what compare reports): the least precise.

    Returns:
        (drop, rise): the magnitudes of the smallest negative and positive move found with ``power``; NaN
        where there is none (or no reference distribution, or a singular covariance).
    """
    block = np.atleast_2d(np.asarray(cov, dtype=np.float64))
    lam = wald_noncentrality(block.shape[0], clusters, alpha, power)
    try:
        diagonal = np.diag(np.linalg.inv(block))
    except np.linalg.LinAlgError:
        return math.nan, math.nan
    j = int(np.argmin(diagonal)) if coefficient is None else coefficient
    least = float(diagonal[j])
    unmoved = precision(j, 0.0)
    if math.isnan(lam) or not least > 0 or not unmoved > 0:
        return math.nan, math.nan
    start = math.sqrt(lam / least)

    def solve(sign: float) -> float:
        def gap(d: float) -> float:
            moved = precision(j, sign * d)
            return d * d * least * moved / unmoved - lam if math.isfinite(moved) else -lam

        return _smallest_root(gap, start, LARGEST_MOVE)

    return solve(-1.0), solve(1.0)


def larger_move(drop: float, rise: float) -> tuple[float, str]:
    """The GEE term's reported figure and method from :func:`wald_detectable_directions`' drop and rise.

    The larger of the two: no move of that size, up or down, of the least precise coefficient would have been
    missed more than ``1 - power`` of the time. A direction with no detectable move (a cell near the ceiling
    that no rise, however large, brings to 80% power before it is all consistent) leaves the other's figure,
    and the method says so (:data:`ANALYTIC_WALD_DROP_ONLY`, :data:`ANALYTIC_WALD_RISE_ONLY`), so the figure
    never claims a direction it cannot reach; NaN when neither has one.
    """
    if math.isfinite(drop) and math.isfinite(rise):
        return max(drop, rise), ANALYTIC_WALD
    if math.isfinite(drop):
        return drop, ANALYTIC_WALD_DROP_ONLY
    if math.isfinite(rise):
        return rise, ANALYTIC_WALD_RISE_ONLY
    return math.nan, ANALYTIC_WALD


def _smallest_root(gap: Callable[[float], float], start: float, limit: float) -> float:
    """The smallest ``d > 0`` with ``gap(d) = 0``, for ``gap`` negative at 0, rising to a peak, then falling.

    Bracketed from ``start`` (halving while the gap is already reached, stepping up by half while it is not),
    then Brent's method; NaN when no ``d`` up to ``limit`` reaches it.
    """
    from scipy.optimize import brentq

    low, high = 0.0, min(start, limit)
    if gap(high) >= 0:
        for _ in range(30):  # down to start / 2^30: the root lies between the first miss and the last hit
            if gap(high / 2) < 0:
                low = high / 2
                break
            high /= 2
    else:
        while True:  # gap(high) < 0 here
            if high >= limit:
                return math.nan
            low, high = high, min(limit, high * 1.5)
            if gap(high) >= 0:
                break
    return float(brentq(gap, low, high, xtol=1e-5))
