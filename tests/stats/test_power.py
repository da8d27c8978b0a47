"""prism.stats.power: each detectable effect checked against the power it claims, by seeded simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from prism.stats import basics, power


def test_mcnemar_detectable_reaches_eighty_percent_power_in_simulation() -> None:
    n, psi = 200, 0.3
    d = power.mcnemar_detectable(n, psi)
    assert 0.05 < d < psi
    rng = np.random.default_rng(1)
    rejected = 0
    for _ in range(300):
        draws = rng.multinomial(n, [(psi - d) / 2, (psi + d) / 2, 1 - psi])
        rejected += basics.mcnemar_exact(int(draws[0]), int(draws[1])) < 0.05
    assert abs(rejected / 300 - power.POWER) < 0.08


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
