"""The batched bootstrap gives, bit for bit, the intervals of one bootstrap per statistic."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from prism.stats import basics
from prism.stats.bootstrap_batch import Batch


def within(rng: np.random.Generator, n: int) -> pd.DataFrame:
    """A within_pair_sums-like frame of whole numbers (some questions without pairs)."""
    pairs = rng.integers(0, 4, size=n).astype(np.float64)
    return pd.DataFrame({"differ": np.floor(pairs * rng.random(n)), "pairs": pairs},
                        index=pd.Index([f"q{i}" for i in range(n)], name="question_id"))


@pytest.mark.parametrize(("n_boot", "small"), [(1, False), (7, False), (500, False), (500, True)])
def test_ratios_and_excesses_equal_one_bootstrap_each(n_boot: int, small: bool,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    if small:  # weights drawn in several blocks, not cached, and the stacked columns split into several products
        from prism.stats import bootstrap_batch

        monkeypatch.setattr(basics, "_BLOCK_ELEMENTS", 5_000)
        monkeypatch.setattr(basics, "_CACHE_ELEMENTS", 1_000)
        monkeypatch.setattr(bootstrap_batch, "_COLUMN_ELEMENTS", 700)
        basics._WEIGHTS_CACHE.clear()
    rng = np.random.default_rng(3)
    batch = Batch(n_boot=n_boot, seed=11)
    expected, registered = [], []
    for n in [1, 2, 2, 5, 40, 40, 40, 333]:  # several statistics over the same number of questions
        cells = rng.integers(1, 6, size=n).astype(np.float64)
        differ = np.floor(cells * rng.random(n))
        expected.append(basics.ratio_estimate(differ, cells, n_boot=n_boot, seed=11))
        index, point = batch.add_ratio(differ, cells)
        registered.append((index, point))
        between = pd.DataFrame({"differ": differ, "cells": cells}, index=[f"q{i}" for i in range(n)])
        a, b = within(rng, n), within(rng, n)
        exc = basics.excess(between, a, b, n_boot=n_boot, seed=11)
        expected.append(exc)
        joined = pd.concat([between, a.add_suffix("_a"), b.add_suffix("_b")], axis=1)
        joined = joined[(joined["pairs_a"] > 0) & (joined["pairs_b"] > 0)].to_numpy(np.float64)

        def combine(s: np.ndarray) -> np.ndarray:
            return np.asarray(s[:, 0] / s[:, 1] - (s[:, 2] / s[:, 3] + s[:, 4] / s[:, 5]) / 2)

        registered.append((batch.add(joined, combine, exc.value) if len(joined) else -1, exc.value))
    found = batch.intervals()
    for want, (index, point) in zip(expected, registered, strict=True):
        got = batch.estimate(index, point, found)
        assert (got.value, got.ci_low, got.ci_high) == pytest.approx((want.value, want.ci_low, want.ci_high),
                                                                     rel=0, abs=0, nan_ok=True)
    if small:
        basics._WEIGHTS_CACHE.clear()  # drawn under the patched block size: not for the tests after this one


def test_columns_that_are_not_whole_numbers_take_the_old_product() -> None:
    rng = np.random.default_rng(5)
    values, questions = rng.random(300), rng.integers(0, 60, size=300)
    want = basics.pooled_rate(values, questions, n_boot=300, seed=2)
    batch = Batch(n_boot=300, seed=2)
    index, point = batch.add_ratio(*basics.question_sums(values, questions))
    got = batch.estimate(index, point, batch.intervals())
    assert (got.value, got.ci_low, got.ci_high) == (want.value, want.ci_low, want.ci_high)


def test_undefined_statistics_have_no_interval() -> None:
    batch = Batch(n_boot=50, seed=0)
    index, point = batch.add_ratio(np.array([1.0, 0.0]), np.array([0.0, 0.0]))  # no question with cells
    assert index == -1 and math.isnan(point)
    nan_point = batch.add(np.ones((3, 2)), lambda s: s[:, 0] / s[:, 1], math.nan)
    found = batch.intervals()
    assert all(math.isnan(x) for x in found[nan_point])
    undefined = batch.estimate(index, point, found)
    assert all(math.isnan(x) for x in (undefined.value, undefined.ci_low, undefined.ci_high))
    with pytest.raises(ValueError, match="n_boot must be at least 1"):
        Batch(n_boot=0, seed=0)
