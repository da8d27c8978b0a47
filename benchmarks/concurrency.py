"""6. Concurrency: Ollama and OpenAI-compatible requests against loopback servers with a fixed delay.

The goal: at concurrency 4, within 1.3x of a quarter of the serial time.
Each backend is pointed at a loopback stand-in of its server that takes a fixed time per request and counts
the requests it is answering at once: the test suite's Ollama stub (``tests/backends/ollama_server.py``)
and an OpenAI-compatible one (``tests/backends/openai_stub.py``). The requests go through the real path
of a run without MLflow: the official client inside ``OllamaBackend`` or ``OpenAIBackend``,
``prism.run.inference.collect`` (bounded-concurrency dispatch), the completion store and the response log, each
record fsynced as it arrives. The wall time of N distinct requests is measured at concurrency 1, 2, 4 and
8, against the ideal: the serial time divided by the concurrency. The identity probe (model list, and for
OpenAI a one-token chat) happens before the clock starts.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, Context, Section

COMMAND = "python -m benchmarks --only concurrency"
LEVELS = (1, 2, 4, 8)
GOAL = 1.3  # concurrency 4 within 1.3x of a quarter of the serial time
# Server scale: many requests at the concurrency a vLLM server is run with; the goal is wall time within
# 1.1x of the ideal N x latency / concurrency.
SERVER_LEVELS = (64, 256)
SERVER_REQUESTS = 2048
SERVER_GOAL = 1.1


@dataclass(frozen=True)
class Measured:
    """One backend at one concurrency: wall seconds and the most requests the server had at once."""

    concurrency: int
    seconds: float
    max_in_flight: int


def requests(n: int) -> list[Any]:
    """``n`` distinct prompts (distinct store keys), greedy decoding, 8 tokens."""
    from prism.backends.base import Request
    from prism.types import GenerationParams, Prompt

    params = GenerationParams(temperature=0.0, max_tokens=8, seed=0)
    return [
        Request(Prompt(f"q{i}", "P0", f"Question {i}?\n\nA. yes\nB. no\n\nReturn only the letter.", ("A", "B"),
                       ("A", "B"), ("yes", "no"), "1"), params, 0)
        for i in range(n)
    ]


def timed_collect(backend: Any, n: int, workdir: Path, sync_interval_s: float = 0.0) -> float:
    """Seconds to collect ``n`` completions from ``backend`` into a fresh store and response log.

    ``sync_interval_s`` is the run's ``store.sync_interval_s``: 0 fsyncs every record, as a run does by default.

    Raises:
        SystemExit: If a request failed or a completion is missing, so no broken run reports a time.
    """
    from prism.run.inference import collect, make_cells
    from prism.run.store import CompletionStore, ResponseLog

    identity = backend.identity()  # the probe, before the clock
    cells = make_cells(requests(n), identity, "bench", "test")
    workdir.mkdir(parents=True, exist_ok=True)
    store = CompletionStore(workdir / "store.sqlite", sync_interval_s)
    log = ResponseLog(workdir / "responses.jsonl", sync_interval_s)
    try:
        start = time.perf_counter()
        records = collect(backend, identity, cells, log, store, run_id=None)
        elapsed = time.perf_counter() - start
    finally:
        log.close()
        store.close()
        backend.close()
    failed = [r for r in records if r.error]
    if len(records) != n or failed:
        raise SystemExit(f"expected {n} completions, got {len(records)} ({len(failed)} failed)")
    return elapsed


@contextmanager
def _tests_on_path() -> Iterator[None]:
    """Make ``tests/`` importable for the stubs (``backends.ollama_server``, ``backends.openai_stub``)."""
    path = str(REPO / "tests")
    sys.path.insert(0, path)
    try:
        yield
    finally:
        sys.path.remove(path)


def stub_for(name: str, delay_s: float) -> Any:
    """The loopback stand-in of ``name``'s server (``ollama`` or ``openai``), not yet started."""
    # The stubs are test helpers, not part of the typed package: imported by name, so they stay untyped here.
    with _tests_on_path():
        module = importlib.import_module("backends.ollama_server" if name == "ollama" else "backends.openai_stub")
    return getattr(module, "OllamaStub" if name == "ollama" else "OpenAIStub")(delay_s=delay_s)


def backend_for(name: str, stub: Any, concurrency: int) -> Any:
    """A fresh backend of ``name`` pointed at the started ``stub``, keeping ``concurrency`` requests in flight."""
    from prism.backends.ollama import OllamaModelConfig
    from prism.backends.openai_compat import OpenAIModelConfig

    if name == "ollama":
        from prism.backends.ollama import OllamaBackend

        return OllamaBackend(OllamaModelConfig(name="llama3", host=stub.url, concurrency=concurrency))
    from prism.backends.openai_compat import OpenAIBackend

    return OpenAIBackend(OpenAIModelConfig(name=stub.model, base_url=stub.url, concurrency=concurrency))


def measure(name: str, delay_s: float, n: int, workdir: Path, levels: tuple[int, ...] = LEVELS) -> list[Measured]:
    """Start ``name``'s stub with ``delay_s`` per request and time ``n`` requests at each concurrency."""
    results = []
    with stub_for(name, delay_s) as stub:
        for c in levels:
            backend = backend_for(name, stub, c)
            stub.max_in_flight = 0  # the most at once during this concurrency only
            seconds = timed_collect(backend, n, workdir / f"{name}-c{c}")
            results.append(Measured(c, seconds, stub.max_in_flight))
    return results


def run(ctx: Context) -> Section:
    """Measure both backends and report one table each."""
    n, delay = (16, 0.05) if ctx.quick else (40, 0.2)
    figures: dict[str, float] = {"requests": float(n), "delay_s": delay}
    body = [
        f"{n} distinct requests, each taking {delay:g} s on a loopback stand-in of the server, through the "
        "backend, `prism.run.inference.collect`, the store and the response log (fsynced per record). Ideal = "
        "serial wall time / concurrency; ratio = wall / ideal (1.00 is perfect overlap).",
    ]
    for name, title in (("ollama", "Ollama (`OllamaBackend`, official `ollama` client)"),
                        ("openai", "OpenAI-compatible (`OpenAIBackend`, official `openai` client)")):
        measured = measure(name, delay, n, ctx.workdir / "concurrency")
        serial = measured[0].seconds
        body += ["", f"{title}:", "", "| concurrency | wall s | ideal s | ratio | max in flight seen |",
                 "| ---: | ---: | ---: | ---: | ---: |"]
        for m in measured:
            ideal = serial / m.concurrency
            body.append(f"| {m.concurrency} | {m.seconds:.2f} | {ideal:.2f} | {m.seconds / ideal:.2f} | "
                        f"{m.max_in_flight} |")
            figures[f"{name}_wall_s_c{m.concurrency}"] = m.seconds
            figures[f"{name}_ratio_c{m.concurrency}"] = m.seconds / ideal
            figures[f"{name}_max_in_flight_c{m.concurrency}"] = float(m.max_in_flight)
        figures[f"{name}_serial_overhead"] = serial / (n * delay)
    body += [
        "",
        f"**At concurrency 4: {figures['ollama_ratio_c4']:.2f}x (Ollama) and {figures['openai_ratio_c4']:.2f}x "
        f"(OpenAI-compatible) the ideal** (goal <= {GOAL}x: "
        f"{'met' if max(figures['ollama_ratio_c4'], figures['openai_ratio_c4']) <= GOAL else 'NOT met'}). "
        f"Serial time over the server's own {n} x {delay:g} s: {figures['ollama_serial_overhead']:.3f} (Ollama), "
        f"{figures['openai_serial_overhead']:.3f} (OpenAI-compatible).",
    ]
    body += server_scale(ctx, figures)
    return Section("6. Concurrency against loopback servers", COMMAND, body, figures)


@dataclass(frozen=True)
class ServerMeasured:
    """One server-scale measurement: wall and CPU seconds of each side, and the most in flight."""

    server: str
    concurrency: int
    sync_interval_s: float
    seconds: float
    client_cpu_s: float
    stub_cpu_s: float
    max_in_flight: int


def measure_server(name: str, delay_s: float, n: int, workdir: Path, levels: tuple[int, ...],
                   sync_interval_s: float) -> list[ServerMeasured]:
    """Time ``n`` requests at each concurrency against ``name``'s stub served by a process of its own."""
    from benchmarks.stub_process import StubProcess

    results = []
    with StubProcess(name, delay_s) as stub:
        for c in levels:
            backend = backend_for(name, stub, c)
            stub.reset()
            _, stub_before = stub.stats()
            cpu_before = time.process_time()
            seconds = timed_collect(backend, n, workdir / f"{name}-c{c}-s{sync_interval_s:g}", sync_interval_s)
            client_cpu = time.process_time() - cpu_before
            most, stub_after = stub.stats()
            results.append(ServerMeasured(name, c, sync_interval_s, seconds, client_cpu, stub_after - stub_before,
                                          most))
    return results


def server_scale(ctx: Context, figures: dict[str, float]) -> list[str]:
    """Many requests at server-scale concurrency: wall time against the ideal N x latency / concurrency.

    The stub runs in a process of its own (:mod:`benchmarks.stub_process`), as a real server would, so the
    client's CPU is PRISM's alone. Each level is measured with a record fsynced per completion (the default)
    and with ``store.sync_interval_s=1``, what a run at this scale sets. The client's CPU seconds per request
    give the most requests per second one interpreter can drive; the ideal needs N / (N x delay /
    concurrency) = concurrency / delay requests per second.
    """
    n, delay, levels = (64, 0.05, (8, 16)) if ctx.quick else (SERVER_REQUESTS, 0.2, SERVER_LEVELS)
    body = ["", f"Server scale: {n:,} distinct requests of {delay:g} s each at {' and '.join(map(str, levels))} in "
                "flight, same path (one thread per request in flight, `concurrent.futures`), the stub in a process "
                f"of its own; ideal = {n:,} x {delay:g} s / concurrency. `sync` is `store.sync_interval_s` (0: the "
                "store and the response log fsync every record).", "",
            "| server | concurrency | sync s | wall s | ideal s | ratio | requests/s | client CPU ms per request "
            "| stub CPU ms per request | max in flight seen |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name in ("ollama", "openai"):
        for sync in (0.0, 1.0):
            for m in measure_server(name, delay, n, ctx.workdir / "server-scale", levels, sync):
                ideal = n * delay / m.concurrency
                body.append(f"| {name} | {m.concurrency} | {sync:g} | {m.seconds:.2f} | {ideal:.2f} | "
                            f"{m.seconds / ideal:.2f} | {n / m.seconds:.0f} | {1000 * m.client_cpu_s / n:.2f} | "
                            f"{1000 * m.stub_cpu_s / n:.2f} | {m.max_in_flight} |")
                key = f"server_{name}_c{m.concurrency}_sync{sync:g}"
                figures[f"{key}_wall_s"] = m.seconds
                figures[f"{key}_ratio"] = m.seconds / ideal
                figures[f"{key}_client_cpu_ms"] = 1000 * m.client_cpu_s / n
                figures[f"{key}_max_in_flight"] = float(m.max_in_flight)
    synced = {k: v for k, v in figures.items() if k.startswith("server_") and "_sync1_" in k}
    worst = max(v for k, v in synced.items() if k.endswith("_ratio"))
    cpu = max(v for k, v in synced.items() if k.endswith("_client_cpu_ms"))
    body += ["", f"**Worst ratio at server scale with `store.sync_interval_s=1`: {worst:.2f}x the ideal** (goal <= "
                 f"{SERVER_GOAL}x: {'met' if worst <= SERVER_GOAL else 'NOT met'}). At up to {cpu:.2f} ms of client "
                 f"CPU per request one interpreter drives at most {1000 / cpu:.0f} requests/s; the ideal at "
                 + " and ".join(f"{c} in flight needs {c / delay:.0f}/s" for c in levels) + "."]
    return body
