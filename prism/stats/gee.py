"""A clustered model of consistency with the baseline: binomial GEE and global Wald tests per effect.

Outcome: for every non-baseline response, whether its canonical answer equals the *modal* answer of the
same question's baseline repetitions in the same run (UNKNOWN an outcome of its own). A question whose
baseline repetitions have no single most frequent answer (a tie) has no reference answer: its responses
are left out and counted in a note (the same rule as the majority metrics, :mod:`prism.results.metrics`).
With one repetition the mode is the baseline's only answer.

Model: logit P(consistent) on model, the condition term, dataset and all their interactions, estimated
by generalized estimating equations clustered by question (exchangeable working correlation). The
condition term is the condition *family* when the non-baseline conditions span two or more families,
and the condition itself when they all share one family (one condition set, e.g. ``prism``'s P1-P4).
Only terms that vary are fitted: a factor with one level in the selected runs is dropped, with every
interaction involving it; a term whose columns are all confounded with earlier terms (e.g. each model run
on its own dataset) is dropped as not estimable.

A grid (:mod:`prism.conditions.grid`) is modelled by its axes instead: logit P(consistent) on model, each crossed
axis (its values as levels, the baseline the reference) and dataset, with every two-way interaction
(``labels:option_order``) and none of higher order, so an interaction between two axes has its own Wald
test. The baseline cell is the reference answer and is not itself an outcome, so the intercept is free
and the two-way axis interaction has one degree of freedom fewer than the product of the axes'
non-baseline value counts: it tests whether the cells where both axes move differ among themselves
beyond what the two axes do alone. A penalty shared alike by every such cell (any two changes at once
cost the same) is absorbed by the intercept and the main effects, and is not what this term detects.

What computes it:

- the fit of ``statsmodels.genmod.generalized_estimating_equations.GEE`` with ``families.Binomial()`` (logit
  link) and ``cov_struct.Exchangeable()``, fitted with ``cov_type="bias_reduced"``: the Mancl-DeRouen
  bias-reduced sandwich covariance, because the plain sandwich is anti-conservative with the 20-100
  question clusters PRISM has. It is computed cluster by cluster on the sparse design
  (:mod:`prism.stats.gee_sparse`, the same iteration and formulas; statsmodels holds two dense copies of
  the design per cluster, the one part of a comparison quadratic in the runs), and the tests check it
  against statsmodels' own fit to 1e-6 on every design they use;
- each effect's global Wald chi-square ``W = b' V^-1 b`` over the term's coefficients (what
  ``GEEResults.wald_test`` gives for the contrast selecting them) and its degrees of freedom ``q``;
- ``scipy.stats.f.sf`` for its p-value, from Hotelling's T-squared reference rather than chi-square(q): with
  ``G`` question clusters, ``W (G - q) / (q (G - 1))`` is referred to F(q, G - q) (:func:`wald_p`). The
  sandwich is an average of ``G`` cluster score products, so a Wald statistic built on it behaves like
  Hotelling's T-squared on ``G - 1`` degrees of freedom, not like a chi-square; the chi-square reference
  rejected true null grid interactions (15 df, 30 clusters) in half of simulated runs at 5%, this one at
  about the nominal rate (``scripts/grid_interaction_rates.py``; the rates are in ``BENCHMARKS.md``). A
  term with at least as many coefficients as there are clusters cannot be tested this way and is dropped
  with that reason;
- ``numpy.linalg.matrix_rank`` decides which dummy columns are estimable;
- each term's ``detectable_effect``: the move of its least precise coefficient, down or up, that its test
  finds with 80% power, the information of the moved responses recomputed at each size of move
  (:class:`prism.stats.gee_sparse.MovedCoefficient`, :func:`prism.stats.power.wald_detectable_directions`);
  the larger of the two is reported (``effects`` keeps both).

A model that cannot be fitted is reported as such, never with numbers: no variation in the outcome, a
cell of the fitted factors where every response is consistent (or none is) -- perfect separation, whose
logit is infinite -- an estimating equation that does not converge, or a singular cluster-robust
covariance (its smallest eigenvalue negligible next to the model-based variances, e.g. when every
question gave the same responses).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import sparse

from prism.stats.gee_design import sparse_design
from prism.stats.gee_sparse import MovedCoefficient, fit_sparse_gee
from prism.stats.power import larger_move, wald_detectable_directions

log = logging.getLogger(__name__)

# detectable_effect: the single-coefficient move (logits), up or down, the term's test had 80% power to find
# (prism.stats.power.wald_detectable_directions, the larger of a drop and a rise); detectable_method: how.
WALD_COLUMNS = ("effect", "chi2", "df", "p", "detectable_effect", "detectable_method")
# GeeResult.effects also holds each direction's figure (detectable_effect is the larger; the CSV has only it).
DIRECTION_COLUMNS = ("detectable_drop", "detectable_rise")

# Columns the input frame needs: one row per observed response.
RESPONSE_COLUMNS = ("run", "model", "dataset", "question_id", "condition", "family", "category")

# The factors, in the order their terms enter the model (main effects, then two-way, then three-way
# interactions, each in this order). "condition" is replaced by "family" when families vary.
FACTORS = ("model", "condition", "dataset")

# Fitted probabilities this close to 0 or 1 mean the estimates ran off to infinity (separation).
_BOUNDARY = 1e-8

# A term's sandwich covariance whose smallest eigenvalue is below this share of its model-based (naive)
# variances is singular in all but rounding: e.g. every question cluster gave the same responses, so the
# between-cluster variation the sandwich measures is zero and a Wald statistic would divide by noise.
_SINGULAR = 1e-8


@dataclass
class GeeResult:
    """What the clustered model found, or why it was not fitted.

    Attributes:
        effects: One row per fitted term: :data:`WALD_COLUMNS` and :data:`DIRECTION_COLUMNS` (the magnitudes of
            the smallest drop and rise of the least precise coefficient found with 80% power; ``detectable_effect``
            is the larger) (empty when not fitted).
        dropped: (term, reason) for every term left out.
        notes: Plain sentences about the data modelled (e.g. responses left out).
        failure: Why the model was not fitted, or None when it was.
        condition_term: ``family``, ``condition`` or ``axes`` (a grid's axes): what the condition factor is.
        n_responses: Responses modelled.
        n_clusters: Question clusters.
    """

    effects: pd.DataFrame
    dropped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failure: str | None = None
    condition_term: str = "condition"
    n_responses: int = 0
    n_clusters: int = 0

    @property
    def fitted(self) -> bool:
        """Whether the model was fitted and its Wald tests are meaningful."""
        return self.failure is None and not self.effects.empty

    def table(self) -> pd.DataFrame:
        """The ``gee_wald.csv`` table: the fitted effects, then a row per dropped term and note.

        Rows that are not tests carry their text in ``effect`` (``dropped: ...``, ``note: ...``,
        ``not fitted: ...``) and leave ``chi2``, ``df`` and ``p`` empty, so the file says on its own what
        was and was not tested.
        """
        rows = [tuple(r) for r in self.effects[list(WALD_COLUMNS)].itertuples(index=False)]
        rows += [(f"dropped: {term} ({reason})", math.nan, math.nan, math.nan, math.nan, "")
                 for term, reason in self.dropped]
        rows += [(f"note: {note}", math.nan, math.nan, math.nan, math.nan, "") for note in self.notes]
        if self.failure is not None:
            rows.append((f"not fitted: {self.failure}", math.nan, math.nan, math.nan, math.nan, ""))
        return pd.DataFrame(rows, columns=list(WALD_COLUMNS)).astype(
            {"chi2": float, "df": float, "p": float, "detectable_effect": float})


def _empty_effects() -> pd.DataFrame:
    return pd.DataFrame({"effect": pd.Series(dtype=object), "chi2": pd.Series(dtype=float),
                         "df": pd.Series(dtype=float), "p": pd.Series(dtype=float),
                         "detectable_effect": pd.Series(dtype=float), "detectable_method": pd.Series(dtype=object),
                         **{name: pd.Series(dtype=float) for name in DIRECTION_COLUMNS}})


def consistency_outcomes(responses: pd.DataFrame, baseline: str, axes: Sequence[str] = ()) -> tuple[pd.DataFrame,
                                                                                                   list[str]]:
    """Per non-baseline response, whether it gives the modal answer of its question's baseline repetitions.

    Args:
        responses: One row per observed response, columns :data:`RESPONSE_COLUMNS` (``category`` is the
            answer with UNKNOWN spelled out, :func:`prism.stats.basics.answer_categories`; ``run`` scopes the
            baseline to the run the response belongs to).
        baseline: The baseline condition.
        axes: Columns of ``responses`` holding each response's value of a grid axis, carried into the outcomes.

    Returns:
        (outcomes, notes): one row per modelled response with ``consistent`` (0/1), ``model``,
        ``condition``, ``family``, ``dataset``, ``dataset_type`` (the optional column of ``responses``, else
        ``objective``), ``cluster`` (dataset and question id) and the ``axes``
        columns; and sentences about the responses left out (baseline ties, no baseline response).
    """
    keys = ["run", "question_id"]
    base = responses[responses["condition"] == baseline]
    counts = base.groupby([*keys, "category"], sort=False).size().rename("count").reset_index()
    top = counts.groupby(keys, sort=False)["count"].transform("max")
    leaders = counts[counts["count"] == top]
    n_leaders = leaders.groupby(keys, sort=False)["category"].transform("size")
    modes = leaders[n_leaders == 1][[*keys, "category"]].rename(columns={"category": "mode"})
    tied = leaders[n_leaders > 1][keys].drop_duplicates()
    others = responses[responses["condition"] != baseline]
    merged = others.merge(modes, on=keys, how="left", indicator=True)
    notes = []
    if len(tied):
        left_out = int(others.merge(tied, on=keys).shape[0])
        notes.append(f"{len(tied)} question(s) left out ({left_out} responses): their baseline repetitions have no "
                     "single modal answer")
    no_base = others.merge(base[keys].drop_duplicates(), on=keys, how="left", indicator=True)
    missing = int((no_base["_merge"] == "left_only").sum())
    if missing:
        notes.append(f"{missing} response(s) left out: their question has no observed baseline response")
    kept = merged[merged["_merge"] == "both"]
    outcomes = pd.DataFrame({
        "consistent": (kept["category"] == kept["mode"]).astype(np.float64).to_numpy(),
        "model": kept["model"].astype(str).to_numpy(),
        "condition": kept["condition"].astype(str).to_numpy(),
        "family": kept["family"].astype(str).to_numpy(),
        "dataset": kept["dataset"].astype(str).to_numpy(),
        # Optional in ``responses``: a run without a recorded type is objective, as its dataset config says.
        "dataset_type": (kept["dataset_type"].astype(str).to_numpy() if "dataset_type" in kept
                         else np.full(len(kept), "objective", dtype=object)),
        "cluster": (kept["dataset"].astype(str) + "/" + kept["question_id"].astype(str)).to_numpy(),
        **{axis: kept[axis].astype(str).to_numpy() for axis in axes},
    })
    return outcomes, notes


def _separated_cells(outcomes: pd.DataFrame, terms: Sequence[str]) -> list[str]:
    """Cells of a fitted term's factors where every response is consistent, or none is.

    Every fitted term brings the indicator of each of its cells into the span of the design (with the terms
    below it, which the hierarchy always fits first), so a cell without variation lets that indicator's
    coefficient run off to infinity: perfect separation. The cells of the highest-order terms that have
    any are reported (a flat cell of a main effect makes every cell under it flat too).
    """
    for size in sorted({len(t.split(":")) for t in terms}, reverse=True):
        cells = []
        for term in (t for t in terms if len(t.split(":")) == size):
            factors = term.split(":")
            grouped = outcomes.groupby(factors, sort=False)["consistent"]
            summary = pd.DataFrame({"mean": grouped.mean(), "n": grouped.size()})
            for key, row in summary[(summary["mean"] == 0) | (summary["mean"] == 1)].iterrows():
                parts = key if isinstance(key, tuple) else (key,)
                where = ", ".join(f"{f}={v}" for f, v in zip(factors, parts, strict=True))
                state = "consistent" if row["mean"] == 1 else "inconsistent"
                cells.append(f"{where}: all {int(row['n'])} responses {state}")
        if cells:
            return list(dict.fromkeys(cells))
    return []


def fit_consistency_gee(outcomes: pd.DataFrame, notes: Sequence[str] = (), axes: Sequence[str] = (),
                        dataset_factors: Sequence[str] = ("dataset",)) -> GeeResult:
    """Fit the binomial GEE of consistency and test each effect with a global Wald chi-square.

    Args:
        outcomes: :func:`consistency_outcomes`' rows.
        notes: Sentences to carry into the result (e.g. responses left out).
        axes: A grid's axes (columns of ``outcomes``): they replace the condition term, with two-way
            interactions only.
        dataset_factors: The factors after the condition term (columns of ``outcomes``): ``dataset``, or
            ``dataset_type`` in its place, both, or none (a fit within one dataset); see :mod:`prism.stats.gee_fits`.

    Returns:
        The effects with chi2, df and p, or a result with ``fitted`` false and the reason in ``notes``.
    """
    families = list(dict.fromkeys(outcomes["family"])) if len(outcomes) else []
    condition_term = "axes" if axes else "family" if len(families) >= 2 else "condition"
    factors = ["model", *axes, *dataset_factors] if axes else ["model", condition_term, *dataset_factors]
    max_order = 2 if axes else 3
    result = GeeResult(_empty_effects(), notes=list(notes), condition_term=condition_term,
                       n_responses=len(outcomes), n_clusters=int(outcomes["cluster"].nunique()) if len(outcomes) else 0)
    if outcomes.empty:
        return _unfitted(result, "no non-baseline response with a baseline answer to compare with")
    X, terms, dropped, _ = sparse_design(outcomes, factors, max_order)
    result.dropped = dropped
    if not terms:
        return _unfitted(result, "no term varies in the selected runs (one model, one dataset, one condition): "
                                 "nothing to test")
    y = outcomes["consistent"].to_numpy(np.float64)
    if y.min() == y.max():
        state = "consistent" if y[0] == 1 else "inconsistent"
        return _untested(result, terms, f"no variation: all {y.size} responses are {state}", "no variation")
    separated = _separated_cells(outcomes, list(terms))
    if separated:
        reasons = {term: (f"perfect separation in its cells ({'; '.join(flat)})" if flat else
                          "perfect separation in another term's cells stopped the fit")
                   for term in terms for flat in [_flat_cells(outcomes, term)]}
        return _untested(result, terms, "perfect separation (the logit of a cell without variation is infinite): "
                         + "; ".join(separated), reasons)
    fitted = _fit(result, X, y, outcomes["cluster"].to_numpy(), terms)
    if fitted.failure is not None:
        return _untested(fitted, terms, fitted.failure, fitted.failure.split(" (", 1)[0].split(":", 1)[0])
    return fitted


def _untested(result: GeeResult, terms: Mapping[str, object], failure: str,
              reasons: str | Mapping[str, str]) -> GeeResult:
    """The unfitted result with every planned term listed first among the dropped, with why it was not tested.

    Every term the design holds keeps its row in ``gee_wald.csv`` (``dropped: <term> (not tested: ...)``), so
    a fit that separation stops still names each term it planned, not only the reason for the whole model.
    """
    result = _unfitted(result, failure)
    planned = [(term, "not tested: " + (reasons if isinstance(reasons, str) else reasons[term])) for term in terms]
    result.dropped = [*planned, *(row for row in result.dropped if row[0] not in terms)]
    return result


def _flat_cells(outcomes: pd.DataFrame, term: str) -> list[str]:
    """A term's cells whose responses are all consistent, or all inconsistent (``factor=level, ...``)."""
    factors = term.split(":")
    means = outcomes.groupby(factors, sort=False)["consistent"].mean()
    flat = means[(means == 0) | (means == 1)]
    return [", ".join(f"{f}={v}" for f, v in zip(factors, key if isinstance(key, tuple) else (key,), strict=True))
            for key in flat.index]


def _fit(result: GeeResult, X: NDArray[np.float64] | sparse.csr_matrix, y: NDArray[np.float64],
         clusters: NDArray[np.object_], terms: dict[str, list[int]]) -> GeeResult:
    """Fit the model and test each term.

    The fit is :func:`prism.stats.gee_sparse.fit_sparse_gee`: statsmodels' GEE on the sparse design.
    """
    codes = pd.factorize(clusters)[0]
    n_clusters = int(codes.max()) + 1
    start: NDArray[np.float64] | str | None = glm_start(X, y)
    if start is None:  # statsmodels' own start: the GLM by IRLS (it warns when it meets separation)
        start = _statsmodels_glm_start(X, y)
    if isinstance(start, str):
        return _unfitted(result, f"the estimating equations did not converge ({start})")
    try:
        with np.errstate(over="ignore"):  # exp of a large linear predictor is 0 or 1 in the probabilities
            fit = fit_sparse_gee(X, y, codes, start)
    except (np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
        return _unfitted(result, f"the estimating equations could not be solved ({type(exc).__name__}: {exc})")
    fitted, params, cov, naive = fit.fitted, fit.params, fit.cov, fit.cov_naive
    if not (np.isfinite(params).all() and np.isfinite(cov).all()):
        return _unfitted(result, "the estimates or their covariance are not finite")
    if fitted.min() < _BOUNDARY or fitted.max() > 1 - _BOUNDARY:
        return _unfitted(result, "fitted probabilities at 0 or 1 (quasi-complete separation)")
    rows = []
    moved = MovedCoefficient(X, y, codes, fit)
    for label, index in terms.items():
        block = cov[np.ix_(index, index)]
        scale = float(np.diag(naive)[index].max())
        if not np.linalg.eigvalsh(block).min() > _SINGULAR * scale:
            return _unfitted(result, f"the cluster-robust covariance of the {label} coefficients is singular: the "
                                     "question clusters (nearly) all gave the same responses, so there is no "
                                     "between-question variation to estimate it from")
        # The Wald statistic statsmodels' wald_test gives for the contrast selecting the term's coefficients.
        estimate = params[index]
        chi2 = float(estimate @ np.linalg.solve(block, estimate))
        try:
            p = wald_p(chi2, len(index), n_clusters)
        except ValueError as exc:
            result.dropped.append((label, f"too few question clusters to test it: {exc}"))
            continue
        def precision(j: int, d: float, index: list[int] = index) -> float:
            return moved.precision(index, index[j], d)

        drop, rise = wald_detectable_directions(block, n_clusters, precision)
        rows.append((label, chi2, float(len(index)), p, *larger_move(drop, rise), drop, rise))
    result.effects = pd.DataFrame(rows, columns=[*WALD_COLUMNS, *DIRECTION_COLUMNS])
    return result


def _statsmodels_glm_start(X: NDArray[np.float64] | sparse.csr_matrix, y: NDArray[np.float64]) -> (
        NDArray[np.float64] | str):
    """Statsmodels' GLM estimates (the GEE's default start), or the warning that stopped them."""
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_linear_model import GLM
    from statsmodels.tools.sm_exceptions import ConvergenceWarning, PerfectSeparationWarning

    dense = np.asarray(X.toarray() if sparse.issparse(X) else X, dtype=np.float64)  # type: ignore[union-attr]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            params = np.asarray(GLM(y, dense, family=Binomial()).fit().params, dtype=np.float64)
        except (np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
            return f"{type(exc).__name__}: {exc}"
    problems = [w for w in caught if issubclass(w.category, ConvergenceWarning | PerfectSeparationWarning)]
    return str(problems[0].message) if problems else params


def glm_start(X: NDArray[np.float64] | sparse.csr_matrix, y: NDArray[np.float64],
              max_iter: int = 100) -> NDArray[np.float64] | None:
    """The binomial GLM's estimates (logit link), from the counts of each distinct row of ``X``.

    statsmodels starts a GEE from the independence GLM, fitted by iteratively reweighted least squares on
    every response: with a column per model and per model x condition, that fit grows with the square of
    the runs and was most of the comparison's GEE time. The GLM's likelihood depends on the responses only
    through each covariate pattern's count and successes, so the same estimates come from Newton's method on
    those few patterns. None (statsmodels then fits its own GLM) when Newton does not converge.

    Args:
        X: The design (full column rank, as :func:`design` builds it).
        y: The 0/1 outcomes.
        max_iter: Newton steps before giving up.
    """
    patterns, inverse = _patterns(X)
    n = np.bincount(inverse.ravel()).astype(np.float64)
    successes = np.bincount(inverse.ravel(), weights=y)
    beta = np.zeros(X.shape[1])
    for _ in range(max_iter):
        mu = 1.0 / (1.0 + np.exp(-(patterns @ beta)))
        weight = n * mu * (1.0 - mu)
        try:
            step = np.linalg.solve(patterns.T @ (weight[:, None] * patterns), patterns.T @ (successes - n * mu))
        except np.linalg.LinAlgError:
            return None
        beta = beta + step
        if not np.isfinite(beta).all():
            return None
        if np.abs(step).max() < 1e-10:
            return beta
    return None


def _patterns(X: NDArray[np.float64] | sparse.csr_matrix) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """The distinct rows of ``X`` (dense) and each row's index among them."""
    if sparse.issparse(X):
        X = sparse.csr_matrix(X)
        # 0/1 indicators: a row packed into bits is its pattern; packed a block of rows at a time, never all dense.
        step = max(1, 2**22 // max(X.shape[1], 1))
        keys = np.concatenate([np.packbits(X[i:i + step].toarray().astype(bool), axis=1)
                               for i in range(0, X.shape[0], step)]) if X.shape[0] else np.zeros((0, 1), np.uint8)
        if not bool(np.isin(X.data, (0.0, 1.0)).all()):
            keys = np.ascontiguousarray(X.toarray())
        rows = keys.view(np.dtype((np.void, keys.dtype.itemsize * keys.shape[1]))).ravel()
        _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
        return np.asarray(X[first].toarray(), dtype=np.float64), inverse.ravel()
    # The design's columns are 0/1 indicators: a row packed into bits is its pattern, 64 times shorter to sort.
    binary = bool(((X == 0.0) | (X == 1.0)).all())
    keys = np.packbits(X.astype(bool), axis=1) if binary else np.ascontiguousarray(X)
    rows = keys.view(np.dtype((np.void, keys.dtype.itemsize * keys.shape[1]))).ravel()
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    return X[first], inverse.ravel()


def wald_p(chi2: float, df: int, clusters: int) -> float:
    """The p-value of a cluster-robust Wald statistic from Hotelling's T-squared reference.

    ``chi2 * (clusters - df) / (df * (clusters - 1))`` is referred to F(df, clusters - df): the statistic is
    taken as Hotelling's T-squared with ``clusters - 1`` degrees of freedom for its covariance, which is
    estimated from ``clusters`` independent clusters. (Pustejovsky and Tipton's HTA and HTZ tests, in R's
    clubSandwich, use the same reference with those degrees of freedom estimated instead.) As ``clusters``
    grows it tends to chi-square(df).

    Raises:
        ValueError: If ``clusters <= df``: the covariance of ``df`` coefficients estimated from that few
            clusters has no reference distribution.
    """
    from scipy.stats import f

    if clusters <= df:
        raise ValueError(f"{df} coefficients need more than {df} question clusters for a test; there are {clusters}")
    return float(f.sf(chi2 * (clusters - df) / (df * (clusters - 1)), df, clusters - df))


def _unfitted(result: GeeResult, reason: str) -> GeeResult:
    log.warning("the clustered model of consistency (GEE) was not fitted: %s", reason)
    result.failure = reason
    result.effects = _empty_effects()
    return result
