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
