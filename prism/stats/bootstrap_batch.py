"""Many bootstrap intervals over the same resampling weights, one matrix product per block of weights.

:func:`prism.stats.basics.bootstrap_interval` multiplies the (B, n) resampling weights by one or a few
per-question vectors per statistic: a comparison's tables ask for hundreds of intervals over the same
questions, each reading the same 16 MB of weights again for two matrix-vector products. Here the
statistics are registered first (their per-question columns and how to combine the column sums) and
evaluated together: the columns of every statistic over the same number of questions are stacked, and each
block of weights is multiplied by them at once.

Same numbers, bit for bit: the weights are the same (:func:`prism.stats.basics.resample_weights`, same
``n``, B and seed) and a column sum ``weights @ column`` of whole numbers (counts of cells, of differing
pairs, of correct answers: every column PRISM's tables pass) is exact in float64 in any order of summation,
so a matrix product gives exactly the matrix-vector products it replaces. A column that is not whole
numbers (or large enough to leave float64's exact integers) is multiplied alone, by the very
matrix-vector product :func:`~prism.stats.basics.bootstrap_interval` would make.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from prism.stats.basics import LEVEL, Estimate, percentile_interval, resample_weights

# Column sums stay exact integers below this (float64's 53-bit significand).
_EXACT = 2.0**53
# Most stacked columns multiplied at once (bounds the (block, columns) product and the stacked copy).
_COLUMN_ELEMENTS = 4_000_000

Combine = Callable[[NDArray[np.float64]], NDArray[np.float64]]


def ratio(sums: NDArray[np.float64]) -> NDArray[np.float64]:
    """The pooled ratio of :func:`prism.stats.basics.ratio_estimate`: column 0 summed over column 1 summed."""
    return np.asarray(sums[:, 0] / sums[:, 1], dtype=np.float64)


@dataclass
class _Request:
    columns: NDArray[np.float64]  # (n, m): per question, the m vectors the statistic sums
    combine: Combine  # (b, m) column sums -> the b values of the statistic
    point: float
    exact: bool


class Batch:
    """Percentile bootstrap intervals of registered statistics, evaluated together (:meth:`intervals`).

    Each statistic is what :func:`prism.stats.basics.bootstrap_interval` would be given: its value on a
    (b, n) block of weights is ``combine(weights @ columns)``; the interval is read off the B values by
    :func:`prism.stats.basics.percentile_interval`, exactly as there.
    """

    def __init__(self, *, n_boot: int, seed: int, level: float = LEVEL) -> None:
        """Start an empty batch.

        Args:
            n_boot: Bootstrap resamples (B), as in :func:`prism.stats.basics.bootstrap_interval`.
            seed: Their seed.
            level: Interval coverage.

        Raises:
            ValueError: If ``n_boot`` < 1 or ``level`` is not in (0, 1).
        """
        if n_boot < 1:
            raise ValueError(f"n_boot must be at least 1, got {n_boot}")
        if not 0 < level < 1:
            raise ValueError(f"level must be in (0, 1), got {level}")
        self.n_boot, self.seed, self.level = n_boot, seed, level
        self._requests: list[_Request] = []

    def add(self, columns: NDArray[np.float64], combine: Combine, point: float) -> int:
        """Register a statistic; returns its index in :meth:`intervals`.

        Args:
            columns: (n_questions, m) per-question vectors, rows in the order of the resampled questions.
            combine: Maps the (b, m) sums ``weights @ columns`` to the statistic's b values.
            point: The statistic on the observed data (NaN: no interval, as in ``bootstrap_interval``).
        """
        matrix = np.ascontiguousarray(columns, dtype=np.float64)
        if matrix.ndim != 2:
            raise ValueError(f"columns must be (n_questions, m), got shape {matrix.shape}")
        total = float(np.abs(matrix).sum()) * max(1, matrix.shape[0]) if matrix.size else 0.0
        exact = bool(np.isfinite(total) and total < _EXACT and np.array_equal(matrix, np.round(matrix)))
        self._requests.append(_Request(matrix, combine, float(point), exact))
        return len(self._requests) - 1

    def add_ratio(self, numerators: NDArray[np.float64], denominators: NDArray[np.float64]) -> tuple[int, float]:
        """Register :func:`prism.stats.basics.ratio_estimate`'s statistic (questions with denominator 0 left out).

        Returns:
            (index, point): the index for :meth:`intervals`, -1 when no question is left (then the
            estimate is undefined), and the pooled ratio.
        """
        num = np.asarray(numerators, dtype=np.float64)
        den = np.asarray(denominators, dtype=np.float64)
        keep = den > 0
        num, den = num[keep], den[keep]
        if num.size == 0:
            return -1, math.nan
        point = float(num.sum() / den.sum())
        return self.add(np.column_stack([num, den]), ratio, point), point

    def intervals(self) -> list[tuple[float, float]]:
        """Every registered statistic's (low, high), in the order they were added."""
        found: list[tuple[float, float]] = [(math.nan, math.nan)] * len(self._requests)
        groups: dict[int, list[int]] = {}
        for index, request in enumerate(self._requests):
            if request.columns.shape[0] == 0 or math.isnan(request.point):
                continue
            groups.setdefault(request.columns.shape[0], []).append(index)
        for n_questions, members in groups.items():
            values = {i: np.empty(self.n_boot, dtype=np.float64) for i in members}
            stacked = [i for i in members if self._requests[i].exact]
            alone = [i for i in members if not self._requests[i].exact]
            chunks = [(chunk, np.hstack([self._requests[i].columns for i in chunk]))
                      for chunk in _chunks(stacked, [self._requests[i].columns.shape[1] for i in stacked], n_questions)]
            start = 0
            for weights in resample_weights(n_questions, self.n_boot, self.seed):
                rows = slice(start, start + len(weights))
                for chunk, columns in chunks:
                    sums = weights @ columns
                    offset = 0
                    for i in chunk:
                        width = self._requests[i].columns.shape[1]
                        values[i][rows] = self._requests[i].combine(sums[:, offset : offset + width])
                        offset += width
                for i in alone:
                    request = self._requests[i]
                    sums = np.column_stack([weights @ np.ascontiguousarray(request.columns[:, j])
                                            for j in range(request.columns.shape[1])])
                    values[i][rows] = request.combine(sums)
                start += len(weights)
            for i in members:
                found[i] = percentile_interval(values[i], self._requests[i].point, self.level)
        return found

    def estimate(self, index: int, point: float, found: list[tuple[float, float]]) -> Estimate:
        """The :class:`~prism.stats.basics.Estimate` of statistic ``index`` (-1: undefined) from :meth:`intervals`."""
        if index < 0:
            return Estimate.undefined()
        low, high = found[index]
        return Estimate(point, low, high)


def _chunks(members: list[int], widths: list[int], n_questions: int) -> list[list[int]]:
    """Split the statistics into runs whose stacked columns stay under ``_COLUMN_ELEMENTS`` elements."""
    limit = max(1, _COLUMN_ELEMENTS // max(1, n_questions))
    chunks: list[list[int]] = []
    current: list[int] = []
    width = 0
    for member, w in zip(members, widths, strict=True):
        if current and width + w > limit:
            chunks.append(current)
            current, width = [], 0
        current.append(member)
        width += w
    if current:
        chunks.append(current)
    return chunks
