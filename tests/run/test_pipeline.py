"""The whole pipeline on exact replay scenarios: every logged metric is computed by hand here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import compose_config, run_overrides

from prism.questions import freeze_question_set
from prism.run.pipeline import run

CONDITIONS = ["P0", "P1", "P2", "P3", "P4"]


def wrong(answer: str) -> str:
    return "A" if answer != "A" else "B"


def scenario(data_dir: Path, workdir: Path) -> tuple[list[dict], list[str]]:
    """Four questions whose every metric is known (see the comments)."""
    frozen = freeze_question_set("arc_challenge", "test", 4, 0, data_dir, workdir / "frozen")
    q1, q2, q3, q4 = frozen.questions
    lines = []

    def add(q, responses):
        for condition, response in zip(CONDITIONS, responses, strict=True):
            line = {"question_id": q.question_id, "condition": condition}
            if isinstance(response, tuple):  # (text, why generation stopped)
                response, line["finish_reason"] = response
            line.update({"error": "connection reset"} if response is None else {"response": response})
            lines.append(line)

    # q1: the key five times, as bare letters: unanimous, correct, compliant.
    add(q1, [q1.answer] * 5)
    # q2: the same wrong option five times, wrapped: prompt-invariant incorrect, not compliant.
    add(q2, [f"**{wrong(q2.answer)}**"] * 5)
    # q3: four statements of the key and one leading wrong label: agreement 4/5, majority correct.
    add(q3, [f"The answer is {q3.answer}"] * 4 + [f"{wrong(q3.answer)}. something\n"])
    # q4: two UNKNOWN (one cut at the output limit), the key, a wrong one, and a failed request: agreement
    # 1/2, tie, incomplete.
    add(q4, [("I am not sure that", "length"), "", q4.answer, f"({wrong(q4.answer)})", None])
    return lines, [q.question_id for q in frozen.questions]


EXPECTED = {
    "n_questions": 4,
    "n_responses": 19,  # 20 cells, one failed request
    "accuracy": 10 / 19,  # q1 5 + q3 4 + q4 1
    "conditional_accuracy": 10 / 17,  # recovered: 5 + 5 + 5 + 2
    "answer_recovery_rate": 17 / 19,
    "unknown_rate": 2 / 19,
    "instruction_compliance_rate": 6 / 19,  # q1's five bare letters and q4's
    "question_majority_accuracy": 2 / 4,  # q1, q3
    "mean_agreement": (1 + 1 + 0.8 + 0.5) / 4,
    "mean_prompt_sensitivity": 1 - (1 + 1 + 0.8 + 0.5) / 4,
    "answer_unanimous_rate": 2 / 4,  # q1, q2
    "prompt_invariant_incorrect_rate": 1 / 4,  # q2
    "complete_questions": 3,  # q4 has a failed cell
    "accuracy/P0": 2 / 3,  # q1, q3 right; q2 wrong; q4 UNKNOWN  -> 2 of 4 observed
    "accuracy/P4": 1 / 3,  # q1 right, q2 and q3 wrong, q4 failed -> 1 of 3 observed
    "answer_recovery_rate/P1": 3 / 4,
    # Consistency with P0 (family "instruction" in prism.yaml): q1 4/4, q2 4/4, q3 3/4, q4 1/3 (P1 UNKNOWN like
    # P0; P2, P3 answer; P4 failed).
    "consistency/instruction": (1 + 1 + 3 / 4 + 1 / 3) / 4,
    "consistency/instruction/P1": 4 / 4,
    "consistency/instruction/P4": 2 / 3,
    # Which parser rule read each of the 19 observed responses.
    "parse_method/exact": 6 / 19,  # q1's five and q4's bare letter
    "parse_method/bare": 6 / 19,  # q2's five "**X**" and q4's "(X)"
    "parse_method/statement": 4 / 19,
    "parse_method/leading": 1 / 19,
    "parse_method/truncated": 1 / 19,  # "I am not sure that", cut at the output limit
    "parse_method/empty": 1 / 19,
    "parse_method/none": 0.0,
}
EXPECTED["accuracy/P0"] = 2 / 4


@pytest.fixture
def replay_run(data_dir: Path, workdir: Path):
    lines, ids = scenario(data_dir, workdir)
    replay = workdir / "scenario.jsonl"
    replay.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    overrides = [*run_overrides(workdir, data_dir), "model=replay", f"model.path={replay}",
                 "model.name=scripted", "dataset.n=4"]
    return overrides, ids


def test_replay_scenario_metrics_in_mlflow_equal_the_hand_computed_values(replay_run, workdir: Path) -> None:
    import mlflow

    overrides, _ = replay_run
    result = run(compose_config(overrides), output_dir=workdir / "out")
    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    logged = client.get_run(result.run_id).data.metrics
    for name, value in EXPECTED.items():
        assert logged[name] == pytest.approx(value), name
    assert client.get_run(result.run_id).info.status == "FINISHED"
    # Why generation stopped is kept in the raw record, left out where the backend did not say.
    raw = [json.loads(line) for line in (workdir / "out" / "responses" / "responses.jsonl").read_text().splitlines()]
    assert sorted(str(r.get("finish_reason")) for r in raw) == ["None"] * 19 + ["length"]


def test_run_logs_design_params_tags_and_artifacts(replay_run, workdir: Path) -> None:
    import mlflow

    overrides, _ = replay_run
    result = run(compose_config(overrides), output_dir=workdir / "out")
    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    data = client.get_run(result.run_id).data
    for key in ("model.name", "dataset.name", "dataset.n", "generation.temperature", "parser_version",
                "scorer_version", "protocol_version", "conditions.template_version"):
        assert key in data.params, key
    assert data.params["model.name"] == "scripted" and data.params["dataset.n"] == "4"
    for tag in ("prism.model_digest", "prism.question_set_sha256", "prism.dataset_version", "prism.git_commit",
                "prism.version"):
        assert data.tags[tag], tag
    assert data.tags["prism.kind"] == "run"
    artifacts = set()
    for top in client.list_artifacts(result.run_id):
        artifacts |= {a.path for a in client.list_artifacts(result.run_id, top.path)}
    for path in ("config/resolved.yaml", "questions/frozen.jsonl", "responses/responses.jsonl",
                 "results/scored.jsonl", "results/question_metrics.csv", "results/condition_metrics.csv",
                 "prompts/prism.yaml"):
        assert path in artifacts, path
    run_info = client.get_run(result.run_id)
    assert run_info.inputs.dataset_inputs, "the frozen set is logged as an MLflow dataset input"


def test_failed_request_is_recorded_as_evidence_but_not_observed(replay_run, workdir: Path) -> None:
    overrides, ids = replay_run
    result = run(compose_config(overrides), output_dir=workdir / "out")
    raw = [json.loads(line) for line in (result.output_dir / "responses" / "responses.jsonl").open()]
    failed = [r for r in raw if r["error"]]
    assert len(raw) == 20 and len(failed) == 1
    assert failed[0]["response"] is None and failed[0]["question_id"] == ids[3] and failed[0]["condition"] == "P4"
    scored = [json.loads(line) for line in (result.output_dir / "results" / "scored.jsonl").open()]
    assert {s["method"] for s in scored if s["error"]} == {"failed"}
    assert all("prompt" not in s for s in scored)


def test_rerun_is_served_from_the_store_and_failed_cells_are_asked_again(replay_run, workdir: Path) -> None:
    overrides, _ = replay_run
    first = run(compose_config(overrides), output_dir=workdir / "one")
    second = run(compose_config(overrides), output_dir=workdir / "two")
    assert (first.n_fresh, first.n_cached) == (20, 0)
    assert (second.n_fresh, second.n_cached) == (1, 19)  # only the failed request is retried
    assert second.metrics == pytest.approx(first.metrics, nan_ok=True)


def test_store_disabled_forces_fresh_inference(replay_run, workdir: Path) -> None:
    overrides, _ = replay_run
    run(compose_config(overrides), output_dir=workdir / "one")
    again = run(compose_config([*overrides, "store.enabled=false"]), output_dir=workdir / "two")
    assert again.n_cached == 0 and again.n_fresh == 20


def test_missing_replay_cell_fails_the_run_and_keeps_what_was_collected(replay_run, workdir: Path) -> None:
    import mlflow

    from prism.backends.base import BackendError

    overrides, _ = replay_run
    overrides = [o for o in overrides if not o.startswith("dataset.n=")] + ["dataset.n=5"]
    with pytest.raises(BackendError, match="has no response for question_id="):
        run(compose_config(overrides), output_dir=workdir / "out")
    raw = (workdir / "out" / "responses" / "responses.jsonl").read_text().splitlines()
    assert len(raw) == 4  # P0 of the four scripted questions came back before the fifth was missing
    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    (failed,) = client.search_runs(client.get_experiment_by_name("prism").experiment_id)
    assert failed.info.status == "FAILED"
    assert "responses" in {a.path for a in client.list_artifacts(failed.info.run_id)}
