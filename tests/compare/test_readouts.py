"""The read-outs of a comparison, on scripted replay runs whose effects were planted.

Three scripted models answer N ARC questions under the prism set (P0 the baseline, P1-P4 the instruction
axis), R repetitions each; every answer is the key or one fixed wrong option, drawn with a planted
probability of the key:

- alpha: P1 moves answers to the wrong option (an answer step); P2 keeps the answers and only adds words
  (a wording step); P3 and P4 are P0 again (no step).
- twin: alpha's behaviour, with noise of its own (another seed): it differs from alpha only by noise.
- other: mostly the wrong option under every condition: it differs from alpha beyond both models' noise.

The scorecard is recomputed here from the runs' own scored records with a hand-written bootstrap; the
planted steps are what the measures must find; the divergence beyond noise must separate other from twin.
A second comparison, of one-repetition runs, must say that there is no noise to subtract.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import compose_config, run_overrides

from compare.test_compare import compose_compare
from prism.compare.core import compare
from prism.compare.divergence_noise import NO_REPETITIONS as NOISE_NOTE
from prism.compare.divergence_noise import NOISE_COLUMNS
from prism.compare.measure_agreement import AGREEMENT_COLUMNS, KAPPA_UNDEFINED, NO_REPETITIONS, ONE_MEASURE
from prism.compare.scorecard import SCORECARD_COLUMNS
from prism.compare.terminal import format_comparison
from prism.questions import Question, freeze_question_set
from prism.run.pipeline import run

N, R, B, PERMUTATIONS = 16, 4, 300, 400
CONDITIONS = ("P0", "P1", "P2", "P3", "P4")
MEASURES = "measures=[answer,token_jaccard,edit_distance]"
WORDS = ". This option fits the question best."
# Probability of answering the key, per model and condition; the rest is the first wrong option.
KEY_RATE = {"alpha": {"P0": 0.8, "P1": 0.15, "P2": 0.8, "P3": 0.8, "P4": 0.8},
            "other": {c: 0.2 for c in CONDITIONS}}
KEY_RATE["twin"] = KEY_RATE["alpha"]
SEEDS = {"alpha": 1, "twin": 2, "other": 3}


def script(questions: list[Question], model: str, reps: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(SEEDS[model])
    lines = []
    for condition in CONDITIONS:
        for q in questions:
            wrong = next(label for label in q.labels if label != q.answer)
            for r in range(reps):
                label = q.answer if rng.random() < KEY_RATE[model][condition] else wrong
                text = label + WORDS if (model != "other" and condition == "P2") else label
                lines.append({"question_id": q.question_id, "condition": condition, "repetition": r,
                              "response": text})
    return lines


def make_runs(root: Path, data_dir: Path, reps: int, suffix: str) -> dict[str, Any]:
    questions = list(freeze_question_set("arc_challenge", "test", N, 0, data_dir, root / "frozen").questions)
    made = {}
    for model in ("alpha", "twin", "other"):
        path = root / f"{model}{suffix}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in script(questions, model, reps)), encoding="utf-8")
        cfg = compose_config([*run_overrides(root, data_dir), "model=replay", f"model.path={path}",
                              f"model.name={model}", f"dataset.n={N}", "generation=sampled",
                              f"generation.repetitions={reps}"])
        made[model] = run(cfg, output_dir=root / f"run-{model}{suffix}")
    return made


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("readouts")
    runs = make_runs(root, data_dir, R, "")
    ids = ",".join(runs[m].run_id for m in ("alpha", "twin", "other"))
    cfg = compose_compare([f"tracking.uri=sqlite:///{root}/mlflow.db", f"runs=[{ids}]", f"bootstrap={B}",
                           f"permutations={PERMUTATIONS}", MEASURES, "pairs=all", "seed=7"])
    return {"root": root, "runs": runs, "result": compare(cfg, output_dir=root / "cmp")}


def test_every_readout_is_a_csv_a_printed_table_and_a_report_section(scenario: dict[str, Any]) -> None:
    result = scenario["result"]
    names = {f.name for f in result.files}
    assert {"scorecard.csv", "sensitivity_axes.csv", "measure_agreement.csv", "divergence_noise.csv"} <= names
    out = result.output_dir / "comparison"
    assert list(pd.read_csv(out / "scorecard.csv").columns) == list(SCORECARD_COLUMNS)
    assert list(pd.read_csv(out / "measure_agreement.csv").columns) == list(AGREEMENT_COLUMNS)
    assert list(pd.read_csv(out / "divergence_noise.csv").columns) == list(NOISE_COLUMNS)
    text = format_comparison(result)
    for heading in ("Scorecard", "Axes ranked by their largest excess", "Do the measures find the same shifts",
                    "Divergence beyond noise"):
        assert heading in text, heading
    page = (out / "report.html").read_text(encoding="utf-8")
    for anchor in ('id="scorecard"', 'id="sensitivity-axes"', 'id="measure-agreement"', 'id="divergence-noise"'):
        assert anchor in page, anchor


def hand_interval(values: pd.Series, questions: pd.Series, n_boot: int, seed: int) -> tuple[float, float, float]:
    """The pooled rate and its 95% percentile interval, resampling questions, written out longhand."""
    order = list(dict.fromkeys(questions))
    num = np.asarray([values[questions == q].sum() for q in order], dtype=float)
    den = np.asarray([(questions == q).sum() for q in order], dtype=float)
    draws = np.random.default_rng(seed).integers(0, len(order), size=(n_boot, len(order)))
    rates = [num[d].sum() / den[d].sum() for d in draws]
    low, high = np.percentile(rates, [2.5, 97.5])
    return num.sum() / den.sum(), float(low), float(high)


def test_scorecard_intervals_match_an_independent_recomputation(scenario: dict[str, Any]) -> None:
    card = scenario["result"].tables.scorecard.set_index(["model", "condition", "metric"])
    for model in ("alpha", "other"):
        scored = pd.read_json(scenario["runs"][model].output_dir / "results" / "scored.jsonl", lines=True)
        for condition in ("P0", "P1"):
            cells = scored[scored["condition"] == condition].reset_index(drop=True)
            for metric, flag in (("accuracy", "correct"), ("recovery", "recovered")):
                expected = hand_interval(cells[flag].astype(float), cells["question_id"], B, 7)
                row = card.loc[(model, condition, metric)]
                assert (row["value"], row["ci_low"], row["ci_high"]) == pytest.approx(expected, abs=1e-12)
                assert row["n_cells"] == N * R and row["n_questions"] == N
        # Consistency with the baseline: the same question and repetition answered alike.
        base = scored[scored["condition"] == "P0"].set_index(["question_id", "repetition"])["answer"]
        p1 = scored[scored["condition"] == "P1"].reset_index(drop=True)
        same = pd.Series([float(base[(q, r)] == a) for q, r, a in zip(p1["question_id"], p1["repetition"],
                                                                     p1["answer"], strict=True)])
        expected = hand_interval(same, p1["question_id"], B, 7)
        row = card.loc[(model, "P1", "consistency")]
        assert (row["value"], row["ci_low"], row["ci_high"]) == pytest.approx(expected, abs=1e-12)
    assert ("alpha", "P0", "consistency") not in card.index  # the baseline is not consistent with itself by test
    assert card.loc[("alpha", "all", "accuracy"), "n_cells"] == N * R * len(CONDITIONS)


def test_measure_agreement_on_the_planted_steps_is_what_was_planted(scenario: dict[str, Any]) -> None:
    shifts = scenario["result"].tables.shifts
    alpha = shifts[shifts["model"] == "alpha"].pivot(index="to_condition", columns="measure", values="shift")
    # P1 changes the answers (and so the texts), P2 only the words, P3 and P4 nothing.
    assert alpha.to_dict("index") == {
        "P1": {"answer": True, "token_jaccard": True, "edit_distance": True},
        "P2": {"answer": False, "token_jaccard": True, "edit_distance": True},
        "P3": {"answer": False, "token_jaccard": False, "edit_distance": False},
        "P4": {"answer": False, "token_jaccard": False, "edit_distance": False}}
    table = scenario["result"].tables.measure_agreement
    table = table.set_index(["model", "measure_a", "measure_b"]).sort_index()
    answer_text = table.loc[("alpha", "answer", "token_jaccard")]
    assert answer_text[["steps", "both", "only_a", "only_b", "neither"]].tolist() == [4, 1, 0, 1, 2]
    assert answer_text["kappa"] == pytest.approx(0.5)  # p_o 3/4, p_e 1/2
    texts = table.loc[("alpha", "token_jaccard", "edit_distance")]
    assert texts[["both", "only_a", "only_b", "neither"]].tolist() == [2, 0, 0, 2] and texts["kappa"] == 1.0
    assert ("all", "answer", "edit_distance") in table.index  # pooled over the three models
    assert table.loc["alpha", "note"].fillna("").eq("").all()
    # other shifts nowhere under any measure: the verdicts agree, and kappa is undefined, which the note says.
    other = table.loc["other"]
    assert (other["neither"] == 4).all() and other["kappa"].isna().all() and other["note"].eq(KAPPA_UNDEFINED).all()


def test_divergence_beyond_noise_separates_a_different_model_from_a_noisy_twin(scenario: dict[str, Any]) -> None:
    table = scenario["result"].tables.divergence_noise
    answer = table[table["measure"] == "answer"].set_index(["model_a", "model_b", "condition"])
    different, twin = answer.loc[("alpha", "other", "P0")], answer.loc[("alpha", "twin", "P0")]
    assert different["excess_ci_low"] > 0 and bool(different["beyond_noise"])
    assert twin["excess_ci_low"] <= 0 <= twin["excess_ci_high"] and not bool(twin["beyond_noise"])
    for row in (different, twin):  # excess is between minus the mean of the two models' own noise
        assert row["excess"] == pytest.approx(row["between"] - (row["within_a"] + row["within_b"]) / 2)
        assert 0 < row["within_a"] < 1 and 0 < row["within_b"] < 1
    twins = answer.xs(("alpha", "twin"), level=["model_a", "model_b"])
    assert not twins["beyond_noise"].any()  # the same behaviour under every condition: never beyond noise


def test_axes_are_ranked_per_model_and_measure(scenario: dict[str, Any]) -> None:
    axes = scenario["result"].tables.sensitivity_axes
    alpha = axes[(axes["model"] == "alpha") & (axes["measure"] == "answer")]
    assert alpha[["rank", "axis", "n_steps", "n_shifts", "statistic", "to_condition"]].values.tolist() == [
        [1, "instruction", 4, 1, "excess", "P1"]]
    shifts = scenario["result"].tables.shifts.set_index(["model", "measure", "to_condition"])
    assert alpha["largest"].iloc[0] == shifts.loc[("alpha", "answer", "P1"), "excess"]


def test_runs_without_repetitions_say_there_is_no_noise_to_subtract(scenario: dict[str, Any],
                                                                   data_dir: Path) -> None:
    root = scenario["root"] / "single"
    runs = make_runs(root, data_dir, 1, "-single")
    ids = ",".join(runs[m].run_id for m in ("alpha", "other"))
    result = compare(compose_compare([f"tracking.uri=sqlite:///{root}/mlflow.db", f"runs=[{ids}]", "bootstrap=50",
                                      "permutations=50"]), output_dir=root / "cmp")
    noise = result.tables.divergence_noise
    assert len(noise) == len(CONDITIONS) and noise["excess"].isna().all() and noise["p"].isna().all()
    assert noise["between"].notna().all()
    assert noise["note"].tolist() == [NOISE_NOTE.format(who="alpha and other")] * len(CONDITIONS)
    agreement = result.tables.measure_agreement  # one measure: one row per model and the pooled one
    assert agreement[["model", "measure_a", "steps", "shifts_a"]].values.tolist() == [
        ["alpha", "answer", 4, 0], ["other", "answer", 4, 0], ["all", "answer", 8, 0]]
    assert all(ONE_MEASURE in note and NO_REPETITIONS in note for note in agreement["note"])
    assert math.isnan(agreement["kappa"].iloc[0])
    text = format_comparison(result)
    assert "no repetitions" in text


def test_a_grids_axes_are_ranked_by_their_own_steps_and_its_crossed_cells_left_out() -> None:
    from conftest import compose_plain

    from prism.compare.sensitivity_axes import AXES_COLUMNS, sensitivity_axes_table
    from prism.compare.tables import ModelCells
    from prism.conditions import condition_set_from_config

    grid = ["conditions=grid", "conditions.axes=[labels,option_order]", "~conditions.variants.lower",
            "~conditions.variants.symbols", "~conditions.variants.swap_ends", "~conditions.variants.shuffle"]
    cs = condition_set_from_config(compose_plain(grid)["conditions"])
    model = ModelCells("m", "run", tuple(cs.names), pd.DataFrame(), model="m", axis=cs.name, families=cs.families,
                       axes=cs.axes, grid=cs.grid, levels=cs.levels)
    planted = {"numbers": 0.1, "roman": 0.3, "reverse": 0.5, "rotate": -0.1}  # each axis value's excess
    rows = []
    for condition in cs.names[1:]:
        moved = dict(cs.levels[condition])
        off = [v for v in moved.values() if v in planted and v != "P0"]
        # A crossed cell gets the largest excess of all: it must still not count for either axis.
        excess = planted[off[0]] if len(off) == 1 else 0.9
        rows.append({"model": "m", "from_condition": cs.baseline, "to_condition": condition, "measure": "answer",
                     "between": excess + 0.1, "within": 0.1, "excess": excess, "excess_ci_low": excess - 0.1,
                     "excess_ci_high": excess + 0.1, "p_holm": 0.01, "shift": excess > 0.2})
    table = sensitivity_axes_table([model], pd.DataFrame(rows))
    assert list(table.columns) == list(AXES_COLUMNS)
    assert table[["rank", "axis", "largest", "n_steps", "n_shifts"]].values.tolist() == [
        [1, "option_order", 0.5, 2, 1], [2, "labels", 0.3, 2, 1]]
    assert {cs.levels[c]["option_order"] for c in table["to_condition"]} == {"reverse", "P0"}
    # Without repetitions the axes are ranked by the between, and the table says so.
    unrepeated = pd.DataFrame(rows).assign(within=math.nan, excess=math.nan, shift=False)
    ranked = sensitivity_axes_table([model], unrepeated)
    assert ranked["statistic"].unique().tolist() == ["between"] and ranked["largest"].tolist() == [0.6, 0.4]
