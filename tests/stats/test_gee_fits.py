"""prism.stats.gee_fits: the dataset and dataset-type fits, and the fit within each dataset, on synthetic responses.

Synthetic data: two models, an objective and a subjective dataset, two condition families; each question
has a random intercept u ~ N(0, 1) on the logit of consistency (base logit 1.5), and the subjective dataset's
logit is lower by a planted effect (or not).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from prism.stats import gee, gee_fits

FAMILIES = {"P1": "option_order", "P2": "option_order", "P3": "labels", "P4": "labels"}
DATASETS = {"arc": "objective", "compass": "subjective"}


def synthetic(effect: float, seed: int, n: int = 30, datasets: dict[str, str] | None = None) -> pd.DataFrame:
    """Responses of models m1 and m2: the baseline answers A, a condition gives A with the planted probability."""
    rng = np.random.default_rng(seed)
    rows = []
    for dataset, kind in (datasets or DATASETS).items():
        for model in ("m1", "m2"):
            for q in range(n):
                u = rng.normal(0.0, 1.0)
                run = f"{model}-{dataset}"
                rows.append((run, model, dataset, kind, f"q{q}", "P0", "baseline", "A"))
                for condition, family in FAMILIES.items():
                    eta = 1.5 + u - (effect if kind == "subjective" else 0.0)
                    answer = "A" if rng.random() < 1 / (1 + np.exp(-eta)) else "B"
                    rows.append((run, model, dataset, kind, f"q{q}", condition, family, answer))
    return pd.DataFrame(rows, columns=["run", "model", "dataset", "dataset_type", "question_id", "condition",
                                       "family", "category"])


def wald(frame: pd.DataFrame) -> pd.DataFrame:
    outcomes, notes = gee.consistency_outcomes(frame, "P0")
    return gee_fits.fit_all(outcomes, notes)


def p_of(table: pd.DataFrame, fit: str, effect: str) -> float:
    rows = table[(table["fit"] == fit) & (table["effect"] == effect)]
    assert len(rows) == 1, (fit, effect, table["effect"].tolist())
    return float(rows["p"].iloc[0])


def test_confounded_dataset_and_type_get_two_fits_each_with_every_planned_term() -> None:
    table = wald(synthetic(1.0, 0))
    assert list(table.columns) == list(gee_fits.FIT_COLUMNS)
    assert list(dict.fromkeys(table["fit"])) == ["dataset", "dataset_type"]
    for fit in ("dataset", "dataset_type"):
        rows = table[table["fit"] == fit]
        tested = rows.loc[rows["chi2"].notna(), "effect"].tolist()
        assert tested == ["model", "family", fit, "model:family", f"model:{fit}", f"family:{fit}",
                          f"model:family:{fit}"], (fit, rows["effect"].tolist())
    # One dataset per type: the two factors are the same split, so their tests are the same.
    assert p_of(table, "dataset", "dataset") == pytest.approx(p_of(table, "dataset_type", "dataset_type"))


def test_a_planted_dataset_type_effect_is_found_by_both_fits() -> None:
    # The subjective logit 1.5 lower (consistency about 0.82 -> 0.5 at u = 0), 60 question clusters per
    # dataset. Treatment coding: with the interactions in the model, the type's main effect is its effect at
    # the reference model and family (m1, option_order: 120 responses per dataset). 5 seeded data sets gave
    # p from 2e-9 to 0.002; each of 3 must reject at 1% in both fits.
    for seed in range(3):
        table = wald(synthetic(1.5, seed, n=60))
        assert p_of(table, "dataset", "dataset") < 0.01, seed
        assert p_of(table, "dataset_type", "dataset_type") < 0.01, seed


def test_no_dataset_type_effect_is_not_found_more_often_than_nominal() -> None:
    # No effect: 10 seeded data sets; at 5% a fair test rejects 0.5 of them on average (2 or more has
    # probability 0.09), so at most 2 may.
    p = [p_of(wald(synthetic(0.0, 50 + seed)), "dataset_type", "dataset_type") for seed in range(10)]
    assert sum(v < 0.05 for v in p) <= 2, sorted(p)


def test_one_dataset_type_gives_the_dataset_fit_alone_with_a_note() -> None:
    table = wald(synthetic(0.0, 1, datasets={"arc": "objective", "sciq": "objective"}))
    assert set(table["fit"]) == {"dataset"}
    assert "note: one dataset type in the selected runs (objective): no dataset_type fit" in table["effect"].tolist()


def test_a_type_that_varies_within_a_dataset_is_fitted_beside_it() -> None:
    frame = pd.concat([synthetic(0.5, 2, datasets={"arc": "objective", "pc": "subjective"}),
                       synthetic(0.5, 3, datasets={"arc": "subjective"}).assign(run=lambda f: f["run"] + "-s")],
                      ignore_index=True)
    outcomes, _ = gee.consistency_outcomes(frame, "P0")
    assert gee_fits.planned_fits(outcomes) == [("dataset+dataset_type", ("dataset_type", "dataset"))]


def test_within_each_dataset_the_condition_term_has_its_own_test() -> None:
    outcomes, _ = gee.consistency_outcomes(synthetic(1.0, 4), "P0")
    table = gee_fits.by_dataset(outcomes)
    assert list(table.columns) == list(gee_fits.BY_DATASET_COLUMNS)
    assert list(dict.fromkeys(table["dataset"])) == ["arc", "compass"]
    fitted = table[table["chi2"].notna()]
    assert fitted.groupby("dataset", sort=False)["effect"].apply(list).to_dict() == {
        "arc": ["model", "family", "model:family"], "compass": ["model", "family", "model:family"]}
    assert set(table.loc[table["dataset"] == "compass", "dataset_type"]) == {"subjective"}
    assert (table["n_clusters"] == 30).all() and (table["n_responses"] == 2 * 30 * 4).all()


def test_a_fit_stopped_by_separation_is_followed_by_one_without_the_separated_family() -> None:
    # Three families; on the subjective dataset every "logical" response keeps the baseline's answer (as SmolLM2's
    # rewordings did on Political Compass): that cell's logit is infinite, so the full fit cannot be made.
    frame = synthetic(1.0, 3)
    logical = frame[frame["condition"] == "P4"].assign(condition="P5", family="logical")
    logical.loc[logical["dataset_type"] == "subjective", "category"] = "A"
    table = wald(pd.concat([frame, logical], ignore_index=True))
    assert list(dict.fromkeys(table["fit"])) == ["dataset", "dataset without separated", "dataset_type",
                                                 "dataset_type without separated"]
    for fit in ("dataset", "dataset_type"):
        full = table[table["fit"] == fit]
        assert full["chi2"].isna().all()
        assert any(e.startswith("not fitted: perfect separation") and "family=logical" in e for e in full["effect"])
        refit = table[table["fit"] == f"{fit} without separated"]
        assert f"family:{fit}" in refit.loc[refit["chi2"].notna(), "effect"].tolist()
        assert any("refitted without the family levels logical" in e and "covers only option_order, labels" in e
                   for e in refit["effect"])
        # Without the separated family it is exactly the fit of the data that never had it.
    plain = wald(frame)
    for fit in ("dataset", "dataset_type"):
        assert p_of(table, f"{fit} without separated", f"family:{fit}") == pytest.approx(
            p_of(plain, fit, f"family:{fit}"))
    # A fit that separation does not stop gets no refit.
    assert "dataset without separated" not in set(plain["fit"])


def test_within_a_dataset_a_separated_family_is_left_out_of_a_refit_too() -> None:
    frame = synthetic(1.0, 4)
    logical = frame[frame["condition"] == "P4"].assign(condition="P5", family="logical")
    logical.loc[logical["dataset"] == "compass", "category"] = "A"
    outcomes, _ = gee.consistency_outcomes(pd.concat([frame, logical], ignore_index=True), "P0")
    table = gee_fits.by_dataset(outcomes)
    compass = table[table["dataset"] == "compass"]
    assert any(e.startswith("not fitted: perfect separation") for e in compass["effect"])
    assert compass.loc[compass["chi2"].notna(), "effect"].tolist()[:1] == ["model"]
    assert "family" in compass.loc[compass["chi2"].notna(), "effect"].tolist()
    assert any("refitted without the family levels logical" in e for e in compass["effect"])
    arc = table[table["dataset"] == "arc"]  # varies everywhere: fitted once, no refit
    assert not any("refitted" in e for e in arc["effect"]) and arc["chi2"].notna().any()
