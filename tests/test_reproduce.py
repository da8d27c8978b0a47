"""Reproducing logged runs: a real SmolLM2 run comes out identical; a tampered config does not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from conftest import compose_config, run_overrides

from prism.config import ReproduceConfig, TrackingConfig
from prism.questions import freeze_question_set
from prism.reproduce import diff_cells, diff_metrics, format_outcome, reproduce
from prism.run.pipeline import run


def record(qid: str, condition: str, response: str | None, error: str | None = None, rep: int = 0) -> dict:
    return {"question_id": qid, "condition": condition, "repetition": rep, "response": response, "error": error}


def test_diff_cells_classifies_every_cell() -> None:
    a = [record("q1", "P0", "A"), record("q1", "P1", "B"), record("q2", "P0", None, "timeout"), record("q3", "P0", "C")]
    b = [record("q1", "P0", "A"), record("q1", "P1", "C"), record("q2", "P0", "D"), record("q4", "P0", "A")]
    cells = diff_cells(a, b).set_index(["question_id", "condition"])["status"].to_dict()
    assert cells == {("q1", "P0"): "identical", ("q1", "P1"): "different", ("q2", "P0"): "different",
                     ("q3", "P0"): "missing", ("q4", "P0"): "extra"}


def test_the_same_answer_to_other_turns_is_not_a_reproduced_cell() -> None:
    asked = {**record("q1", "system_generic", "A"), "prompt_sha256": "turns-as-logged"}
    other = {**record("q1", "system_generic", "A"), "prompt_sha256": "turns-asked-again-otherwise"}
    assert diff_cells([asked], [asked])["status"].tolist() == ["identical"]
    assert diff_cells([asked], [other])["status"].tolist() == ["different"]


def test_diff_metrics_treats_nan_as_equal_and_tolerates_float_noise() -> None:
    table = diff_metrics({"a": 0.5, "b": float("nan"), "c": 1.0}, {"a": 0.5 + 1e-15, "b": float("nan"), "d": 2.0})
    assert table.set_index("metric")["same"].to_dict() == {"a": True, "b": True, "c": False, "d": False}


@pytest.mark.model
def test_reproduction_of_a_real_smollm2_run_is_identical_and_tagged(workdir: Path, data_dir: Path) -> None:
    import mlflow

    original = run(compose_config([*run_overrides(workdir, data_dir), "dataset.n=5"]), output_dir=workdir / "one")
    uri = f"sqlite:///{workdir}/mlflow.db"
    outcome = reproduce(ReproduceConfig(run_id=original.run_id, tracking=TrackingConfig(uri=uri)),
                        output_dir=workdir / "again")
    assert outcome.identical, format_outcome(outcome, original.run_id)
    assert len(outcome.cells) == 25 and outcome.n_different == 0
    assert all(check.same for check in outcome.checks if check.item != "prism.git_commit")
    client = mlflow.tracking.MlflowClient(uri)
    tags = client.get_run(outcome.run_id).data.tags
    assert tags["prism.kind"] == "reproduction" and tags["prism.reproduces"] == original.run_id
    assert tags["prism.reproduction.identical"] == "true"
    assert {a.path for a in client.list_artifacts(outcome.run_id, "reproduction")} >= {
        "reproduction/cells.csv", "reproduction/verdict.json"}
    # The store was bypassed: every response of the reproduction is fresh.
    again = [json.loads(line) for line in (workdir / "again/responses/responses.jsonl").open()]
    assert not any(r["cached"] for r in again)


def test_tampered_config_reproduces_different_cells_and_says_which(workdir: Path, data_dir: Path) -> None:
    # A replay model that can answer the questions of both seeds, so the only change is the sample.
    questions = [q for seed in (0, 1) for q in freeze_question_set("arc_challenge", "test", 3, seed, data_dir,
                                                                   workdir / "frozen").questions]
    replay = workdir / "replay.jsonl"
    replay.write_text("".join(json.dumps({"question_id": q.question_id, "condition": c, "response": "A"}) + "\n"
                              for q in {q.question_id: q for q in questions}.values()
                              for c in ("P0", "P1", "P2", "P3", "P4")))
    overrides = [*run_overrides(workdir, data_dir), "model=replay", f"model.path={replay}", "model.name=scripted",
                 "dataset.n=3"]
    original = run(compose_config(overrides), output_dir=workdir / "one")
    uri = f"sqlite:///{workdir}/mlflow.db"
    import mlflow

    artifacts = Path(urlparse(mlflow.tracking.MlflowClient(uri).get_run(original.run_id).info.artifact_uri).path)
    logged = artifacts / "config" / "resolved.yaml"
    cfg = yaml.safe_load(logged.read_text())
    cfg["seed"] = cfg["dataset"]["sample_seed"] = 1
    logged.write_text(yaml.safe_dump(cfg))

    # Through the CLI, as a colleague would: exit 1 and a report naming the cells.
    done = subprocess.run([sys.executable, "-m", "prism.reproduce", original.run_id, f"tracking.uri={uri}",
                           f"hydra.run.dir={workdir}/again"], cwd=workdir, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "DIFFERENT:" in done.stdout and "prism.question_set_sha256" in done.stdout
    cells = (workdir / "again" / "reproduction" / "cells.csv").read_text()
    first_sample = freeze_question_set("arc_challenge", "test", 3, 0, data_dir, workdir / "frozen").questions
    for q in first_sample:
        if q.question_id not in {x.question_id for x in questions[3:]}:
            assert f"{q.question_id},P0,0,missing" in cells
            assert f"{q.question_id}," in done.stdout or "missing" in done.stdout


def test_unknown_run_id_is_a_clear_error(workdir: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "prism.reproduce", "0123456789abcdef0123456789abcdef",
                           f"tracking.uri=sqlite:///{workdir}/mlflow.db", f"hydra.run.dir={workdir}/x"],
                          cwd=workdir, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "cannot read run '0123456789abcdef0123456789abcdef'" in done.stderr
    assert "Traceback" not in done.stderr


def test_diff_cells_compares_cloze_log_likelihoods_to_one_in_a_million() -> None:
    def record(question: str, logprobs: dict | None, tokens: dict | None = None) -> dict:
        r = {"question_id": question, "condition": "C0", "repetition": 0, "response": "A", "error": None}
        if logprobs is not None:
            r.update(cloze_logprobs=logprobs, cloze_tokens=tokens or {"A": 1, "B": 2})
        return r

    original = [record(q, {"A": -1.5, "B": -3.0}) for q in ("q1", "q2", "q3", "q4")]
    again = [record("q1", {"A": -1.5 + 5e-7, "B": -3.0}), record("q2", {"A": -1.5, "B": -3.0 + 1e-4}),
             record("q3", None), record("q4", {"A": -1.5, "B": -3.0}, {"A": 1, "B": 3})]
    cells = diff_cells(original, again).set_index("question_id")
    assert cells["status"].to_dict() == {"q1": "identical", "q2": "different", "q3": "different", "q4": "different"}
    assert cells.loc["q2", "cloze_max_diff"] == pytest.approx(1e-4)
    assert "cloze_max_diff" not in diff_cells([record("q1", None)], [record("q1", None)]).columns


def test_diff_cells_compares_label_probabilities_to_one_in_a_million() -> None:
    def record(question: str, probs: dict | None, mass: float | None = 0.5) -> dict:
        r = {"question_id": question, "condition": "P0", "repetition": 0, "response": "A", "error": None}
        if probs is not None:
            r.update(label_probs=probs, label_mass=mass)
        return r

    original = [record("q1", {"A": 0.6, "B": 0.4}), record("q2", {"A": 0.6, "B": 0.4}),
                record("q3", {"A": 0.6, "B": 0.4}), record("q4", {"A": 0.6, "B": 0.4})]
    again = [record("q1", {"A": 0.6 + 4e-7, "B": 0.4 - 4e-7}), record("q2", {"A": 0.6 + 1e-5, "B": 0.4 - 1e-5}),
             record("q3", None), record("q4", {"A": 0.6, "B": 0.4}, mass=0.5 + 1e-3)]
    cells = diff_cells(original, again).set_index("question_id")
    assert cells["status"].to_dict() == {"q1": "identical", "q2": "different", "q3": "different", "q4": "different"}
    assert cells.loc["q2", "label_probs_max_diff"] == pytest.approx(1e-5)
    assert cells.loc["q3", "label_probs_max_diff"] == float("inf")
    # Runs without probabilities keep the table they had.
    assert "label_probs_max_diff" not in diff_cells([record("q1", None)], [record("q1", None)]).columns
