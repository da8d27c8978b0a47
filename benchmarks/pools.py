"""15. Endpoint pools: one endpoint against a pool of four, each a stand-in at 0.2 s per request.

Wall time over the ideal N x delay / (k x c) for a pool of k endpoints at ``model.concurrency`` c each (issue 36),
against one endpoint at c and, as the control, one endpoint at k x c: the same requests in flight from one
client, which tells what the pool costs from what one interpreter can drive at that rate at all.
Each stand-in (``tests/backends/openai_stub.py`` or ``ollama_server.py``) answers in a process of
its own (:mod:`benchmarks.stub_process`), as a real server would, after a fixed delay, and reports the most
requests it had in flight. The requests go through the real path of a run without MLflow: the backend (one
``OpenAIBackend``/``OllamaBackend``, or an :class:`~prism.backends.pool.EndpointPool` of four made by
``create_backend`` from ``model.endpoints``), ``prism.run.inference.collect``, the completion store and the
response log with ``store.sync_interval_s=1`` (what a run at this rate sets; BENCHMARKS.md section 14). The
identity probes (every endpoint's, for the pool) happen before the clock starts.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import Context, Section
from benchmarks.concurrency import timed_collect

COMMAND = "python -m benchmarks --only pools"
REQUESTS = 2048
DELAY_S = 0.2
POOL_SIZE = 4
LEVELS = (8, 16)  # model.concurrency per endpoint


@dataclass(frozen=True)
class PoolMeasured:
    """One arm: which server, how many endpoints, requests in flight per endpoint, wall and what each saw."""

    server: str
    endpoints: int
    concurrency: int
    seconds: float
    client_cpu_s: float
    most_in_flight: tuple[int, ...]
    answered: tuple[int, ...]


def make_backend(name: str, urls: list[str], model: str, concurrency: int) -> Any:
    """One endpoint's backend (``model.base_url``/``model.host``), or a pool of ``urls`` (``model.endpoints``)."""
    from prism.backends.ollama import OllamaModelConfig
    from prism.backends.openai_compat import OpenAIModelConfig
    from prism.backends.registry import create_backend

    if name == "ollama":
        cfg: Any = (OllamaModelConfig(name="llama3", host=urls[0], concurrency=concurrency) if len(urls) == 1 else
                    OllamaModelConfig(name="llama3", endpoints=urls, concurrency=concurrency))
    else:
        cfg = (OpenAIModelConfig(name=model, base_url=urls[0], concurrency=concurrency) if len(urls) == 1 else
               OpenAIModelConfig(name=model, endpoints=urls, concurrency=concurrency))
    return create_backend(cfg)


def measure(name: str, delay_s: float, n: int, workdir: Path, levels: tuple[int, ...],
            size: int) -> list[PoolMeasured]:
    """Time ``n`` requests against one stub and against a pool of ``size`` stubs, at each concurrency."""
    from benchmarks.stub_process import StubProcess
    from prism.backends.pool import EndpointPool

    results = []
    with ExitStack() as stack:
        stubs = [stack.enter_context(StubProcess(name, delay_s)) for _ in range(size)]
        for c in levels:
            # One endpoint at c, the same at the pool's total in flight (what the client alone can drive), the pool.
            for arm, each in ((stubs[:1], c), (stubs[:1], size * c), (stubs, c)):
                backend = make_backend(name, [s.url for s in arm], arm[0].model, each)
                counts = backend.counts if isinstance(backend, EndpointPool) else None
                for stub in arm:
                    stub.reset()
                before = time.process_time()
                seconds = timed_collect(backend, n, workdir / f"{name}-k{len(arm)}-c{c}", sync_interval_s=1.0)
                cpu = time.process_time() - before
                answered = tuple(x.answered for x in counts()) if counts else (n,)
                results.append(PoolMeasured(name, len(arm), each, seconds, cpu,
                                            tuple(s.stats()[0] for s in arm), answered))
    return results


def run(ctx: Context) -> Section:
    """Measure one endpoint against a pool of four for both remote backends; one table."""
    n, delay, levels = (64, 0.05, (4,)) if ctx.quick else (REQUESTS, DELAY_S, LEVELS)
    figures: dict[str, float] = {"requests": float(n), "delay_s": delay}
    body = [
        f"{n:,} distinct requests, each taking {delay:g} s on a stand-in in a process of its own, through the backend "
        f"(one endpoint, or `model.endpoints` of {POOL_SIZE}), `prism.run.inference.collect`, the store and the "
        "response log (`store.sync_interval_s=1`). Ideal = requests x delay / (endpoints x concurrency); ratio = "
        "wall / ideal. `most in flight` is what each stand-in saw at once; `answered` how many each endpoint gave.",
        "",
        "| server | endpoints | concurrency each | wall s | ideal s | ratio | requests/s | client CPU ms per request "
        "| most in flight (each) | answered (each) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for name in ("openai", "ollama"):
        for m in measure(name, delay, n, ctx.workdir / "pools", levels, POOL_SIZE):
            ideal = n * delay / (m.endpoints * m.concurrency)
            body.append(f"| {name} | {m.endpoints} | {m.concurrency} | {m.seconds:.2f} | {ideal:.2f} | "
                        f"{m.seconds / ideal:.2f} | {n / m.seconds:.0f} | {1000 * m.client_cpu_s / n:.2f} | "
                        f"{', '.join(map(str, m.most_in_flight))} | {', '.join(map(str, m.answered))} |")
            key = f"{name}_k{m.endpoints}_c{m.concurrency}"  # k1 at size x c: the client's own limit
            figures[f"{key}_wall_s"] = m.seconds
            figures[f"{key}_ratio"] = m.seconds / ideal
            figures[f"{key}_client_cpu_ms"] = 1000 * m.client_cpu_s / n
    lines = []
    for name in ("openai", "ollama"):
        for c in levels:
            pool, one = f"{name}_k{POOL_SIZE}_c{c}", f"{name}_k1_c{c}"
            same = f"{name}_k1_c{POOL_SIZE * c}"
            figures[f"{name}_speedup_c{c}"] = figures[f"{one}_wall_s"] / figures[f"{pool}_wall_s"]
            lines.append(f"{name} at {c} each: the pool {figures[f'{name}_speedup_c{c}']:.2f}x faster than one "
                         f"endpoint, ratio {figures[f'{pool}_ratio']:.2f} against {figures[f'{same}_ratio']:.2f} for "
                         f"one endpoint at the same {POOL_SIZE * c} in flight")
    body += ["", "**" + "; ".join(lines) + ".**"]
    return Section(f"Endpoint pools: one endpoint against a pool of {POOL_SIZE}", COMMAND, body, figures)
