"""``dry_run=true``: the plan of a run (cells, held by the store, requests left, tokens, cost) with nothing asked.

The model server is the Anthropic stand-in (``tests/backends/anthropic_server.py``) told to fail every request,
so a dry run that sent anything would be seen in its request log (it logs each request before answering).
"""

from __future__ import annotations

import json
import math
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from backends.anthropic_server import MODEL, AnthropicServer
from conftest import REPO_ROOT, compose_config, run_overrides

from prism.errors import ConfigError
from prism.run.dry_run import format_plan, plan_run
from prism.run.pipeline import run

pytest.importorskip("anthropic")
KEY_ENV = "PRISM_TEST_DRY_RUN_KEY"
FAIL_ALL = {"status": 500, "type": "api_error", "message": "a dry run must not ask"}


@pytest.fixture(scope="module")
def api_key() -> str:
    return f"sk-ant-dry-{secrets.token_hex(10)}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, api_key: str) -> Iterator[AnthropicServer]:
    with AnthropicServer(tmp_path_factory.mktemp("dry-anthropic"), api_key) as s:
        yield s


def command(server: AnthropicServer, workdir: Path, data_dir: Path, *extra: str) -> list[str]:
    return [*run_overrides(workdir, data_dir), "model=anthropic", f"model.name={MODEL}", f"model.base_url={server.url}",
            f"model.api_key_env={KEY_ENV}", "dataset.n=2", "model.pricing.input_per_mtok=3",
            "model.pricing.output_per_mtok=15", *extra]


def test_the_cli_dry_run_asks_nothing_makes_no_mlflow_run_and_says_the_count_is_unknown(
        server: AnthropicServer, workdir: Path, data_dir: Path, api_key: str) -> None:
    server.faults(fail_all=FAIL_ALL)
    before = len(server.requests())
    env = {"PATH": "/usr/bin:/bin", "HOME": str(workdir), KEY_ENV: api_key, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-m", "prism", "dry_run=true", f"hydra.run.dir={workdir}/hydra",
                           *command(server, workdir, data_dir)], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "nothing was sent to the model server and no MLflow run was made" in out
    assert "cells:                  10" in out and "requests left:          10" in out
    assert "unknown until the first request" in out and "characters / 4" in out and "at most $" in out
    assert len(server.requests()) == before  # not one request, not even the identity probe
    assert not (workdir / "mlflow.db").exists() and not (workdir / "store.sqlite").exists()
    assert api_key not in out + done.stderr


def test_after_a_run_the_dry_run_counts_what_the_store_holds_from_the_recorded_identity(
        server: AnthropicServer, workdir: Path, data_dir: Path, api_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, api_key)
    server.faults()
    first = run(compose_config(command(server, workdir, data_dir)), output_dir=workdir / "first")
    raw = [json.loads(line) for line in (first.output_dir / "responses" / "responses.jsonl").open()]
    server.faults(fail_all=FAIL_ALL)
    before = len(server.requests())
    plan = plan_run(compose_config([*command(server, workdir, data_dir), "generation.repetitions=2"]))
    assert len(server.requests()) == before
    assert (plan.cells, plan.held, plan.requests) == (20, 10, 10)  # repetition 0 is stored, repetition 1 is not
    assert plan.identity.startswith("recorded ") and plan.token_method == "chars/4"
    expected_tokens = sum(math.ceil(len(r["prompt"]) / 4) for r in raw)  # the same prompts, asked again
    max_tokens = raw[0]["generation"]["max_tokens"]
    assert plan.prompt_tokens == expected_tokens and plan.max_completion_tokens == 10 * max_tokens
    assert plan.cost_usd == pytest.approx((expected_tokens * 3 + 10 * max_tokens * 15) / 1e6)
    text = format_plan(plan)
    assert "held by the store:      10" in text and "in the store" in text
    # Nothing left to ask: the same config as the run.
    done = plan_run(compose_config(command(server, workdir, data_dir)))
    assert (done.held, done.requests, done.prompt_tokens) == (10, 0, 0) and done.cost_usd == 0
    server.faults()


def test_run_refuses_a_config_with_dry_run_set(server: AnthropicServer, workdir: Path, data_dir: Path) -> None:
    with pytest.raises(ConfigError, match="dry_run=true asks nothing"):
        run(compose_config([*command(server, workdir, data_dir), "dry_run=true"]), output_dir=workdir / "o")


@pytest.mark.model
def test_the_embedded_model_counts_prompt_tokens_with_its_own_tokenizer(workdir: Path, data_dir: Path) -> None:
    from llama_cpp import Llama

    cfg = compose_config([*run_overrides(workdir, data_dir), "dataset.n=1", "model.n_threads=1"])
    plan = plan_run(cfg)
    assert plan.token_method == "tokenizer" and plan.held == 0 and plan.requests == plan.cells == 5
    assert plan.identity == "local" and plan.cost_usd is None
    from prism.backends.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend(cfg.model)
    vocab = Llama(model_path=backend.identity().details["path"], vocab_only=True, verbose=False)
    from prism.conditions import condition_set_from_config, render_all
    from prism.questions import freeze_dataset

    prompts = render_all(freeze_dataset(cfg.dataset).questions, condition_set_from_config(cfg.conditions))
    counted = sum(len(vocab.tokenize(p.text.encode("utf-8"), add_bos=False, special=False)) for p in prompts)
    assert plan.prompt_tokens == counted and counted > 0
    assert all(len(p.text) / 4 != counted / len(prompts) for p in prompts[:1])  # not the chars/4 estimate
    backend.close()
