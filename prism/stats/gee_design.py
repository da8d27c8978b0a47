"""The design matrix of the clustered model: treatment-coded factors and their interactions, estimable columns only.

:func:`design` builds it for :mod:`prism.stats.gee`; which columns are kept is decided on their Gram matrix as
each is added (:class:`_Columns`), as R's ``lm`` aliases coefficients.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from itertools import combinations, product

import numpy as np
import pandas as pd
from numpy.typing import NDArray

log = logging.getLogger(__name__)


def _dummies(values: pd.Series) -> tuple[list[str], NDArray[np.float64]]:
    """Treatment-coded indicators (reference: the first level in order of appearance)."""
    codes, uniques = pd.factorize(values, sort=False)  # levels in order of appearance
    levels = [str(level) for level in uniques]
    return levels[1:], (codes[:, None] == np.arange(1, len(levels))[None, :]).astype(np.float64)


def design(outcomes: pd.DataFrame, factors: Sequence[str], max_order: int = 3) -> tuple[
        NDArray[np.float64], dict[str, list[int]], list[tuple[str, str]], list[str]]:
    """The design matrix of every varying factor and interaction up to ``max_order``, estimable columns only.

    Terms enter in hierarchical order (intercept, main effects, two-way, three-way); a column is kept
    when it is not all zero and raises the rank of the columns kept before it (``numpy.linalg.matrix_rank``
    of their Gram matrix), as R's ``lm`` aliases coefficients.

    Returns:
        (X, columns of each fitted term, dropped (term, reason), column names).
    """
    dropped: list[tuple[str, str]] = []
    varying = []
    for name in factors:
        levels = [str(level) for level in pd.unique(outcomes[name])]
        if len(levels) >= 2:
            varying.append(name)
        else:
            dropped.append((name, f"one level in the selected runs: {levels[0] if levels else 'none'}"))
    constant = [name for name in factors if name not in varying]
    for size in range(2, max_order + 1):
        for term in combinations(factors, size):
            fixed = [name for name in term if name in constant]
            if fixed:
                dropped.append((":".join(term), f"involves {', '.join(fixed)}, which has one level"))
    coded = {name: _dummies(outcomes[name]) for name in varying}
    # Room for every candidate column at once: most designs keep them all, so none is copied to grow the array.
    orders = range(1, min(len(varying), max_order) + 1)
    candidates = sum(math.prod(len(coded[name][0]) for name in term) for size in orders
                     for term in combinations(varying, size))
    kept_columns = _Columns(len(outcomes), capacity=1 + candidates)
    names = ["intercept"]
    terms: dict[str, list[int]] = {}
    for size in range(1, min(len(varying), max_order) + 1):
        for term in combinations(varying, size):
            label = ":".join(term)
            kept, total = [], 0
            # A term's columns one at a time (levels of the last factor varying fastest), never all at once.
            for picks in product(*(range(len(coded[name][0])) for name in term)):
                total += 1
                column = np.ones(len(outcomes))
                for name, k in zip(term, picks, strict=True):
                    column = column * coded[name][1][:, k]
                if not column.any():
                    continue
                if kept_columns.raises_rank(column):
                    kept_columns.append(column)
                    names.append(":".join(f"{name}={coded[name][0][k]}" for name, k in zip(term, picks, strict=True)))
                    kept.append(kept_columns.count - 1)
            if kept:
                terms[label] = kept
                if len(kept) < total:
                    log.debug("%s: %d of %d columns estimable", label, len(kept), total)
            else:
                dropped.append((label, "not estimable: confounded with the terms before it in the selected runs"))
    return kept_columns.matrix(), terms, dropped, names


class _Columns:
    """The design's kept columns in one growing array, with their Gram matrix kept alongside.

    Whether a candidate column raises the rank is decided on the Gram matrix of the kept columns plus it,
    bordered by one row and column (``X'c`` and ``c'c``) instead of recomputed from a stacked copy: the
    columns are 0/1 indicators, so every entry is a whole count, exact in float64 whatever the order of
    summation, and ``matrix_rank`` sees the very matrix the full product would give, in O(n p) per column
    instead of O(n p^2) and without a copy of the design per candidate.
    """

    def __init__(self, n: int, capacity: int = 16) -> None:
        self._data = np.empty((n, max(capacity, 1)), dtype=np.float64)
        self._data[:, 0] = 1.0  # the intercept
        self.count = 1
        self._gram = np.array([[float(n)]])
        self._trial = self._gram  # the bordered Gram matrix of the last column checked

    def _bordered(self, column: NDArray[np.float64]) -> NDArray[np.float64]:
        cross = column @ self._data[:, : self.count]
        return np.block([[self._gram, cross[:, None]], [cross[None, :], np.array([[column @ column]])]])

    def raises_rank(self, column: NDArray[np.float64]) -> bool:
        """Whether ``column`` is not in the span of the kept columns (full rank of the bordered Gram matrix)."""
        trial = self._bordered(column)
        if bool(np.linalg.matrix_rank(trial) == self.count + 1):
            self._trial = trial
            return True
        return False

    def append(self, column: NDArray[np.float64]) -> None:
        """Keep ``column`` (just checked by :meth:`raises_rank`), growing the array by doubling."""
        if self.count == self._data.shape[1]:
            grown = np.empty((self._data.shape[0], 2 * self.count), dtype=np.float64)
            grown[:, : self.count] = self._data
            self._data = grown
        self._data[:, self.count] = column
        self._gram = self._trial
        self.count += 1

    def matrix(self) -> NDArray[np.float64]:
        """The kept columns as the design matrix (n, p): the array itself when every column it has room for was kept."""
        if self.count == self._data.shape[1]:
            return self._data
        return np.ascontiguousarray(self._data[:, : self.count])
