"""Budgets: a plan over ``budget.max_requests`` / ``budget.max_usd`` is refused before any request; a run that
reaches its cap stops keeping every answered cell, and the same command with a higher cap resumes.

The model server is the Anthropic stand-in (``tests/backends/anthropic_server.py``), which logs every request
before answering, so what was asked is counted on the server's side.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from backends.anthropic_server import MODEL, AnthropicServer
from conftest import compose_config, run_overrides

from prism.config import BudgetConfig, PricingConfig
from prism.errors import ConfigError
from prism.run.budget import BudgetReached
from prism.run.pipeline import run

pytest.importorskip("anthropic")
KEY_ENV = "PRISM_TEST_BUDGET_KEY"
FAIL_ALL = {"status": 500, "type": "api_error", "message": "a refused run must not ask"}


@pytest.fixture(scope="module")
def api_key() -> str:
    return f"sk-ant-budget-{secrets.token_hex(10)}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, api_key: str) -> Iterator[AnthropicServer]:
    with AnthropicServer(tmp_path_factory.mktemp("budget-anthropic"), api_key) as s:
        yield s


def command(server: AnthropicServer, workdir: Path, data_dir: Path, *extra: str, n: int = 2) -> list[str]:
    return [*run_overrides(workdir, data_dir), "model=anthropic", f"model.name={MODEL}", f"model.base_url={server.url}",
            f"model.api_key_env={KEY_ENV}", f"dataset.n={n}", *extra]


def test_caps_that_cannot_be_meant_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"budget\.max_usd needs the model.s prices"):
        BudgetConfig(max_usd=1.0).check(PricingConfig())
    with pytest.raises(ConfigError, match=r"budget\.max_requests=-1"):
        BudgetConfig(max_requests=-1).check(PricingConfig())
    with pytest.raises(ConfigError, match=r"budget\.max_usd=-2\.0"):
        BudgetConfig(max_usd=-2.0).check(PricingConfig(1.0, 1.0))


def test_a_plan_over_either_cap_is_refused_with_the_figures_before_any_request(
        server: AnthropicServer, workdir: Path, data_dir: Path, api_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, api_key)
    server.faults(fail_all=FAIL_ALL)
    before = len(server.requests())
    with pytest.raises(BudgetReached, match=r"would send 10 requests \(10 cells, an unknown number .* held by the "
                       r"store, 10 requests left\), more than budget.max_requests=3, so nothing was asked"):
        run(compose_config(command(server, workdir, data_dir, "budget.max_requests=3")), output_dir=workdir / "a")
    priced = ["model.pricing.input_per_mtok=1000", "model.pricing.output_per_mtok=1000"]
    with pytest.raises(BudgetReached, match=r"prompts alone would cost about \$\d+\.\d{4} \(\d+ prompt tokens by "
                       r"chars/4 over 10 cells.*more than budget.max_usd=0.01, so nothing was asked"):
        run(compose_config(command(server, workdir, data_dir, *priced, "budget.max_usd=0.01")),
            output_dir=workdir / "b")
    assert len(server.requests()) == before  # not even the identity probe
    assert not (workdir / "mlflow.db").exists()
    server.faults()


def test_a_run_stops_at_its_cap_keeping_every_answer_and_a_higher_cap_resumes(
        server: AnthropicServer, workdir: Path, data_dir: Path, api_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, api_key)
    server.faults()
    # Input nearly free, each output token a dollar (the stand-in answers one token): about $1 a cell.
    priced = ["model.pricing.input_per_mtok=0.001", "model.pricing.output_per_mtok=1000000"]
    before = len(server.requests())
    with pytest.raises(BudgetReached, match=r"(?s)reached its budget \(budget.max_usd=3.5\): it sent 4 requests, "
                       r"spending \$4.0\d+ at model.pricing, and 6 cells were not asked.*resumes"):
        run(compose_config(command(server, workdir, data_dir, *priced, "budget.max_usd=3.5")),
            output_dir=workdir / "first")
    first = [json.loads(line) for line in (workdir / "first" / "responses" / "responses.jsonl").open()]
    assert len(first) == 4 and all(r["error"] is None for r in first)
    assert len(server.requests()) - before == 1 + 4  # the probe, then the four cells answered

    import mlflow

    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    (failed,) = client.search_runs([client.get_experiment_by_name("prism").experiment_id])
    assert failed.info.status == "FAILED"

    middle = len(server.requests())
    resumed = run(compose_config(command(server, workdir, data_dir, *priced, "budget.max_usd=100")),
                  output_dir=workdir / "second")
    assert (resumed.n_cached, resumed.n_fresh) == (4, 6)
    asked = server.requests()[middle:]
    assert len(asked) == 1 + 6
    assert not {r["prompt"] for r in first} & {a["body"]["messages"][0]["content"] for a in asked[1:]}
    assert resumed.metrics["cost_usd"] == pytest.approx(sum((r["prompt_tokens"] * 0.001 + r["completion_tokens"] * 1e6)
                                                            / 1e6 for r in asked_records(resumed.output_dir)))


def asked_records(out: Path) -> list[dict]:
    return [r for r in (json.loads(line) for line in (out / "responses" / "responses.jsonl").open()) if not r["cached"]]


def test_when_the_plan_was_wrong_the_request_cap_still_holds(
        server: AnthropicServer, workdir: Path, data_dir: Path, api_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, api_key)
    server.faults()
    run(compose_config(command(server, workdir, data_dir, n=1)), output_dir=workdir / "seed")
    # The alias now answers as another snapshot: the plan, from the recorded identity, counts all 5 cells as
    # held, but the run's probe gives a new digest, under which the store holds none of them.
    server.faults(served_as="claude-standin-4-5-20260101")
    before = len(server.requests())
    with pytest.raises(BudgetReached, match=r"budget.max_requests=2\): it sent 2 requests, and 3 cells were not"):
        run(compose_config(command(server, workdir, data_dir, "budget.max_requests=2", n=1)),
            output_dir=workdir / "capped")
    assert len(server.requests()) - before == 1 + 2
    server.faults()
