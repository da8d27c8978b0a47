"""prism.stats.gee: the consistency outcome by hand, the design's dropped terms, and the GEE on synthetic data.

Synthetic data: questions with a random intercept u ~ N(0, 1) on the logit of consistency (so responses of
one question are correlated, which is what the clustering is for), base logit 1.5, and a planted
condition effect on one condition (or none).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from prism.stats import gee, gee_design

COLUMNS = list(gee.RESPONSE_COLUMNS)


def synthetic(effect: float, seed: int, n: int = 30, reps: int = 5, model: str = "m", dataset: str = "arc",
              conditions: tuple[str, ...] = ("P1", "P2", "P3", "P4"), families: dict[str, str] | None = None,
              run: str = "run1") -> pd.DataFrame:
    """Responses: the baseline always answers A; condition P4 (if present) lowers the logit by ``effect``."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(n):
        u = rng.normal(0.0, 1.0)
        rows += [(run, model, dataset, f"q{q}", "P0", "baseline", "A")] * reps
        for condition in conditions:
            eta = 1.5 + u - (effect if condition == "P4" else 0.0)
            for _ in range(reps):
                answer = "A" if rng.random() < 1 / (1 + np.exp(-eta)) else "B"
                rows.append((run, model, dataset, f"q{q}", condition, (families or {}).get(condition, "instruction"),
                             answer))
    return pd.DataFrame(rows, columns=COLUMNS)


def fit(frame: pd.DataFrame) -> gee.GeeResult:
    outcomes, notes = gee.consistency_outcomes(frame, "P0")
    return gee.fit_consistency_gee(outcomes, notes)


def test_outcome_is_agreement_with_the_modal_baseline_answer_and_ties_are_left_out() -> None:
    rows = [
        # q1: baseline A, A, UNKNOWN -> mode A.
        *[("r", "m", "d", "q1", "P0", "baseline", c) for c in ("A", "A", "UNKNOWN")],
        ("r", "m", "d", "q1", "P1", "f", "A"), ("r", "m", "d", "q1", "P1", "f", "UNKNOWN"),
        # q2: baseline UNKNOWN twice, B once -> mode UNKNOWN: an UNKNOWN response is consistent.
        *[("r", "m", "d", "q2", "P0", "baseline", c) for c in ("UNKNOWN", "UNKNOWN", "B")],
        ("r", "m", "d", "q2", "P1", "f", "UNKNOWN"), ("r", "m", "d", "q2", "P1", "f", "B"),
        # q3: baseline A, B -> a tie: no reference answer, its response is left out.
        *[("r", "m", "d", "q3", "P0", "baseline", c) for c in ("A", "B")],
        ("r", "m", "d", "q3", "P1", "f", "A"),
        # q4: no baseline response at all.
        ("r", "m", "d", "q4", "P1", "f", "A"),
        # Another run of the same question: its own baseline (B) is the reference, not run r's.
        ("s", "m2", "d", "q1", "P0", "baseline", "B"), ("s", "m2", "d", "q1", "P1", "f", "B"),
    ]
    outcomes, notes = gee.consistency_outcomes(pd.DataFrame(rows, columns=COLUMNS), "P0")
    assert outcomes["consistent"].tolist() == [1.0, 0.0, 1.0, 0.0, 1.0]
    assert outcomes["cluster"].tolist() == ["d/q1", "d/q1", "d/q2", "d/q2", "d/q1"]
    assert notes == ["1 question(s) left out (1 responses): their baseline repetitions have no single modal answer",
                     "1 response(s) left out: their question has no observed baseline response"]


def test_planted_condition_effect_is_found() -> None:
    # P4's logit 1.0 lower (consistency about 0.78 -> 0.62, 150 responses per condition in 30 clusters): with
    # the F(3, 27) reference the 3-df test rejects at 5% in 18 of 20 seeded data sets (median p 2e-4; the two
    # others at 0.052 and 0.054), so at least 8 of these 10 must reject and most by far.
    p = []
    for seed in range(10):
        result = fit(synthetic(1.0, seed))
        assert result.fitted and result.condition_term == "condition"
        (row,) = result.effects.itertuples(index=False)
        assert (row.effect, row.df) == ("condition", 3.0)
        p.append(row.p)
    assert sum(v < 0.05 for v in p) >= 8 and sorted(p)[4] < 1e-3, p


def test_null_condition_effect_is_not_found_more_often_than_nominal() -> None:
    # No effect: over 40 seeded data sets the Wald test rejects at 5% in at most 4 (10%, the binomial 95%
    # bound for 40 tests of size 0.05 is 5 of 40; the bias-reduced covariance keeps 30 clusters honest).
    p = [fit(synthetic(0.0, 100 + seed)).effects["p"].iloc[0] for seed in range(40)]
    assert sum(v < 0.05 for v in p) <= 4, sorted(p)[:6]


def test_one_model_and_one_dataset_leave_the_condition_term_and_list_the_dropped_ones() -> None:
    result = fit(synthetic(1.0, 0))
    assert [term for term, _ in result.dropped] == ["model", "dataset", "model:condition", "model:dataset",
                                                    "condition:dataset", "model:condition:dataset"]
    assert dict(result.dropped)["dataset"] == "one level in the selected runs: arc"
    table = result.table()
    assert list(table.columns) == list(gee.WALD_COLUMNS)
    assert table["effect"].tolist()[:2] == ["condition", "dropped: model (one level in the selected runs: m)"]
    assert table["chi2"].iloc[1:].isna().all()


def test_families_replace_conditions_when_they_vary_and_models_interact() -> None:
    families = {"P1": "instruction", "P2": "instruction", "P3": "option_order", "P4": "option_order"}
    frame = pd.concat([synthetic(1.0, 1, families=families),
                       synthetic(0.0, 2, model="m2", run="run2", families=families)], ignore_index=True)
    result = fit(frame)
    assert result.fitted and result.condition_term == "family"
    assert result.effects["effect"].tolist() == ["model", "family", "model:family"]
    assert result.effects["df"].tolist() == [1.0, 1.0, 1.0]
    assert [t for t, _ in result.dropped] == ["dataset", "model:dataset", "family:dataset", "model:family:dataset"]


def test_confounded_terms_are_dropped_as_not_estimable() -> None:
    # Each model on its own dataset: dataset adds nothing once model is in.
    frame = pd.concat([synthetic(0.5, 3, dataset="arc"), synthetic(0.5, 4, model="m2", dataset="sciq", run="r2")],
                      ignore_index=True)
    result = fit(frame)
    reasons = dict(result.dropped)
    assert reasons["dataset"].startswith("not estimable") and reasons["model:dataset"].startswith("not estimable")
    assert result.effects["effect"].tolist() == ["model", "condition", "model:condition"]


def test_separation_and_no_variation_are_reported_not_fitted(caplog: pytest.LogCaptureFixture) -> None:
    frame = synthetic(0.0, 5)
    frame.loc[frame["condition"] == "P2", "category"] = "A"  # every P2 response consistent
    with caplog.at_level(logging.WARNING, logger="prism.stats.gee"):
        result = fit(frame)
    assert not result.fitted and result.effects.empty
    assert result.failure is not None and "perfect separation" in result.failure
    assert "condition=P2: all 150 responses consistent" in result.failure
    assert "was not fitted" in caplog.text
    assert result.table()["effect"].iloc[-1].startswith("not fitted: perfect separation")

    constant = synthetic(0.0, 6)
    constant["category"] = "A"
    assert fit(constant).failure == "no variation: all 600 responses are consistent"
    only_one = synthetic(0.0, 7, conditions=("P1",))
    assert "no term varies" in (fit(only_one).failure or "")
    assert "no non-baseline response" in (fit(synthetic(0.0, 8, conditions=())).failure or "")


def test_identical_question_clusters_give_a_singular_sandwich_and_no_numbers() -> None:
    # Every question gives the same responses: each cluster's score is the same, they sum to zero, so the
    # cluster-robust covariance is zero up to rounding and a Wald statistic would be 1e30 or negative.
    rows = []
    for q in range(8):
        rows += [("r", "m", "d", f"q{q}", "P0", "baseline", c) for c in "AAAAB"]
        rows += [("r", "m", "d", f"q{q}", c, "f", a) for c, answers in (("P1", "ABAAA"), ("P2", "BBABB"))
                 for a in answers]
    result = fit(pd.DataFrame(rows, columns=COLUMNS))
    assert not result.fitted and "cluster-robust covariance of the condition coefficients is singular" in (
        result.failure or "")


def test_wald_p_is_hotellings_reference_and_refuses_too_few_clusters() -> None:
    from scipy.stats import chi2, t

    # One coefficient: F(1, G - 1) of W = t^2 is the two-sided t test on G - 1 degrees of freedom.
    assert gee.wald_p(4.0, 1, 30) == pytest.approx(2 * t.sf(2.0, 29))
    # Many clusters: the chi-square reference it corrects.
    assert gee.wald_p(25.0, 15, 10**7) == pytest.approx(chi2.sf(25.0, 15), rel=1e-3)
    # Few clusters: the same statistic is far weaker evidence than chi-square says.
    assert gee.wald_p(30.0, 15, 30) > 10 * chi2.sf(30.0, 15)
    with pytest.raises(ValueError, match="15 coefficients need more than 15 question clusters for a test; there "
                                         "are 15"):
        gee.wald_p(30.0, 15, 15)


def _design_by_stacking(outcomes: pd.DataFrame, factors: list[str], max_order: int) -> tuple[np.ndarray, list[str]]:
    """The design as first written: each candidate checked on the Gram matrix of a stacked copy of the kept columns."""
    from itertools import combinations

    varying = [f for f in factors if outcomes[f].nunique() >= 2]
    coded = {f: gee_design._dummies(outcomes[f]) for f in varying}
    columns, names = [np.ones(len(outcomes))], ["intercept"]
    for size in range(1, min(len(varying), max_order) + 1):
        for term in combinations(varying, size):
            candidates = [("", np.ones(len(outcomes)))]
            for f in term:
                levels, block = coded[f]
                candidates = [(f"{p}{':' if p else ''}{f}={lv}", c * block[:, k]) for p, c in candidates
                              for k, lv in enumerate(levels)]
            for name, column in candidates:
                trial = np.column_stack([*columns, column])
                if column.any() and np.linalg.matrix_rank(trial.T @ trial) == trial.shape[1]:
                    columns.append(column)
                    names.append(name)
    return np.column_stack(columns), names


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_design_keeps_exactly_the_columns_a_stacked_rank_check_keeps(seed: int) -> None:
    """The bordered Gram matrix decides like the full one, confounded and empty cells included."""
    rng = np.random.default_rng(seed)
    n = 600
    model = rng.choice([f"m{i}" for i in range(7)], n)
    # Each model ran on one dataset of three (confounds model:dataset), one condition never meets m0.
    dataset = np.array([f"d{int(m[1:]) % 3}" for m in model])
    condition = rng.choice(["P1", "P2", "P3", "P4"], n)
    condition[(model == "m0") & (condition == "P4")] = "P3"
    outcomes = pd.DataFrame({"model": model, "condition": condition, "dataset": dataset})
    X, terms, _, names = gee_design.design(outcomes, ["model", "condition", "dataset"], 3)
    expected, expected_names = _design_by_stacking(outcomes, ["model", "condition", "dataset"], 3)
    assert names == expected_names
    assert np.array_equal(X, expected)
    assert sum(len(v) for v in terms.values()) == X.shape[1] - 1


def test_the_glm_start_is_statsmodels_glm_and_the_fit_does_not_move() -> None:
    # The GEE starts from the independence GLM fitted on each covariate pattern's counts instead of on
    # every response: the same estimates, so the GEE converges to what statsmodels' own start gives.
    from statsmodels.genmod.cov_struct import Exchangeable
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_estimating_equations import GEE
    from statsmodels.genmod.generalized_linear_model import GLM

    frames = [synthetic(0.8, seed=s, model=f"m{s}", run=f"r{s}") for s in range(3)]
    outcomes, _ = gee.consistency_outcomes(pd.concat(frames, ignore_index=True), "P0")
    X, terms, _, _ = gee_design.design(outcomes, ["model", "condition", "dataset"])
    y = outcomes["consistent"].to_numpy(np.float64)
    start = gee.glm_start(X, y)
    assert start is not None
    np.testing.assert_allclose(start, GLM(y, X, family=Binomial()).fit().params, rtol=0, atol=1e-7)
    groups = pd.factorize(outcomes["cluster"])[0]
    own = GEE(y, X, groups=groups, family=Binomial(), cov_struct=Exchangeable()).fit(cov_type="bias_reduced")
    ours = gee.fit_consistency_gee(outcomes)
    for label, index in terms.items():
        contrast = np.zeros((len(index), X.shape[1]))
        contrast[np.arange(len(index)), index] = 1.0
        expected = float(own.wald_test(contrast, scalar=True).statistic)
        assert ours.effects.set_index("effect").loc[label, "chi2"] == pytest.approx(expected, rel=1e-5)


def test_the_glm_start_gives_up_where_newton_cannot_converge() -> None:
    # A separated pattern (all its responses consistent) has an infinite logit: no start, statsmodels decides.
    X = np.column_stack([np.ones(6), [0, 0, 0, 1, 1, 1]]).astype(np.float64)
    assert gee.glm_start(X, np.array([0.0, 1.0, 0.0, 1.0, 1.0, 1.0])) is None


def test_a_separated_grid_still_lists_every_planned_term_with_why_it_was_not_tested() -> None:
    # Three questions of a labels x option_order grid: some cells have every response consistent, so the
    # fit stops; each planned term (model, both axes, their interactions) keeps a row saying why.
    rows = []
    for model in ("m0", "m1"):
        for q in range(3):
            rows.append(("r" + model, model, "arc", f"q{q}", "base|base", "grid", "A", "base", "base"))
            for label in ("base", "upper", "number"):
                for order in ("base", "reversed"):
                    if label == order == "base":
                        continue
                    answer = "B" if (label == "number" and q != 1) or (order == "reversed" and q == 2) else "A"
                    rows.append(("r" + model, model, "arc", f"q{q}", f"{label}|{order}", "grid", answer, label,
                                 order))
    frame = pd.DataFrame(rows, columns=[*COLUMNS, "labels", "option_order"])
    outcomes, notes = gee.consistency_outcomes(frame, "base|base", ["labels", "option_order"])
    result = gee.fit_consistency_gee(outcomes, notes, ["labels", "option_order"])
    assert result.failure is not None and result.failure.startswith("perfect separation")
    table = result.table()
    planned = ["model", "labels", "option_order", "model:labels", "model:option_order", "labels:option_order"]
    listed = [e.split(" (", 1)[0].removeprefix("dropped: ") for e in table["effect"] if "not tested" in e]
    assert listed == planned
    assert table["chi2"].isna().all()
    assert "dropped: labels:option_order (not tested: perfect separation in its cells (labels=upper, " \
           "option_order=base))" in set(table["effect"])
    assert "dropped: model (not tested: perfect separation in another term's cells stopped the fit)" in set(
        table["effect"])
    assert table["effect"].iloc[-1].startswith("not fitted: perfect separation")


def test_a_term_near_the_ceiling_needs_a_larger_rise_than_the_fitted_information_says(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Consistency about 0.93: a cell moved up loses information (mu (1 - mu) falls), so the rise found with 80%
    # power is larger than the first version's figure (the information as fitted), the drop smaller, and the
    # reported figure is the larger of the two.
    from prism.stats import power

    rng = np.random.default_rng(11)
    rows = []
    for q in range(200):
        u = rng.normal(0.0, 0.5)
        rows += [("run1", "m", "arc", f"q{q}", "P0", "baseline", "A")] * 3
        for condition in ("P1", "P2", "P3"):
            rows += [("run1", "m", "arc", f"q{q}", condition, "instruction",
                      "A" if rng.random() < 1 / (1 + np.exp(-(2.5 + u))) else "B") for _ in range(3)]
    first: list[float] = []
    real = gee.wald_detectable_directions

    def record(cov: np.ndarray, clusters: int, precision: Callable[[int, float], float]) -> tuple[float, float]:
        first.append(power.wald_detectable(cov, clusters))
        return real(cov, clusters, precision)

    monkeypatch.setattr(gee, "wald_detectable_directions", record)
    result = fit(pd.DataFrame(rows, columns=COLUMNS))
    row = result.effects.set_index("effect").loc["condition"]
    assert row["detectable_drop"] < first[0] < row["detectable_rise"]
    assert row["detectable_effect"] == row["detectable_rise"] > 1.2 * first[0]
    assert row["detectable_method"] == power.ANALYTIC_WALD
    assert result.table().set_index("effect").loc["condition", "detectable_effect"] == row["detectable_effect"]
