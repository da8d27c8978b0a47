"""6. Concurrency: Ollama and OpenAI-compatible requests against loopback servers with a fixed delay.

The goal: at concurrency 4, within 1.3x of a quarter of the serial time.
Each backend is pointed at a loopback stand-in of its server that takes a fixed time per request and counts
the requests it is answering at once: the test suite's Ollama stub (``tests/backends/ollama_server.py``)
and an OpenAI-compatible one (``tests/backends/openai_stub.py``). The requests go through the real path
of a run without MLflow: the official client inside ``OllamaBackend`` or ``OpenAIBackend``,
``prism.inference.collect`` (bounded-concurrency dispatch), the completion store and the response log, each
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


def timed_collect(backend: Any, n: int, workdir: Path) -> float:
    """Seconds to collect ``n`` completions from ``backend`` into a fresh store and response log.

    Raises:
        SystemExit: If a request failed or a completion is missing, so no broken run reports a time.
    """
    from prism.inference import collect, make_cells
    from prism.store import CompletionStore, ResponseLog

    identity = backend.identity()  # the probe, before the clock
    cells = make_cells(requests(n), identity, "bench", "test")
    workdir.mkdir(parents=True, exist_ok=True)
    store = CompletionStore(workdir / "store.sqlite")
    log = ResponseLog(workdir / "responses.jsonl")
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
    from prism.config import OllamaModelConfig, OpenAIModelConfig

    if name == "ollama":
        from prism.backends.ollama import OllamaBackend

        return OllamaBackend(OllamaModelConfig(name="llama3", host=stub.url, concurrency=concurrency))
    from prism.backends.openai_compat import OpenAIBackend

    return OpenAIBackend(OpenAIModelConfig(name=stub.model, base_url=stub.url, concurrency=concurrency))


def measure(name: str, delay_s: float, n: int, workdir: Path) -> list[Measured]:
    """Start ``name``'s stub with ``delay_s`` per request and time ``n`` requests at each concurrency."""
    results = []
    with stub_for(name, delay_s) as stub:
        for c in LEVELS:
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
        "backend, `prism.inference.collect`, the store and the response log (fsynced per record). Ideal = "
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
    return Section("6. Concurrency against loopback servers", COMMAND, body, figures)
