"""prism.stats.gee_sparse against statsmodels: the same estimates, covariances and Wald statistics to 1e-6.

Every fit the clustered model makes on the designs the GEE tests use (a sweep of models, condition families,
a grid's axes with their two-way interaction, dataset and dataset-type fits, the refit after separation)
is recorded as it is made, then fitted again by statsmodels' ``GEE`` (binomial, exchangeable,
``cov_type="bias_reduced"``) on the dense design from the same start: statsmodels stays the reference.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from prism.stats import gee, gee_fits, gee_sparse

RESPONSE = ["run", "model", "dataset", "dataset_type", "question_id", "condition", "family", "category"]


def responses(seed: int, models: int = 3, n: int = 30, datasets: dict[str, str] | None = None,
              families: dict[str, str] | None = None, effect: float = 0.8) -> pd.DataFrame:
    """Question clusters with a random intercept; P4 lowers the logit by ``effect``; the baseline answers A."""
    rng = np.random.default_rng(seed)
    families = families or {"P1": "instruction", "P2": "instruction", "P3": "instruction", "P4": "instruction"}
    rows = []
    for dataset, kind in (datasets or {"arc": "objective"}).items():
        for m in range(models):
            for q in range(n):
                u = rng.normal(0.0, 1.0)
                run = f"m{m}-{dataset}"
                rows += [(run, f"m{m}", dataset, kind, f"q{q}", "P0", "baseline", "A")] * 2
                for condition, family in families.items():
                    eta = 1.2 + u + 0.3 * m - (effect if condition == "P4" else 0.0) - (0.5 if kind == "subjective"
                                                                                        else 0.0)
                    for _ in range(2):
                        answer = "A" if rng.random() < 1 / (1 + np.exp(-eta)) else "B"
                        rows.append((run, f"m{m}", dataset, kind, f"q{q}", condition, family, answer))
    return pd.DataFrame(rows, columns=RESPONSE)


def grid(seed: int) -> tuple[pd.DataFrame, list[str]]:
    """A labels x option_order grid: every cell its own condition, the baseline cell the reference."""
    rng = np.random.default_rng(seed)
    labels, orders = ["base", "upper", "number"], ["base", "reversed", "shuffled"]
    rows = []
    for m in range(2):
        for q in range(40):
            u = rng.normal(0.0, 1.0)
            rows.append((f"r{m}", f"m{m}", "arc", "objective", f"q{q}", "base|base", "grid", "A", "base", "base"))
            for label in labels:
                for order in orders:
                    if label == order == "base":
                        continue
                    eta = 1.5 + u - 0.4 * (label == "number") - 0.6 * (order == "shuffled") - 0.5 * (
                        label == "upper" and order == "reversed")
                    answer = "A" if rng.random() < 1 / (1 + np.exp(-eta)) else "B"
                    rows.append((f"r{m}", f"m{m}", "arc", "objective", f"q{q}", f"{label}|{order}", "grid", answer,
                                 label, order))
    return pd.DataFrame(rows, columns=[*RESPONSE, "labels", "option_order"]), ["labels", "option_order"]


def recorded_fits(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Run every design through the clustered model, recording each sparse fit's inputs and result."""
    calls: list[tuple[Any, ...]] = []
    real = gee_sparse.fit_sparse_gee

    def record(X: Any, y: Any, clusters: Any, start: Any) -> gee_sparse.SparseGeeFit:
        result = real(X, y, clusters, start)
        calls.append((X, y, clusters, start, result))
        return result

    monkeypatch.setattr(gee, "fit_sparse_gee", record)
    families = {"P1": "option_order", "P2": "option_order", "P3": "labels", "P4": "labels"}
    both = {"arc": "objective", "compass": "subjective"}
    # A sweep (condition term), families, dataset and dataset-type fits, and within each dataset.
    for frame in (responses(0), responses(1, families=families), responses(2, models=2, datasets=both,
                                                                            families=families)):
        outcomes, notes = gee.consistency_outcomes(frame, "P0")
        gee_fits.fit_all(outcomes, notes)
        gee_fits.by_dataset(outcomes)
    # Separation: a family whose every response on the subjective dataset keeps the baseline's answer.
    frame = responses(3, models=2, datasets=both, families=families)
    logical = frame[frame["condition"] == "P4"].assign(condition="P5", family="logical")
    logical.loc[logical["dataset_type"] == "subjective", "category"] = "A"
    outcomes, notes = gee.consistency_outcomes(pd.concat([frame, logical], ignore_index=True), "P0")
    table = gee_fits.fit_all(outcomes, notes)
    assert "dataset without separated" in set(table["fit"])
    # A grid's axes with their two-way interaction.
    frame, axes = grid(4)
    outcomes, notes = gee.consistency_outcomes(frame, "base|base", axes)
    gee.fit_consistency_gee(outcomes, notes, axes)
    return calls


def test_every_fit_agrees_with_statsmodels(monkeypatch: pytest.MonkeyPatch) -> None:
    from statsmodels.genmod.cov_struct import Exchangeable
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_estimating_equations import GEE

    calls = recorded_fits(monkeypatch)
    assert len(calls) >= 10
    widths = set()
    for X, y, clusters, start, ours in calls:
        dense = X.toarray()
        widths.add(dense.shape[1])
        own = GEE(y, dense, groups=clusters, family=Binomial(), cov_struct=Exchangeable()).fit(
            cov_type="bias_reduced", start_params=start)
        np.testing.assert_allclose(ours.params, own.params, rtol=0, atol=1e-6)
        np.testing.assert_allclose(ours.cov, own.cov_params(), rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(ours.cov_naive, own.cov_naive, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(ours.fitted, own.fittedvalues, rtol=0, atol=1e-8)
        assert ours.dep == pytest.approx(float(own.cov_struct.dep_params), abs=1e-8)
        # Each single-coefficient and whole-design Wald statistic, as wald_test gives it.
        for index in ([1], list(range(1, dense.shape[1]))):
            contrast = np.zeros((len(index), dense.shape[1]))
            contrast[np.arange(len(index)), index] = 1.0
            block = ours.cov[np.ix_(index, index)]
            mine = float(ours.params[index] @ np.linalg.solve(block, ours.params[index]))
            assert mine == pytest.approx(float(own.wald_test(contrast, scalar=True).statistic), rel=1e-6)
    assert len(widths) >= 4, "the designs differ in their columns"


def test_the_hotelling_reference_is_applied_to_the_same_statistic() -> None:
    frame = responses(5)
    outcomes, notes = gee.consistency_outcomes(frame, "P0")
    result = gee.fit_consistency_gee(outcomes, notes)
    row = result.effects.set_index("effect").loc["condition"]
    assert row["p"] == pytest.approx(gee.wald_p(row["chi2"], int(row["df"]), result.n_clusters), rel=1e-12)


def test_the_moved_precision_is_the_sandwich_recomputed_at_the_moved_estimates(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # MovedCoefficient updates B, U and the cluster scores from the moved rows alone; recomputing the whole
    # sandwich at beta + d e_j on pseudo-responses y' = mu' + s' e (whose Pearson residuals are the fit's e)
    # must give the same precision. At d = 0 it is statsmodels' plain (robust) sandwich.
    from statsmodels.genmod.cov_struct import Exchangeable
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_estimating_equations import GEE

    calls = recorded_fits(monkeypatch)
    for X, y, clusters, start, ours in (calls[0], calls[-1]):  # a sweep with models, and the grid
        moved = gee_sparse.MovedCoefficient(X, y, clusters, ours)
        p = X.shape[1]
        own = GEE(y, X.toarray(), groups=clusters, family=Binomial(), cov_struct=Exchangeable()).fit(
            cov_type="robust", start_params=start)
        for index in ([1, 2], list(range(p - 3, p))):
            j = index[-1]
            plain = np.linalg.inv(np.asarray(own.cov_robust)[np.ix_(index, index)])[index.index(j), index.index(j)]
            assert moved.precision(index, j, 0.0) == pytest.approx(plain, rel=1e-5)
            for d in (-1.0, 0.7):
                beta = ours.params.copy()
                beta[j] += d
                model = gee_sparse._Model(X, y, clusters)
                mu, var = model.means(ours.params)
                residuals = (y - mu) / np.sqrt(var)
                mu_d, var_d = model.means(beta)
                model.y = mu_d + np.sqrt(var_d) * residuals
                bmat, G, _, _, _ = model.pieces(beta, ours.dep)
                bread = np.linalg.inv(bmat)
                block = (bread @ G.T @ G @ bread)[np.ix_(index, index)]
                direct = np.linalg.inv(block)[index.index(j), index.index(j)]
                assert moved.precision(index, j, d) == pytest.approx(direct, rel=1e-8)
                assert moved.precision(index, j, d) != pytest.approx(plain, rel=1e-3)  # the move changed it
