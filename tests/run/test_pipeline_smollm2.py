"""The real embedded model end to end: SmolLM2 through llama.cpp, a real MLflow store, Hydra composition.

Kept to a few dozen prompts in all (about half a second each here).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO_ROOT, compose_config, run_overrides

from prism.run.pipeline import run
from prism.run.usage import is_usage_metric

pytestmark = pytest.mark.model


def test_smollm2_run_rerun_from_store_without_loading_the_model(workdir: Path, data_dir: Path, monkeypatch) -> None:
    import mlflow

    cfg = compose_config([*run_overrides(workdir, data_dir), "dataset.n=2"])
    first = run(cfg, output_dir=workdir / "one")
    assert (first.n_fresh, first.n_cached) == (10, 0)
    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    logged = client.get_run(first.run_id)
    assert logged.info.status == "FINISHED"
    assert logged.data.params["model.name"] == "smollm2"
    assert logged.data.tags["prism.model_digest"] == (
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"  # sha256 of the shipped GGUF
    )
    assert logged.data.metrics["n_responses"] == 10
    records = [json.loads(line) for line in (first.output_dir / "responses/responses.jsonl").open()]
    assert all(isinstance(r["response"], str) and r["completion_tokens"] > 0 for r in records)

    # The rerun must not touch the model: make loading it an error.
    from prism.backends import llamacpp

    def no_model(self):
        raise AssertionError("the model was loaded although every cell is stored")

    monkeypatch.setattr(llamacpp.LlamaCppBackend, "_model", no_model)
    second = run(cfg, output_dir=workdir / "two")
    assert (second.n_fresh, second.n_cached) == (0, 10)
    again = [json.loads(line) for line in (second.output_dir / "responses/responses.jsonl").open()]
    assert {(r["question_id"], r["condition"]): r["response"] for r in again} == {
        (r["question_id"], r["condition"]): r["response"] for r in records
    }
    assert all(r["cached"] for r in again)
    # What the first run asked, the second got from the store: the same tokens, counted as the store's.
    assert second.metrics["tokens_prompt"] == 0 < first.metrics["tokens_prompt"]
    assert second.metrics["tokens_from_store_prompt"] == first.metrics["tokens_prompt"]
    results = {k: v for k, v in first.metrics.items() if not is_usage_metric(k)}
    assert {k: v for k, v in second.metrics.items() if not is_usage_metric(k)} == pytest.approx(results, nan_ok=True)


def test_sigkilled_run_resumes_without_redoing_or_losing_a_completion(workdir: Path, data_dir: Path) -> None:
    import mlflow

    args = [sys.executable, "-m", "prism", *run_overrides(workdir, data_dir), "dataset.n=3"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    killed_log = workdir / "killed" / "responses" / "responses.jsonl"
    proc = subprocess.Popen([*args, f"hydra.run.dir={workdir}/killed"], cwd=workdir, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if killed_log.exists() and len(killed_log.read_text().splitlines()) >= 4:
            break
        assert proc.poll() is None, "the run ended before it could be killed"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = [json.loads(line) for line in killed_log.read_text().splitlines() if line.endswith("}")]
    assert 4 <= len(before) < 15

    done = subprocess.run([*args, f"hydra.run.dir={workdir}/resumed"], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    after = [json.loads(line) for line in (workdir / "resumed/responses/responses.jsonl").open()]
    cells = [(r["question_id"], r["condition"], r["repetition"]) for r in after]
    assert len(cells) == len(set(cells)) == 15, "every cell exactly once"
    cached = {(r["question_id"], r["condition"], r["repetition"]): r for r in after if r["cached"]}
    for r in before:  # every completion of the killed run is reused as it was, not asked again
        assert cached[(r["question_id"], r["condition"], r["repetition"])]["response"] == r["response"]

    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    runs = client.search_runs(client.get_experiment_by_name("prism").experiment_id)
    by_status = {r.info.status: r for r in runs}
    assert set(by_status) == {"RUNNING", "FINISHED"}  # SIGKILL leaves the first run RUNNING
    assert by_status["FINISHED"].data.tags["prism.resumed_from"] == by_status["RUNNING"].info.run_id


def test_cli_help_and_cfg_job_do_not_import_heavy_modules() -> None:
    probe = (
        "import runpy, sys\n"
        "sys.argv = ['prism', sys.argv[1]]\n"
        "try:\n    runpy.run_module('prism', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('mlflow', 'llama_cpp', 'datasets', 'ollama', 'openai') if m in sys.modules]\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    for flag in ("--help", "--cfg=job"):
        out = subprocess.run([sys.executable, "-c", probe, flag], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=60)
        assert "HEAVY []" in out.stderr, (flag, out.stderr[-1000:])
