"""Detectable effects: the smallest effect a test had 80% power to detect at its n.

Each test PRISM reports gets the size of effect (in the units of its own effect) that it would have found
with probability :data:`POWER` at the level it was run at, so "no shift" reads "no shift larger than X".
Where a formula exists it is used (``analytic``); otherwise the figure is read off simulated draws the test
already made (``simulated``). The method is recorded beside the figure (:data:`METHODS`).

- The exact McNemar test of ``comparison/sensitivity.csv`` (a change in accuracy over paired cells):
  Connor's (1987) normal approximation for paired proportions, ``n d^2 = (z_a sqrt(psi) + z_b
  sqrt(psi - d^2))^2`` with ``psi`` the discordant share, solved for the difference ``d``; the discordant
  share is the observed one, or ``d`` when that is larger (an effect of ``d`` makes at least that share discordant).
- The permutation test of a shift (``comparison/shifts.csv``, ``roles.csv``): the alternative is the
  permutation null moved by the effect, so the detectable excess is the null's critical value minus its
  ``1 - POWER`` quantile plus its mean, read off the step's own permuted statistics.
- A term of the clustered model (``comparison/gee_wald.csv``): the Wald statistic on Hotelling's reference
  is a noncentral F(q, G - q, lambda) under an alternative; lambda reaching the power is solved with
  ``scipy.stats.ncf`` and turned into logits through the term's covariance, for one coefficient of the term
  moved alone (the least precisely estimated one: an effect that large on any one level or cell would have
  been found).

Holm families: a test corrected by Holm over ``m`` tests is rejected at ``alpha / m`` when it is the only
real effect among them, the hardest case, so its detectable effect is computed at ``alpha / m``.

Checked by simulation (BENCHMARKS.md, "Power planning"): at the reported figure the shift test found the effect
67% and McNemar 73% of the time, so both figures are optimistic (the null moved by the effect ignores the spread
a planted shift adds; Connor's approximation is for the asymptotic test, compare runs the exact one).

Pure functions; scipy is imported inside them.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from prism.stats.basics import SIGNIFICANCE

# The power every detectable effect is computed for.
POWER = 0.8

ANALYTIC_MCNEMAR = "analytic: McNemar, Connor's normal approximation"
SIMULATED_PERMUTATION = "simulated: permutation null shifted"
ANALYTIC_WALD = "analytic: noncentral F, one coefficient"
METHODS = (ANALYTIC_MCNEMAR, SIMULATED_PERMUTATION, ANALYTIC_WALD)


def holm_level(m: int, alpha: float = SIGNIFICANCE) -> float:
    """The level a lone real effect in a Holm family of ``m`` tests must reach: ``alpha / m``."""
    return alpha / max(1, m)


def mcnemar_detectable(n_pairs: int, discordant: float, alpha: float = SIGNIFICANCE,
                       power: float = POWER) -> float:
    """The smallest |change in accuracy| a two-sided McNemar test at ``alpha`` detects with ``power``.

    Args:
        n_pairs: Paired cells.
        discordant: The observed share of discordant pairs (either direction).
        alpha: The test's level (two-sided).
        power: The power wanted.

    Returns:
        The difference in accuracy, in (0, 1]; NaN without pairs or when no difference up to 1 reaches it.
    """
    from scipy.stats import norm

    if n_pairs < 1 or math.isnan(discordant):
        return math.nan
    z_a, z_b = float(norm.ppf(1 - alpha / 2)), float(norm.ppf(power))

    def margin(d: float) -> float:
        psi = min(1.0, max(discordant, d))
        return d * math.sqrt(n_pairs) - z_a * math.sqrt(psi) - z_b * math.sqrt(max(0.0, psi - d * d))

    if margin(1.0) < 0:
        return math.nan
    low, high = 0.0, 1.0
    for _ in range(60):  # bisection: margin rises with d
        mid = (low + high) / 2
        low, high = (mid, high) if margin(mid) < 0 else (low, mid)
    return high


def permutation_detectable(null: NDArray[np.float64], alpha: float = SIGNIFICANCE, power: float = POWER) -> float:
    """The smallest excess a one-sided permutation test at ``alpha`` detects with ``power``.

    The alternative is taken as the permutation null moved by the effect: the test rejects when the statistic
    reaches the null's ``1 - alpha`` quantile, which the moved null does with ``power`` once the effect is that
    quantile minus the null's ``1 - power`` quantile, plus the null's mean.

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
    """The smallest single-coefficient effect (logits) a term's Wald test detects with ``power``.

    With ``beta = d e_j`` the Wald statistic is ``d^2 (cov^-1)_jj``; ``d`` reaching the noncentrality of
    :func:`wald_noncentrality` for the least precise coefficient ``j`` (smallest ``(cov^-1)_jj``) is returned.

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
