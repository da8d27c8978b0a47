"""prism.plan: seeded, small simulations with planted effects, and a plan from a real MLflow pilot run.

The large validation (hundreds of studies per point, the 5 x 5 grid) is in benchmarks/plan_power.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import compose, compose_config, fresh_mlflow, run_overrides

from prism.compare.tables import ModelCells
from prism.config import PlanConfig, to_schema
from prism.names import KIND_PLAN as KIND
from prism.plan.core import POWER_COLUMNS, PlanError, make_plan, plan, wilson
from prism.plan.simulate import (
    Grid,
    additive_logits,
    grid_cells,
    grid_from_cells,
    population_from_cells,
    shift_study,
    shift_target,
    stated_grid,
    stated_population,
)
from prism.questions import freeze_question_set
from prism.run.pipeline import run


def compose_plan(overrides: list[str]) -> PlanConfig:
    return to_schema(compose("plan", overrides), PlanConfig)


def test_the_planted_shift_has_the_stated_expected_excess() -> None:
    population = stated_population(0.6, 0.5, 4, ["C0", "C1"], questions=500)
    base = population.probs[:, 0]
    moved = shift_target(base, 0.08)
    assert 0.5 * ((base - moved) ** 2).sum(axis=1).mean() == pytest.approx(0.08)
    assert np.allclose(moved.sum(axis=1), 1.0)
    assert np.allclose(shift_target(base, 0.0), base)


def test_without_an_effect_the_shift_test_rejects_at_about_its_level() -> None:
    population = stated_population(0.6, 0.5, 4, ["C0", "C1"])
    rejected = sum(shift_study(population, 20, 3, 0.0, 0.05, 200, seed) for seed in range(120))
    assert rejected / 120 <= 0.05 + 3 * (0.05 * 0.95 / 120) ** 0.5


def test_power_rises_with_n_and_the_smallest_n_reaching_it_is_reported() -> None:
    cfg = compose_plan(["pilot=false", "effect.kind=shift", "effect.size=0.12", "n=[10,40]", "repetitions=[3]",
                        "simulations=40", "permutations=400", "rates.conditions=2"])
    result = make_plan(cfg)
    assert list(result.table.columns) == list(POWER_COLUMNS)
    low, high = result.table["power"].tolist()
    assert low < high and high >= 0.8
    assert result.recommended[3] == 40
    refined = result.refined[3]
    assert refined is not None and 10 < refined <= 40
    assert result.level == pytest.approx(0.05)  # a family of one step


def test_the_holm_family_lowers_the_level_and_the_power() -> None:
    common = ["pilot=false", "effect.size=0.06", "n=[30]", "simulations=40"]
    one = make_plan(compose_plan([*common, "rates.conditions=2"]))
    five = make_plan(compose_plan([*common, "rates.conditions=6"]))
    assert five.level == pytest.approx(0.01)
    assert five.table["power"].iloc[0] <= one.table["power"].iloc[0]


def test_an_accuracy_difference_and_a_grid_interaction_are_planned() -> None:
    accuracy = make_plan(compose_plan(["pilot=false", "effect.kind=accuracy", "effect.size=0.15", "n=[20,80]",
                                       "repetitions=[1]", "simulations=40"]))
    assert accuracy.table["power"].iloc[0] < accuracy.table["power"].iloc[1]
    grid = stated_grid([2, 3], 0.77, 0.5, 4)
    assert len(grid.cells) == 6 and next(iter(grid.cells)) == "a1.v0__a2.v0"
    interaction = make_plan(compose_plan(["pilot=false", "effect.kind=interaction", "effect.size=-1.5",
                                          "rates.grid=[2,3]", "rates.accuracy=0.77", "n=[40]", "simulations=12"]))
    assert interaction.table["power"].iloc[0] > 0.3


def test_bad_settings_are_refused_with_what_to_change() -> None:
    with pytest.raises(PlanError, match=r"effect\.kind must be one of"):
        make_plan(compose_plan(["pilot=false", "effect.kind=slope"]))
    with pytest.raises(PlanError, match="at least 2 repetitions"):
        make_plan(compose_plan(["pilot=false", "repetitions=[1]"]))
    with pytest.raises(PlanError, match="raise permutations"):
        make_plan(compose_plan(["pilot=false", "permutations=50", "rates.conditions=6"]))
    with pytest.raises(PlanError, match="not one of the others"):
        make_plan(compose_plan(["pilot=false", "effect.condition=P2"]))
    assert wilson(0, 10)[0] == 0.0


def test_a_pilots_distributions_are_read_per_question_and_condition() -> None:
    rows = [("q1", "P0", 0, "A"), ("q1", "P0", 1, "A"), ("q1", "P1", 0, "B"), ("q1", "P1", 1, "A"),
            ("q2", "P0", 0, "C"), ("q2", "P1", 0, "C")]
    cells = pd.DataFrame(rows, columns=["question_id", "condition", "repetition", "category"]).assign(
        correct_answer="A")
    population = population_from_cells(ModelCells("m", "r", ("P0", "P1"), cells), ["P0", "P1"])
    q1, q2 = population.probs
    assert q1[0, 0] > 0.8 and q1[1, 0] == pytest.approx(q1[1, 1])  # P1: one A, one B
    assert q2[0, 0] < 0.2  # q2 was answered C, not its key A
    assert np.allclose(population.probs.sum(axis=2), 1.0)


def test_plan_reads_a_pilot_from_mlflow_asks_no_model_and_logs_a_plan_run(tmp_path: Path, data_dir: Path,
                                                                        mlflow_template: Path) -> None:
    import mlflow

    fresh_mlflow(mlflow_template, tmp_path)
    frozen = freeze_question_set("arc_challenge", "test", 12, 0, data_dir, tmp_path / "frozen")
    lines: list[dict[str, Any]] = []
    for i, q in enumerate(frozen.questions):
        wrong = next(label for label in q.labels if label != q.answer)
        for condition in ("P0", "P1", "P2", "P3", "P4"):
            answer = wrong if (condition == "P2" and i % 2) else q.answer
            lines.append({"question_id": q.question_id, "condition": condition, "response": answer})
    script = tmp_path / "pilot.jsonl"
    script.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    cfg = compose_config([*run_overrides(tmp_path, data_dir), "model=replay", f"model.path={script}",
                          "model.name=pilot", "dataset.n=12"])
    pilot_id = run(cfg, output_dir=tmp_path / "run").run_id
    script.unlink()  # a plan asks no model: the scripted model is gone
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    settings = compose_plan([f"tracking.uri={uri}", f"runs=[{pilot_id}]", "effect.kind=accuracy",
                             "effect.condition=P2", "effect.size=0.2", "n=[12,48]", "repetitions=[1]",
                             "simulations=30"])
    result = plan(settings, output_dir=tmp_path / "plan")
    assert result.pilot_runs == (pilot_id,) and result.source == "pilot"
    logged = mlflow.tracking.MlflowClient(uri).get_run(result.run_id)
    assert logged.data.tags["prism.kind"] == KIND
    assert logged.data.metrics["power/r1/n48"] == pytest.approx(float(result.table["power"].iloc[1]))
    names = {f.path for f in mlflow.tracking.MlflowClient(uri).list_artifacts(result.run_id, "plan")}
    assert names == {"plan/power.csv", "plan/power.png", "plan/plan.json"}


def _grid_pilot(n: int, seed: int) -> tuple[Grid, ModelCells]:
    """A 3 x 3 grid with one weak row and a -1 interaction in one cell, and a pilot run of it."""
    truth = stated_grid([3, 3], 0.85, 0.5, 4)
    logits = dict(truth.logits)
    for cell in truth.cells:
        if cell.startswith("a1.v2"):
            logits[cell] -= 1.0  # a main effect of a1's last value
    truth = Grid(truth.axes, truth.cells, logits, truth.spread, truth.options)
    return truth, grid_cells(truth, n, 3, "a1.v1__a2.v1", -1.0, seed)


def test_a_grid_pilots_cells_and_questions_are_read_as_the_gee_reads_them() -> None:
    truth, _ = _grid_pilot(0, 4)
    grid = grid_from_cells(grid_cells(truth, 120, 3, "a1.v1__a2.v1", 0.0, 4), "a1.v0__a2.v0")
    assert list(grid.cells) == list(truth.cells) and grid.axes == truth.axes
    assert grid.cells["a1.v1__a2.v1"] == ("v1", "v1")
    assert grid.keep is not None and grid.keep.shape == (120, 9) and np.all(grid.keep[:, 0] == 1.0)
    # The pilot's main effect is kept, on the logit at the average question.
    for cell in list(truth.cells)[1:]:
        assert grid.logits[cell] == pytest.approx(truth.logits[cell], abs=0.45), cell
    assert 0.2 < grid.spread < 0.9  # the questions' intercepts (true spread 0.5)
    # A pilot's own interaction is not carried into the studies (it would be found as if planted): the cells'
    # logits are additive in the axes.
    _, pilot = _grid_pilot(120, 4)
    logit = grid_from_cells(pilot, "a1.v0__a2.v0").logits
    assert logit["a1.v1__a2.v1"] - logit["a1.v1__a2.v2"] - logit["a1.v2__a2.v1"] + logit["a1.v2__a2.v2"] == \
        pytest.approx(0.0, abs=1e-9)
    kept, seen = np.array([[3.0, 0.0], [3.0, 3.0]]), np.array([[3.0, 3.0], [3.0, 3.0]])
    a, u = additive_logits(kept, seen)
    assert np.all(np.isfinite(a)) and a[0] > a[1] and u[1] > u[0]  # a cell kept every time stays finite


def test_an_interaction_is_planned_from_a_grid_pilot_and_a_flat_pilot_is_refused() -> None:
    _, pilot = _grid_pilot(60, 5)
    cfg = compose_plan(["effect.kind=interaction", "effect.size=-2.0", "effect.condition=a1.v2__a2.v2",
                        "baseline=a1.v0__a2.v0", "n=[10,60]", "simulations=10", "seed=3"])
    result = make_plan(cfg, [pilot])
    assert result.source == "pilot" and result.pilot_runs == (pilot.run_id,)
    low, high = result.table["power"].tolist()
    assert low < high and high >= 0.8  # -2 logits in one cell of a 3 x 3 grid: 60 questions find it
    flat = ModelCells("m", "flat-run", pilot.conditions, pilot.cells)
    with pytest.raises(PlanError, match="is not a grid"):
        make_plan(cfg, [flat])
    with pytest.raises(PlanError, match="baseline 'P0' is not among"):
        make_plan(compose_plan(["effect.kind=interaction", "n=[10]", "simulations=10"]), [pilot])
