"""``python -m prism`` as a person types it: sweeps, bad input, the printed summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT, run_overrides

from prism.questions import freeze_question_set


def replay_file(workdir: Path, data_dir: Path, n: int, answer: str = "B") -> Path:
    frozen = freeze_question_set("arc_challenge", "test", n, 0, data_dir, workdir / "frozen")
    path = workdir / f"replay-{answer}.jsonl"
    lines = [json.dumps({"question_id": q.question_id, "condition": c, "response": answer})
             for q in frozen.questions for c in ("P0", "P1", "P2", "P3", "P4")]
    path.write_text("\n".join(lines) + "\n")
    return path


def prism(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "prism", *args], cwd=workdir, capture_output=True, text=True,
                          timeout=300)


def test_multirun_sweep_gives_one_mlflow_run_per_job_tagged_with_the_sweep(workdir: Path, data_dir: Path) -> None:
    import mlflow

    replay = replay_file(workdir, data_dir, 3)
    done = prism(workdir, "-m", *run_overrides(workdir, data_dir), "model=replay", f"model.path={replay}",
                 "model.name=alpha,beta", "dataset.n=2,3", f"hydra.sweep.dir={workdir}/multirun")
    assert done.returncode == 0, done.stderr[-3000:]
    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    runs = client.search_runs(client.get_experiment_by_name("prism").experiment_id)
    assert len(runs) == 4
    assert {(r.data.params["model.name"], r.data.params["dataset.n"]) for r in runs} == {
        ("alpha", "2"), ("alpha", "3"), ("beta", "2"), ("beta", "3")}
    assert {r.data.tags["prism.sweep"] for r in runs} == {f"{workdir}/multirun"}
    assert {r.data.tags["prism.kind"] for r in runs} == {"run"}
    assert {r.info.run_name for r in runs} >= {"alpha-arc_challenge-prism-seed0", "beta-arc_challenge-prism-seed0"}


def test_cli_prints_the_summary_and_how_to_open_the_run(workdir: Path, data_dir: Path) -> None:
    replay = replay_file(workdir, data_dir, 2)
    done = prism(workdir, *run_overrides(workdir, data_dir), "model=replay", f"model.path={replay}",
                 "model.name=alpha", "dataset.n=2", f"hydra.run.dir={workdir}/run")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "P4" in done.stdout and "question majority accuracy" in done.stdout
    assert f"mlflow ui --backend-store-uri sqlite:///{workdir}/mlflow.db" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["model=nope"], "Could not find 'model/nope'"),
        (["dataset.nn=3"], "Key 'nn' not in 'DatasetConfig'"),
        (["dataset.n=abc"], "Value 'abc' of type 'str' could not be converted to Integer"),
        (["dataset.n=0"], "cannot draw n=0 questions"),
        (["dataset.n=100000"], "cannot draw n=100000 questions"),
        (["model=replay"], "the replay backend needs a file: model=replay model.path=FILE"),
        (["model.path=/no/such/model.gguf"], "model.path '/no/such/model.gguf' does not exist"),
    ],
)
def test_bad_input_is_one_clear_error_without_a_traceback(workdir: Path, data_dir: Path, args, message) -> None:
    done = prism(workdir, *run_overrides(workdir, data_dir), *args, f"hydra.run.dir={workdir}/run")
    assert done.returncode != 0
    assert message in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_help_lists_the_config_groups() -> None:
    done = subprocess.run([sys.executable, "-m", "prism", "--help"], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0
    groups = ("model: anthropic, gemini_example, gemma2, gemma3_270m, llama3, mistral, openai, openrouter_example, "
              "qwen2_5, replay, smollm2, vllm_example",
              "dataset: arc_challenge, commonsense_qa, custom, mmlu, mmlu_pro, openbookqa, opinions_qa, "
              "political_compass, sciq, wvs7")
    for line in groups:
        assert line in done.stdout
