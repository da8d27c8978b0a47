"""Tokens and cost of a run: the metrics equal an independent sum over the raw records the run wrote.

Runs go against the Anthropic stand-in (``tests/backends/anthropic_server.py``), whose usage has prompt,
completion and prompt-cache counts, so every sum is over numbers that differ from cell to cell.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from backends.anthropic_server import MODEL, AnthropicServer
from conftest import compose_config, run_overrides

from prism.backends.openai_wire import read_reply
from prism.config import PricingConfig
from prism.errors import ConfigError
from prism.results.summary import format_usage
from prism.run.pipeline import run
from prism.run.usage import cost_usd

pytest.importorskip("anthropic")
KEY_ENV = "PRISM_TEST_USAGE_KEY"


def test_openai_usage_reports_cached_prompt_tokens_when_it_has_them() -> None:
    reply = {"choices": [{"message": {"content": "B"}}],
             "usage": {"prompt_tokens": 2006, "completion_tokens": 300,
                       "prompt_tokens_details": {"cached_tokens": 1920}}}
    assert read_reply(reply, 0.1, {}).provider_cached_tokens == 1920
    assert read_reply({**reply, "usage": {"prompt_tokens": 3}}, 0.1, {}).provider_cached_tokens is None


@pytest.mark.parametrize(("pricing", "message"), [
    (PricingConfig(input_per_mtok=3.0), "model.pricing.input_per_mtok is set but model.pricing.output_per_mtok"),
    (PricingConfig(input_per_mtok=-1.0, output_per_mtok=1.0), "input_per_mtok=-1.0 must be a price >= 0"),
    (PricingConfig(input_per_mtok=1.0, output_per_mtok=float("inf")), "output_per_mtok=inf"),
    (PricingConfig(input_per_mtok=1.0, output_per_mtok=1.0, batch_discount=0.0), "batch_discount=0.0"),
])
def test_prices_that_cannot_be_meant_are_refused(pricing: PricingConfig, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        pricing.check()
    PricingConfig().check()  # none is fine: no cost_usd


def test_the_summary_shows_tokens_and_cost_only_when_there_are_some() -> None:
    assert format_usage({"accuracy": 1.0}) == []
    lines = format_usage({"tokens_prompt": 120.0, "tokens_completion": 5.0, "tokens_provider_cached": 40.0,
                          "tokens_from_store_prompt": 60.0, "tokens_from_store_completion": 2.0, "cost_usd": 0.000435})
    text = "\n".join(lines)
    assert "120 prompt, 5 completion (40 prompt tokens from the provider's cache)" in text
    assert "cells from the store: 60 prompt, 2 completion" in text and "$0.0004" in text


@pytest.fixture(scope="module")
def api_key() -> str:
    return f"sk-ant-usage-{secrets.token_hex(10)}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, api_key: str) -> Iterator[AnthropicServer]:
    with AnthropicServer(tmp_path_factory.mktemp("usage-anthropic"), api_key) as s:
        yield s


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "responses" / "responses.jsonl").open()]


def test_token_and_cost_metrics_equal_an_independent_sum_of_the_recorded_tokens(
        server: AnthropicServer, workdir: Path, data_dir: Path, api_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, api_key)
    base = [*run_overrides(workdir, data_dir), "model=anthropic", f"model.name={MODEL}", f"model.base_url={server.url}",
            f"model.api_key_env={KEY_ENV}", "dataset.n=2", "model.pricing.input_per_mtok=3",
            "model.pricing.output_per_mtok=15"]
    first = run(compose_config(base), output_dir=workdir / "first")
    # Repetition 0 of every cell is in the store now; a second repetition is asked.
    second = run(compose_config([*base, "generation.repetitions=2"]), output_dir=workdir / "second")
    assert (second.n_cached, second.n_fresh) == (10, 10)

    for result in (first, second):
        raw = records(result.output_dir)
        asked = [r for r in raw if not r["cached"]]
        served = [r for r in raw if r["cached"]]
        metrics = result.metrics
        prompt, completion = sum(r["prompt_tokens"] for r in asked), sum(r["completion_tokens"] for r in asked)
        assert prompt > 0 and metrics["tokens_prompt"] == prompt and metrics["tokens_completion"] == completion
        assert metrics["tokens_from_store_prompt"] == sum(r["prompt_tokens"] for r in served)
        assert metrics["tokens_from_store_completion"] == sum(r["completion_tokens"] for r in served)
        assert metrics["tokens_provider_cached"] == sum(r["provider_cached_tokens"] for r in asked)
        for condition in {r["condition"] for r in raw}:
            assert metrics[f"tokens_prompt/{condition}"] == sum(r["prompt_tokens"] for r in asked
                                                                if r["condition"] == condition)
            assert metrics[f"tokens_completion/{condition}"] == sum(r["completion_tokens"] for r in asked
                                                                    if r["condition"] == condition)
        assert metrics["cost_usd"] == pytest.approx((prompt * 3 + completion * 15) / 1e6)
        assert metrics["cost_usd"] == pytest.approx(cost_usd(prompt, completion, PricingConfig(3.0, 15.0)))
    assert records(second.output_dir) and second.metrics["tokens_from_store_prompt"] == first.metrics["tokens_prompt"]

    import mlflow

    logged = mlflow.tracking.MlflowClient(second.tracking_uri).get_run(second.run_id).data.metrics
    for name in ("tokens_prompt", "tokens_completion", "tokens_from_store_prompt", "tokens_from_store_completion",
                 "tokens_provider_cached", "cost_usd", "tokens_prompt/P0"):
        assert logged[name] == pytest.approx(second.metrics[name]), name


def test_a_run_without_prices_logs_tokens_and_no_cost(workdir: Path, data_dir: Path) -> None:
    result = run(compose_config([*run_overrides(workdir, data_dir), "dataset.n=1", "model=replay",
                                 f"model.path={write_replay(workdir)}"]), output_dir=workdir / "out")
    assert "cost_usd" not in result.metrics and "tokens_provider_cached" not in result.metrics
    assert result.metrics["tokens_prompt"] == 0  # a replay counts no tokens


def write_replay(workdir: Path) -> Path:
    from conftest import compose_config as compose

    from prism.conditions import condition_set_from_config
    from prism.questions import freeze_dataset

    cfg = compose([*run_overrides(workdir, Path(__file__).resolve().parent.parent / "data"), "dataset.n=1"])
    frozen = freeze_dataset(cfg.dataset)
    names = condition_set_from_config(cfg.conditions).names
    path = workdir / "replay.jsonl"
    path.write_text("".join(json.dumps({"question_id": q.question_id, "condition": c, "response": "A"}) + "\n"
                            for q in frozen.questions for c in names))
    return path
