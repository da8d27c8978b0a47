"""Endpoint pools (``model.endpoints``): checks, identity, least-loaded dispatch, a dying endpoint, resume.

The dispatch is tested first against in-process fakes (exact, fast); then whole runs against loopback
stand-ins in processes of their own (``standin_process.py``), which die by SIGKILL as a server does; then
two real ``python -m llama_cpp.server`` processes on the SmolLM2 GGUF (marker ``model``).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import compose_config, run_overrides

from backends.llama_server import ALIAS, LlamaServer, free_port
from backends.ollama_server import LLAMA3_DIGEST, letter_answer
from backends.standin_process import StandIn
from prism.backends.base import BackendError, Request
from prism.backends.ollama import OllamaBackend, OllamaModelConfig
from prism.backends.openai_compat import OpenAIBackend, OpenAIModelConfig
from prism.backends.pool import EndpointPool, pool_endpoints
from prism.backends.registry import create_backend
from prism.run.pipeline import run
from prism.types import Completion, GenerationParams, Prompt

# -- the dispatch, against fakes ---------------------------------------------------------------------------


class Fake:
    """A stand-in endpoint backend: answers after ``hold`` is set, or raises once ``die_after`` calls are made."""

    address_field = "base_url"

    def __init__(self, name: str, die_after: int | None = None, delay_s: float = 0.0) -> None:
        self.name, self.die_after, self.delay_s = name, die_after, delay_s
        self.calls = 0
        self.in_flight = 0
        self.most = 0
        self.abandoned = threading.Event()
        self.concurrency = 1
        self._lock = threading.Lock()

    def generate(self, request: Request) -> Completion:
        with self._lock:
            self.calls += 1
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            dies = self.die_after is not None and self.calls > self.die_after
        try:
            time.sleep(self.delay_s)
            if dies:
                raise BackendError(f"{self.name} did not answer /chat/completions: connection refused")
            return Completion(text=f"{self.name}:{request.prompt.question_id}", latency_s=self.delay_s)
        finally:
            with self._lock:
                self.in_flight -= 1

    def member_identity(self) -> tuple[Any, dict[str, Any]]:
        from prism.types import ModelIdentity

        return ModelIdentity("m", "openai", "d" * 64, {"base_url": self.name}), {"model": "m"}

    def abandon(self) -> None:
        self.abandoned.set()

    def close(self) -> None:
        pass


def req(i: int) -> Request:
    prompt = Prompt(f"q{i}", "P0", f"Question {i}?\n\nA. x\nB. y", ("A", "B"), ("A", "B"), ("x", "y"), "1")
    return Request(prompt, GenerationParams(temperature=0.0, max_tokens=4, seed=0), 0)


def pool_of(*fakes: Fake, per_endpoint: int = 1) -> EndpointPool:
    return EndpointPool([(f.name, f) for f in fakes], per_endpoint)  # type: ignore[misc]


def test_serial_requests_go_round_robin_and_the_record_says_which_endpoint_answered() -> None:
    a, b, c = Fake("a"), Fake("b"), Fake("c")
    pool = pool_of(a, b, c, per_endpoint=2)
    assert pool.concurrency == 6
    answered = [pool.generate(req(i)).endpoint for i in range(7)]
    assert answered == ["a", "b", "c", "a", "b", "c", "a"]
    identity = pool.identity()
    assert identity.details == {"endpoints": "a,b,c"} and identity.digest == "d" * 64


def test_concurrent_requests_go_to_the_least_loaded_each_endpoint_at_most_its_concurrency() -> None:
    from concurrent.futures import ThreadPoolExecutor

    fast, slow = Fake("fast", delay_s=0.01), Fake("slow", delay_s=0.2)
    pool = pool_of(fast, slow, per_endpoint=3)
    with ThreadPoolExecutor(pool.concurrency) as threads:
        endpoints = list(threads.map(lambda i: pool.generate(req(i)).endpoint, range(60)))
    assert fast.most <= 3 and slow.most <= 3 and fast.most + slow.most == 6
    counts = Counter(endpoints)
    # The slow endpoint holds its three while the fast one answers the rest: least loaded, not strict turns.
    assert counts["slow"] <= 6 < counts["fast"] and sum(counts.values()) == 60
    assert [(c.url, c.answered) for c in pool.counts()] == [("fast", counts["fast"]), ("slow", counts["slow"])]


def test_a_dying_endpoint_leaves_the_pool_and_its_cells_are_asked_on_the_others_once_each() -> None:
    from concurrent.futures import ThreadPoolExecutor

    a, b = Fake("a", delay_s=0.01), Fake("b", die_after=3, delay_s=0.01)
    pool = pool_of(a, b, per_endpoint=2)
    with ThreadPoolExecutor(pool.concurrency) as threads:
        done = list(threads.map(lambda i: pool.generate(req(i)), range(40)))
    assert sorted(c.text.split(":")[1] for c in done if c.text) == sorted(f"q{i}" for i in range(40))
    assert b.abandoned.is_set()
    a_count, b_count = pool.counts()
    assert b_count.answered == 3 and b_count.gone is not None and "connection refused" in b_count.gone
    assert b_count.reasked >= 1 and a_count.answered == 37 and a_count.gone is None
    assert "taken out of the pool" in b_count.line()


def test_when_no_endpoint_is_left_the_error_names_each_and_why() -> None:
    pool = pool_of(Fake("a", die_after=1), Fake("b", die_after=0))
    pool.generate(req(0))
    with pytest.raises(BackendError, match=r"every endpoint of model.endpoints.*a \(1 answered\).*refused.*b \(0 "
                                           r"answered\).*run the same command again"):
        pool.generate(req(1))


# -- the settings --------------------------------------------------------------------------------------------


def test_endpoints_are_normalized_and_a_repeat_or_a_bad_one_is_named() -> None:
    cfg = OllamaModelConfig(name="llama3", endpoints=["localhost:11434", "http://10.0.0.2"])
    assert pool_endpoints(cfg, OllamaBackend) == ["http://localhost:11434", "http://10.0.0.2:80"]
    with pytest.raises(BackendError, match=r"lists http://localhost:11434 twice \(entries 0 and 1\)"):
        pool_endpoints(OllamaModelConfig(name="x", endpoints=["localhost", "http://localhost:11434"]), OllamaBackend)
    with pytest.raises(BackendError, match=r"model.endpoints\[1\]='ftp://h/v1' is not an OpenAI-compatible API"):
        pool_endpoints(OpenAIModelConfig(name="x", endpoints=["http://a/v1", "ftp://h/v1"]), OpenAIBackend)


def test_base_url_or_host_if_set_must_be_one_of_the_endpoints() -> None:
    ok = OpenAIModelConfig(name="x", base_url="http://a:1/v1/", endpoints=["http://a:1/v1", "http://b:1/v1"])
    assert pool_endpoints(ok, OpenAIBackend) == ["http://a:1/v1", "http://b:1/v1"]
    with pytest.raises(BackendError, match=r"model.base_url='http://c:1/v1' is not one of model.endpoints "
                                           r"\(http://a:1/v1, http://b:1/v1\).*model.base_url=null"):
        pool_endpoints(OpenAIModelConfig(name="x", base_url="http://c:1/v1", endpoints=["http://a:1/v1",
                                                                                       "http://b:1/v1"]),
                       OpenAIBackend)
    with pytest.raises(BackendError, match=r"model.host='elsewhere' is not one of model.endpoints"):
        pool_endpoints(OllamaModelConfig(name="x", host="elsewhere", endpoints=["localhost"]), OllamaBackend)


def test_a_pool_is_made_only_with_endpoints_and_only_for_backends_that_serve_pools() -> None:
    single = create_backend(OpenAIModelConfig(name="x", base_url="http://a:1/v1"))
    pool = create_backend(OpenAIModelConfig(name="x", endpoints=["http://a:1/v1", "http://b:1/v1"], concurrency=3))
    try:
        assert isinstance(single, OpenAIBackend)
        assert isinstance(pool, EndpointPool) and pool.concurrency == 6
        assert pool.address() == "pool:http://a:1/v1,http://b:1/v1"
    finally:
        single.close()
        pool.close()
    from prism.backends.replay import ReplayModelConfig

    assert not hasattr(ReplayModelConfig(), "endpoints")  # Hydra refuses model.endpoints for other backends


# -- whole runs against stand-ins in processes of their own -------------------------------------------------


def overrides(workdir: Path, data_dir: Path, *extra: str) -> list[str]:
    return [*run_overrides(workdir, data_dir), "dataset.n=6", "model.retry_base_delay_s=0.05",
            "model.retry_max_delay_s=0.2", *extra]


def endpoints(*servers: StandIn) -> str:
    return "model.endpoints=[" + ",".join(s.url for s in servers) + "]"


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "responses" / "responses.jsonl").open()]


def scored(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results" / "scored.jsonl").open()]


def without(rows: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k not in keys} for row in rows]


def cells(rows: list[dict[str, Any]]) -> Counter[tuple[str, str, int]]:
    return Counter((r["question_id"], r["condition"], r["repetition"]) for r in rows)


def test_an_ollama_pool_shares_the_cells_and_scores_exactly_as_one_endpoint(workdir: Path, data_dir: Path) -> None:
    servers = [StandIn("ollama", delay_s=0.02).start() for _ in range(3)]
    try:
        pooled = run(compose_config(overrides(workdir / "pool", data_dir, "model=llama3", "model.concurrency=2",
                                              endpoints(*servers))), output_dir=workdir / "pool" / "out")
        single = run(compose_config(overrides(workdir / "one", data_dir, "model=llama3", "model.concurrency=2",
                                              f"model.host={servers[0].url}")), output_dir=workdir / "one" / "out")
    finally:
        for server in servers:
            server.stop()
    got = records(pooled.output_dir)
    assert len(got) == 30 and all(r["error"] is None for r in got)
    by_endpoint = Counter(r["endpoint"] for r in got)
    assert set(by_endpoint) == {s.url for s in servers} and min(by_endpoint.values()) >= 5
    assert [(c.url, c.answered) for c in pooled.endpoints] == [(s.url, by_endpoint[s.url]) for s in servers]
    assert "endpoint" not in records(single.output_dir)[0] and single.endpoints == ()
    # Ollama's digest never held the address: a pool and one endpoint share the store's cells and score alike.
    key = ("question_id", "condition", "repetition")
    pool_rows = sorted(scored(pooled.output_dir), key=lambda r: [r[k] for k in key])
    one_rows = sorted(scored(single.output_dir), key=lambda r: [r[k] for k in key])
    assert without(pool_rows, "endpoint", "timestamp", "latency_s", "cached") == \
        without(one_rows, "timestamp", "latency_s", "cached")
    assert pooled.metrics == single.metrics
    # A dry run of the pool asks none of its servers (they are stopped) and counts what the store holds.
    from prism.run.dry_run import plan_run

    plan = plan_run(compose_config(overrides(workdir / "pool", data_dir, "model=llama3", endpoints(*servers),
                                             "dry_run=true")))
    assert (plan.cells, plan.held, plan.requests) == (30, 30, 0) and plan.identity.startswith("recorded")


def test_label_probs_through_a_pool_are_checked_on_every_endpoint_and_read_from_each(
        workdir: Path, data_dir: Path) -> None:
    servers = [StandIn("ollama").start() for _ in range(2)]
    try:
        result = run(compose_config(overrides(workdir, data_dir, "model=llama3", "dataset.n=2", "model.concurrency=2",
                                              "generation.label_probs=true", endpoints(*servers))),
                     output_dir=workdir / "out")
    finally:
        for server in servers:
            server.stop()
    got = records(result.output_dir)
    assert len(got) == 10 and all(r["label_probs_source"] == "top_k" and r["label_probs"] for r in got)
    assert {r["endpoint"] for r in got} == {s.url for s in servers}


def test_an_openai_pool_digest_leaves_the_urls_out_and_one_endpoint_keeps_its_own(workdir: Path,
                                                                                 data_dir: Path) -> None:
    servers = [StandIn("openai").start() for _ in range(4)]
    try:
        first = create_backend(OpenAIModelConfig(name="stub-model", endpoints=[s.url for s in servers[:2]]))
        second = create_backend(OpenAIModelConfig(name="stub-model", endpoints=[s.url for s in servers[2:]]))
        alone = create_backend(OpenAIModelConfig(name="stub-model", base_url=servers[0].url))
        also = create_backend(OpenAIModelConfig(name="stub-model", base_url=servers[1].url))
        try:
            pool_identity, alone_identity = first.identity(), alone.identity()
            assert pool_identity.digest == second.identity().digest  # other URLs, the same model: same cells
            assert alone_identity.digest != also.identity().digest  # one endpoint: today's digest, with base_url
            assert pool_identity.digest != alone_identity.digest
            assert pool_identity.details["endpoints"] == f"{servers[0].url},{servers[1].url}"
            assert "base_url" not in pool_identity.details
            assert pool_identity.details["served_model"] == alone_identity.details["served_model"]
        finally:
            for backend in (first, second, alone, also):
                backend.close()
        # A one-endpoint run is what it was: no endpoint in its records, no model.endpoints param.
        one = run(compose_config(overrides(workdir, data_dir, "model=openai", "model.name=stub-model", "dataset.n=1",
                                           f"model.base_url={servers[0].url}")), output_dir=workdir / "one")
        assert one.endpoints == () and all("endpoint" not in r for r in records(one.output_dir))
        import mlflow

        params = mlflow.tracking.MlflowClient(f"sqlite:///{workdir}/mlflow.db").get_run(one.run_id).data.params
        assert "model.endpoints" not in params and params["model.base_url"] == servers[0].url
    finally:
        for server in servers:
            server.stop()


def test_the_terminal_lists_each_endpoint_with_what_it_answered_at_the_end(workdir: Path, data_dir: Path) -> None:
    import os
    import subprocess
    import sys

    servers = [StandIn("ollama").start() for _ in range(2)]
    try:
        args = overrides(workdir, data_dir, "model=llama3", "dataset.n=2", endpoints(*servers))
        done = subprocess.run([sys.executable, "-m", "prism", *args], cwd=workdir, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    finally:
        for server in servers:
            server.stop()
    assert done.returncode == 0, done.stderr
    tail = done.stdout[done.stdout.index("Endpoints (2):"):].splitlines()
    answered = [int(line.split(": ")[1].split()[0]) for line in tail[1:3]]
    assert [line.split(": ")[0].strip() for line in tail[1:3]] == [s.url for s in servers] and sum(answered) == 10


@pytest.mark.parametrize("kind", ["openai", "ollama"])
def test_an_endpoint_serving_another_model_stops_the_run_before_inference_naming_it(
        kind: str, workdir: Path, data_dir: Path) -> None:
    other = {"answer": "other"} if kind == "openai" else {"digest": "f" * 64}
    good, bad = StandIn(kind).start(), StandIn(kind, **other).start()  # type: ignore[arg-type]
    model = ["model=openai", "model.name=stub-model"] if kind == "openai" else ["model=llama3"]
    try:
        with pytest.raises(BackendError) as caught:
            run(compose_config(overrides(workdir, data_dir, *model, endpoints(good, bad))), output_dir=workdir / "o")
    finally:
        good.stop()
        bad.stop()
    message = str(caught.value)
    assert f"the endpoint {bad.url} serves another model than {good.url}" in message
    assert ("probe_answer" if kind == "openai" else f"digest \"{'f' * 64}\" where the first has "
            f"\"{LLAMA3_DIGEST}\"") in message and "nothing was asked" in message
    assert not (workdir / "o" / "responses").exists()


def test_an_unreachable_endpoint_stops_the_run_before_inference_naming_it(workdir: Path, data_dir: Path) -> None:
    nobody = f"http://127.0.0.1:{free_port()}/v1"
    with StandIn("openai") as good:
        started = time.monotonic()
        with pytest.raises(BackendError, match=rf"1 of the 2 endpoints of model\.endpoints cannot be used, so nothing "
                                               rf"was asked\. {nobody}: .*did not answer /models.*connection refused"):
            run(compose_config(overrides(workdir, data_dir, "model=openai", "model.name=stub-model",
                                         f"model.endpoints=[{good.url},{nobody}]")), output_dir=workdir / "o")
    assert time.monotonic() - started < 30  # the first-contact budget, not the whole retry budget
    assert not (workdir / "o" / "responses").exists()


def kill_when(log: Path, lines: int, server: StandIn | LlamaServer, done: threading.Event) -> threading.Thread:
    """SIGKILL ``server`` once ``log`` holds ``lines`` records (in a thread, while the run goes on)."""

    def watch() -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not done.is_set():
            if log.exists() and len(log.read_text().splitlines()) >= lines:
                server.kill()
                done.set()
                return
            time.sleep(0.01)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_sigkill_of_one_endpoint_mid_run_loses_no_cell_and_asks_none_twice(
        workdir: Path, data_dir: Path, record_property: Any) -> None:
    servers = [StandIn("openai", delay_s=0.1).start() for _ in range(3)]
    killed = threading.Event()
    out = workdir / "out"
    try:
        kill_when(out / "responses" / "responses.jsonl", 8, servers[1], killed)
        result = run(compose_config(overrides(workdir, data_dir, "model=openai", "model.name=stub-model",
                                              "model.concurrency=2", "model.retry_budget_s=1", endpoints(*servers))),
                     output_dir=out)
    finally:
        killed.set()
        for server in servers:
            server.stop()
    got = records(out)
    assert len(got) == 30 and set(cells(got).values()) == {1}  # every cell once
    assert all(r["error"] is None and r["response"] == letter_answer(r["prompt"]) for r in got)
    counts = {c.url: c for c in result.endpoints}
    dead = counts[servers[1].url]
    assert dead.gone is not None and dead.reasked >= 1 and dead.answered >= 1
    assert sum(c.answered for c in counts.values()) == 30 == result.n_fresh
    assert all(counts[s.url].gone is None for s in (servers[0], servers[2]))
    import sqlite3

    with sqlite3.connect(workdir / "store.sqlite") as db:
        assert db.execute("SELECT COUNT(*), COUNT(DISTINCT key) FROM completions").fetchone() == (30, 30)
    record_property("injected", "1 SIGKILL of 1 of 3 endpoints after 8 logged records")
    record_property("answered", {c.url.rsplit(":", 1)[-1]: c.answered for c in counts.values()})
    record_property("reasked", dead.reasked)
    record_property("lost", 30 - len(got))


def test_when_every_endpoint_dies_the_run_fails_keeping_each_answer_and_the_same_command_resumes(
        workdir: Path, data_dir: Path, record_property: Any) -> None:
    servers = [StandIn("openai", delay_s=0.1).start() for _ in range(2)]
    command = overrides(workdir, data_dir, "model=openai", "model.name=stub-model", "model.concurrency=2",
                        "model.retry_budget_s=1", endpoints(*servers))
    first = workdir / "first"
    try:
        for server, lines in ((servers[0], 4), (servers[1], 8)):
            kill_when(first / "responses" / "responses.jsonl", lines, server, threading.Event())
        with pytest.raises(BackendError, match=r"every endpoint of model.endpoints was taken out of the pool.*"
                                               r"run the same command again"):
            run(compose_config(command), output_dir=first)
        kept = [r for r in records(first) if r["error"] is None]
        assert 8 <= len(kept) < 30
        for server in servers:
            server.start()  # the same ports: the same endpoints
        resumed = run(compose_config(command), output_dir=workdir / "second")
    finally:
        for server in servers:
            server.stop()
    after = records(resumed.output_dir)
    assert (resumed.n_cached, resumed.n_fresh) == (len(kept), 30 - len(kept))
    assert set(cells(after).values()) == {1} and len(after) == 30
    assert all(r["response"] == letter_answer(r["prompt"]) for r in after)
    assert {r["endpoint"] for r in after if r["cached"]} <= {s.url for s in servers}
    record_property("injected", "2 SIGKILLs (both endpoints, after 4 and 8 logged records), then both restarted")
    record_property("kept", len(kept))
    record_property("lost", 30 - len(after))


# -- two real llama_cpp.server processes on the same GGUF ----------------------------------------------------


@pytest.mark.model
def test_two_real_llama_servers_share_a_run_and_one_sigkilled_mid_run_loses_nothing(
        workdir: Path, data_dir: Path, tmp_path_factory: pytest.TempPathFactory, record_property: Any) -> None:
    servers = [LlamaServer(tmp_path_factory.mktemp(f"llama-{i}")).start() for i in range(2)]
    base = [*overrides(workdir, data_dir, "model=openai", f"model.name={ALIAS}", "dataset.n=2",
                       "generation.max_tokens=8", "+model.extra_body.repeat_penalty=1.0", "model.retry_budget_s=1")]
    killed = threading.Event()
    try:
        shared = run(compose_config([*base, endpoints(*servers)]), output_dir=workdir / "shared")  # type: ignore[arg-type]
        got = records(shared.output_dir)
        shares = Counter(r["endpoint"] for r in got)  # one in flight on each: the idle one gets the next cell
        assert set(shares) == {s.url for s in servers} and min(shares.values()) >= 2 and len(got) == 10
        # The same cells again on a fresh store, and the first server SIGKILLed after the second record.
        again = [o if not o.startswith("store.path=") else f"store.path={workdir}/store2.sqlite" for o in base]
        kill_when(workdir / "killed" / "responses" / "responses.jsonl", 2, servers[0], killed)
        survived = run(compose_config([*again, endpoints(*servers)]), output_dir=workdir / "killed")  # type: ignore[arg-type]
    finally:
        killed.set()
        for server in servers:
            server.stop()
    after = records(survived.output_dir)
    assert killed.is_set() and len(after) == 10 and set(cells(after).values()) == {1}
    dead = survived.endpoints[0]
    assert dead.gone is not None and survived.endpoints[1].gone is None
    assert sum(c.answered for c in survived.endpoints) == 10
    # Greedy answers of one GGUF: the same whichever server gave them, before and after the kill.
    answer = {(r["question_id"], r["condition"]): r["response"] for r in got}
    assert {(r["question_id"], r["condition"]): r["response"] for r in after} == answer
    record_property("answered", [c.answered for c in survived.endpoints])
    record_property("reasked", dead.reasked)
