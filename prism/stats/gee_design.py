"""The design matrix of the clustered model: treatment-coded factors and their interactions, estimable columns only.

:func:`sparse_design` builds it for :mod:`prism.stats.gee` (:func:`design` is its dense form); which columns are
kept is decided on their Gram matrix as each is added, as R's ``lm`` aliases coefficients.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from itertools import combinations, product

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import sparse

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
    of their Gram matrix), as R's ``lm`` aliases coefficients. The dense form of :func:`sparse_design`.

    Returns:
        (X, columns of each fitted term, dropped (term, reason), column names).
    """
    X, terms, dropped, names = sparse_design(outcomes, factors, max_order)
    return np.asarray(X.toarray(), dtype=np.float64), terms, dropped, names


def sparse_design(outcomes: pd.DataFrame, factors: Sequence[str], max_order: int = 3) -> tuple[
        sparse.csr_matrix, dict[str, list[int]], list[tuple[str, str]], list[str]]:
    """:func:`design` as a sparse matrix (CSR): the same columns, never a dense n x p array.

    Each term's candidate columns are the indicators of its cells (treatment coding: the first level of
    each factor in order of appearance is the reference), so a row has one non-zero per term at most.
    Whether a candidate raises the rank is decided on the Gram matrix of the kept columns bordered by it,
    taken from the Gram matrix of every candidate (one sparse product): its entries are whole counts,
    exact in float64, so ``matrix_rank`` sees the very matrix a stacked dense check would.
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
    n = len(outcomes)
    coded: dict[str, tuple[NDArray[np.int64], list[str]]] = {}
    for name in varying:
        codes, uniques = pd.factorize(outcomes[name], sort=False)  # levels in order of appearance
        coded[name] = (np.asarray(codes, dtype=np.int64), [str(level) for level in uniques])
    rows, cols = [np.arange(n)], [np.zeros(n, dtype=np.int64)]  # the intercept
    names = ["intercept"]
    spans: list[tuple[str, int, int]] = []  # (term, first candidate column, candidates)
    width = 1
    for size in range(1, min(len(varying), max_order) + 1):
        for term in combinations(varying, size):
            counts = [len(coded[name][1]) - 1 for name in term]
            inside = np.ones(n, dtype=bool)
            index = np.zeros(n, dtype=np.int64)
            for name, count in zip(term, counts, strict=True):  # mixed radix: the last factor varies fastest
                codes = coded[name][0]
                inside &= codes >= 1
                index = index * count + (codes - 1)
            rows.append(np.flatnonzero(inside))
            cols.append(width + index[inside])
            total = math.prod(counts)
            names += [":".join(f"{name}={coded[name][1][k + 1]}" for name, k in zip(term, picks, strict=True))
                      for picks in product(*(range(count) for count in counts))]
            spans.append((":".join(term), width, total))
            width += total
    row_index, col_index = np.concatenate(rows), np.concatenate(cols)
    candidates = sparse.csc_matrix((np.ones(row_index.size), (row_index, col_index)), shape=(n, width))
    gram = np.asarray((candidates.T @ candidates).toarray(), dtype=np.float64)
    kept = [0]
    terms: dict[str, list[int]] = {}
    for label, first, total in spans:
        own = []
        for j in range(first, first + total):
            if gram[j, j] == 0:  # a cell no response is in
                continue
            trial = gram[np.ix_([*kept, j], [*kept, j])]
            if int(np.linalg.matrix_rank(trial)) == len(kept) + 1:
                kept.append(j)
                own.append(len(kept) - 1)
        if own:
            terms[label] = own
            if len(own) < total:
                log.debug("%s: %d of %d columns estimable", label, len(own), total)
        else:
            dropped.append((label, "not estimable: confounded with the terms before it in the selected runs"))
    return candidates[:, kept].tocsr(), terms, dropped, [names[j] for j in kept]
