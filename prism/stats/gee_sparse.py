"""The clustered model's fit on the sparse design: statsmodels' GEE, cluster by cluster, without a dense n x p matrix.

:mod:`prism.stats.gee` fits a binomial GEE (logit link, exchangeable working correlation, Mancl-DeRouen
bias-reduced sandwich). statsmodels' ``GEE`` does it on a dense copy of the design per cluster (two of
them: its ``exog_li`` and the derivative matrices), 51 MB at 20 runs and growing with the square of the
runs. The design is 0/1 indicators with a handful of non-zeros per row, so every sum statsmodels forms
has a closed form over sparse products. With ``v = mu (1 - mu)``, ``s = sqrt(v)``, the Pearson residuals
``e = (y - mu) / s``, the working correlation ``a`` and, for a cluster of ``k`` responses,
``c = a / (1 - a) / (1 + a (k - 1))`` (the exchangeable inverse ``I / (1 - a) - c 11'``):

- ``D_i' V_i^-1 D_i = X_i' diag(v) X_i / (1 - a) - c_i u_i u_i'`` with ``u_i = X_i' s_i``;
- the cluster's score ``g_i = X_i' (y_i - mu_i) / (1 - a) - c_i u_i E_i`` with ``E_i`` its summed ``e``;
- the Mancl-DeRouen correction ``(I - H_i)^-1 r_i`` with ``H_i = D_i N D_i' V_i^-1`` and ``N = B^-1``,
  by Woodbury ``D_i' V_i^-1 (I - H_i)^-1 r_i = B (B - B_i)^-1 g_i``, so the bias-reduced covariance
  ``N [sum_i (B (B - B_i)^-1 g_i)(...)'] N`` is ``sum_i h_i h_i'`` with ``h_i = (B - B_i)^-1 g_i``: a p x p
  solve per cluster instead of statsmodels' k x k one (the same size here, but never a dense design).

The iteration is statsmodels' own (``GEE.fit`` with its defaults: at most 60 Gauss-Newton steps, the
exchangeable correlation re-estimated after each step by ``Exchangeable.update`` with ``ddof_scale = p``,
converged when the score's L2 norm is below 1e-6 after at least one such update, the scale fixed at 1 for
the binomial), from the GLM's estimates (:func:`prism.stats.gee.glm_start`). The tests check the estimates,
the naive and bias-reduced covariances and the Wald statistics against statsmodels' fit to 1e-6 on every
design they use; statsmodels stays the reference there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

# statsmodels' GEE.fit defaults.
MAX_ITER = 60
CTOL = 1e-6
# Clusters whose p x p corrections are solved at once (bounds the stacked arrays' memory).
_CHUNK = 64


@dataclass(frozen=True)
class SparseGeeFit:
    """What the fit gives: the estimates and covariances statsmodels' ``GEEResults`` holds.

    Attributes:
        params: The estimates.
        cov: The bias-reduced (Mancl-DeRouen) sandwich covariance (``cov_params()`` of ``cov_type="bias_reduced"``).
        cov_naive: The model-based covariance (``cov_naive``).
        fitted: The fitted probabilities.
        dep: The exchangeable working correlation.
        converged: Whether the score norm fell below the tolerance within the iteration limit.
        iterations: Gauss-Newton steps made.
    """

    params: NDArray[np.float64]
    cov: NDArray[np.float64]
    cov_naive: NDArray[np.float64]
    fitted: NDArray[np.float64]
    dep: float
    converged: bool
    iterations: int


def _solve(matrix: NDArray[np.float64], rhs: NDArray[np.float64]) -> NDArray[np.float64]:
    """``matrix^-1 rhs``, the pseudo-inverse when singular (as statsmodels' update falls back)."""
    try:
        return np.asarray(np.linalg.solve(matrix, rhs), dtype=np.float64)
    except np.linalg.LinAlgError:
        return np.asarray(np.linalg.pinv(matrix) @ rhs, dtype=np.float64)


def _inverse(matrix: NDArray[np.float64]) -> NDArray[np.float64]:
    try:
        return np.asarray(np.linalg.inv(matrix), dtype=np.float64)
    except np.linalg.LinAlgError:
        return np.asarray(np.linalg.pinv(matrix), dtype=np.float64)


class _Model:
    """The design and clusters, with the sums every step needs."""

    def __init__(self, X: sparse.csr_matrix, y: NDArray[np.float64], clusters: NDArray[np.int64]) -> None:
        self.X = X.tocsr()
        self.y = y
        self.n, self.p = X.shape
        self.groups = int(clusters.max()) + 1
        self.codes = clusters
        # The cluster indicator (groups x n): sums over each cluster's rows as one sparse product.
        self.C = sparse.csr_matrix((np.ones(self.n), (clusters, np.arange(self.n))), shape=(self.groups, self.n))
        self.sizes = np.bincount(clusters, minlength=self.groups).astype(np.float64)
        self.pairs = float((self.sizes * (self.sizes - 1) / 2).sum())

    def means(self, beta: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Fitted probabilities and their binomial variance, as statsmodels' logit link and Binomial give them."""
        linear = self.X @ beta
        mu = 1.0 / (1.0 + np.exp(-linear))
        # statsmodels' Binomial variance clips the mean to [eps, 1 - eps]; its logit's inverse derivative does not.
        eps = np.finfo(float).eps
        clipped = np.clip(mu, eps, 1 - eps)
        return mu, clipped * (1 - clipped)

    def c(self, dep: float) -> NDArray[np.float64]:
        return np.asarray(dep / (1.0 - dep) / (1.0 + dep * (self.sizes - 1)), dtype=np.float64)

    def pieces(self, beta: NDArray[np.float64], dep: float) -> tuple[
            NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """(B, per-cluster scores G x p, U = X_i' s_i per cluster, c per cluster, mu) at ``beta``."""
        mu, var = self.means(beta)
        # D = diag(mu (1 - mu)) X: statsmodels' mean_deriv (the logit's inverse derivative).
        deriv = mu * (1 - mu)
        s = np.sqrt(var)
        resid = self.y - mu
        e = resid / s
        c = self.c(dep)
        scale = 1.0 / (1.0 - dep)
        # D' V^-1 D = X' diag(d) S^-1 R^-1 S^-1 diag(d) X, with d = deriv and S = diag(s).
        w = deriv / s  # d / s: the rows' weight on each side of R^-1
        Xw = sparse.diags(w) @ self.X
        U = np.asarray((self.C @ Xw).todense())  # X_i' (d / s) per cluster
        bmat = np.asarray((Xw.T @ Xw).todense()) * scale - (U * c[:, None]).T @ U
        E = np.asarray(self.C @ e).ravel()
        G = np.asarray((self.C @ (sparse.diags(w * e) @ self.X)).todense()) * scale - (c * E)[:, None] * U
        return bmat, G, U, c, mu

    def update_dep(self, beta: NDArray[np.float64]) -> float:
        """``Exchangeable.update``: the moment estimate of the working correlation, ddof = p."""
        mu, var = self.means(beta)
        e = (self.y - mu) / np.sqrt(var)
        ssr = np.asarray(self.C @ (e * e)).ravel()
        sums = np.asarray(self.C @ e).ravel()
        scale = float(ssr.sum()) / (self.n * (self.n - self.p) / self.n)
        residsq = float(((sums ** 2 - ssr) / 2).sum()) / scale
        return float(residsq / (self.pairs * (self.pairs - self.p) / self.pairs))


def fit_sparse_gee(X: sparse.csr_matrix | NDArray[np.float64], y: NDArray[np.float64], clusters: NDArray[np.int64],
                   start: NDArray[np.float64]) -> SparseGeeFit:
    """Fit the binomial exchangeable GEE as statsmodels' ``GEE(...).fit(cov_type="bias_reduced")`` does.

    Args:
        X: The design (n x p), sparse or dense.
        y: The 0/1 outcomes.
        clusters: Each row's cluster, coded 0..G-1.
        start: Starting estimates (statsmodels' ``start_params``).

    Raises:
        FloatingPointError: If the estimates leave the finite numbers.
    """
    model = _Model(sparse.csr_matrix(X), np.asarray(y, dtype=np.float64), np.asarray(clusters, dtype=np.int64))
    beta = np.array(start, dtype=np.float64)
    dep, norm, iterations = 0.0, -1.0, 0
    for iterations in range(1, MAX_ITER + 1):
        updates = iterations - 1  # the correlation is re-estimated after every step but the converged one
        bmat, G, _, _, _ = model.pieces(beta, dep)
        score = G.sum(axis=0)
        beta = beta + _solve(bmat, score)
        if not np.isfinite(beta).all():
            raise FloatingPointError("the estimates are not finite")
        norm = float(np.sqrt((score ** 2).sum()))
        if norm < CTOL and updates > 0:
            break
        dep = model.update_dep(beta)
    bmat, G, U, c, mu = model.pieces(beta, dep)
    naive = _inverse(bmat)
    cov = _bias_reduced(model, beta, dep, bmat, G, U, c)
    return SparseGeeFit(beta, cov, naive, mu, dep, norm < CTOL, iterations)


def _bias_reduced(model: _Model, beta: NDArray[np.float64], dep: float, bmat: NDArray[np.float64],
                  G: NDArray[np.float64], U: NDArray[np.float64], c: NDArray[np.float64]) -> NDArray[np.float64]:
    """``sum_i h_i h_i'`` with ``h_i = (B - B_i)^-1 g_i`` (Mancl-DeRouen by Woodbury; see the module)."""
    mu, var = model.means(beta)
    w = mu * (1 - mu) / np.sqrt(var)
    scale = 1.0 / (1.0 - dep)
    # Every cluster's X_i' diag(w^2) X_i at once: entry (j, l) of cluster i sums w^2 over its rows holding both
    # columns, so each row adds w^2 at (i, j * p + l) for every pair of its non-zero columns (a handful per row).
    X = model.X
    counts = np.diff(X.indptr)
    p = model.p
    pair_rows, pair_cols, pair_values = [], [], []
    for size in np.unique(counts):
        rows = np.flatnonzero(counts == size)
        if size == 0:
            continue
        starts = X.indptr[rows]
        columns = X.indices[starts[:, None] + np.arange(size)[None, :]]  # (rows, size)
        values = X.data[starts[:, None] + np.arange(size)[None, :]] * w[rows, None]
        pair_rows.append(np.repeat(model.codes[rows], size * size))
        pair_cols.append((columns[:, :, None] * p + columns[:, None, :]).ravel())
        pair_values.append((values[:, :, None] * values[:, None, :]).ravel())
    own = sparse.csr_matrix((np.concatenate(pair_values), (np.concatenate(pair_rows), np.concatenate(pair_cols))),
                            shape=(model.groups, p * p))
    out = np.zeros((p, p))
    for first in range(0, model.groups, _CHUNK):
        last = min(first + _CHUNK, model.groups)
        blocks = np.asarray(own[first:last].toarray(), dtype=np.float64).reshape(last - first, p, p) * scale
        blocks -= c[first:last, None, None] * U[first:last, :, None] * U[first:last, None, :]
        h = np.linalg.solve(bmat[None, :, :] - blocks, G[first:last, :, None])[:, :, 0]
        out += h.T @ h
    return out


class MovedCoefficient:
    """The plain sandwich's precision of one coefficient when it alone is moved, the fit's residuals kept.

    What a term's detectable effect needs (:func:`prism.stats.power.wald_detectable_directions`): moving coefficient
    ``j`` by ``d`` moves the logits of the responses whose ``x_j`` is not zero, and with them their information
    ``mu (1 - mu)``: towards 50% a cell carries more, towards the ceiling less. The covariance under that
    alternative is the sandwich at ``beta + d e_j`` with each response's Pearson residual as the fit left it
    (its correlation with the cluster's other residuals kept, only its scale moving with its fitted
    probability) and the working correlation the fit estimated: per response, the weight ``w = mu (1 - mu) / s``
    of ``B`` and of the scores changes on the moved rows alone, so ``B``, ``U`` and the cluster scores are
    updated from those rows only. Because the whole bread and meat are recomputed, a coefficient measured
    against a reference cell (treatment coding) keeps that cell's share of its variance unmoved, and the
    precision is that of the term's block (the other coefficients of the term held, as its Wald test has them).

    The plain sandwich (``N sum_i g_i g_i' N``), not the bias-reduced one: it is used as a ratio to the
    unmoved value, applied to the bias-reduced precision the test uses, and costs no per-cluster solve.
    """

    def __init__(self, X: sparse.csr_matrix | NDArray[np.float64], y: NDArray[np.float64],
                 clusters: NDArray[np.int64], fit: SparseGeeFit) -> None:
        model = _Model(sparse.csr_matrix(X), np.asarray(y, dtype=np.float64), np.asarray(clusters, dtype=np.int64))
        self._model = model
        self._scale = 1.0 / (1.0 - fit.dep)
        self._linear = np.asarray(model.X @ fit.params, dtype=np.float64)
        mu, var = model.means(fit.params)
        s = np.sqrt(var)
        self._w = mu * (1 - mu) / s
        self._e = (model.y - mu) / s  # the Pearson residuals, kept under every alternative
        self._c = model.c(fit.dep)
        bmat, G, U, _, _ = model.pieces(fit.params, fit.dep)
        self._bmat, self._G, self._U = bmat, G, U
        self._UcU = (U * self._c[:, None]).T @ U
        self._cE = self._c * np.asarray(model.C @ self._e).ravel()
        self._columns = model.X.tocsc()
        self._maps: dict[int, tuple[NDArray[np.intp], NDArray[np.float64], sparse.csr_matrix, sparse.csr_matrix]] = {}

    def _map(self, j: int) -> tuple[NDArray[np.intp], NDArray[np.float64], sparse.csr_matrix, sparse.csr_matrix]:
        """Coefficient ``j``'s moved rows, their ``x_j``, and two linear maps of a per-row vector ``a`` on them.

        The maps give ``vec(X_m' diag(a) X_m)`` (p * p) and ``vec(C_m diag(a) X_m)`` (per cluster and column,
        G * p): every update of a move is these two sparse products (built once per coefficient, as
        :func:`_bias_reduced` builds its pairs).
        """
        if j in self._maps:
            return self._maps[j]
        model, p = self._model, self._model.p
        column = self._columns[:, j]
        rows = np.asarray(column.indices, dtype=np.intp)
        moved = model.X[rows].tocoo()
        local, cols, values = moved.row, moved.col, moved.data
        # Every pair of non-zero columns of each moved row (a handful per row, as in _bias_reduced).
        order = np.argsort(local, kind="stable")
        local, cols, values = local[order], cols[order], values[order]
        starts = np.searchsorted(local, np.arange(rows.size))
        ends = np.searchsorted(local, np.arange(rows.size), side="right")
        pair_rows, pair_at, pair_values = [], [], []
        for size in np.unique(ends - starts):
            which = np.flatnonzero(ends - starts == size)
            if size == 0:
                continue
            at = starts[which][:, None] + np.arange(size)[None, :]
            c, v = cols[at], values[at]
            pair_rows.append(np.repeat(which, size * size))
            pair_at.append((c[:, :, None] * p + c[:, None, :]).ravel())
            pair_values.append((v[:, :, None] * v[:, None, :]).ravel())
        gram = sparse.csr_matrix((np.concatenate(pair_values), (np.concatenate(pair_at), np.concatenate(pair_rows))),
                                 shape=(p * p, rows.size))
        cluster_at = model.codes[rows][local] * p + cols
        per_cluster = sparse.csr_matrix((values, (cluster_at, local)), shape=(model.groups * p, rows.size))
        self._maps[j] = (rows, np.asarray(column.data, dtype=np.float64), gram, per_cluster)
        return self._maps[j]

    def precision(self, index: list[int], j: int, d: float) -> float:
        """``(V[index, index]^-1)`` at coefficient ``j``, ``V`` the plain sandwich with ``beta_j`` moved by ``d``.

        Args:
            index: The term's coefficients (columns of the design).
            j: The moved coefficient (one of ``index``).
            d: The move, in logits (signed).

        Returns:
            The precision; NaN when the moved covariance is singular or not finite.
        """
        model, p = self._model, self._model.p
        rows, x_j, gram, per_cluster = self._map(j)
        with np.errstate(over="ignore"):
            mu = 1.0 / (1.0 + np.exp(-(self._linear[rows] + d * x_j)))
        eps = np.finfo(float).eps
        clipped = np.clip(mu, eps, 1 - eps)  # as _Model.means: the variance clipped, the derivative not
        w = mu * (1 - mu) / np.sqrt(clipped * (1 - clipped))
        old = self._w[rows]
        delta = w - old
        # U' = U + C diag(delta) X on the moved rows; B' and the scores G' follow from it (see _Model.pieces).
        U = self._U + (per_cluster @ delta).reshape(model.groups, p)
        bmat = (self._bmat + (gram @ (w**2 - old**2)).reshape(p, p) * self._scale
                - (U * self._c[:, None]).T @ U + self._UcU)
        G = (self._G + (per_cluster @ (delta * self._e[rows])).reshape(model.groups, p) * self._scale
             - self._cE[:, None] * (U - self._U))
        bread = _inverse(bmat)
        cov = bread @ (G.T @ G) @ bread
        block = cov[np.ix_(index, index)]
        if not np.isfinite(block).all():
            return math.nan
        try:
            inverse = np.linalg.inv(block)
        except np.linalg.LinAlgError:
            return math.nan
        return float(inverse[index.index(j), index.index(j)])
