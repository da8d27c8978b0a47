"""20 (issue 37). Client CPU per request: PRISM's OpenAI-compatible backend against lighter HTTP paths.

One OpenAI-compatible stand-in in a process of its own (:mod:`benchmarks.stub_process`) answers every chat after
0.2 s; each arm sends the same 4,096 distinct chat bodies (the ones :func:`prism.backends.openai_wire.build_request`
writes for :func:`benchmarks.concurrency.requests`) with 256 in flight, one arm after the other in this one
process, so they share the machine's load. What is measured is this process's user + system CPU over the arm
(``time.process_time()``: every thread, the stand-in's process excluded), divided by the requests.

Arms:

- ``prism official``: :class:`prism.backends.openai_compat.OpenAIBackend` as a run uses it, through
  :func:`prism.run.inference.dispatch` (256 threads), without the store (which section 20's driver pays anyway);
- ``openai bare``: the official ``openai`` client's ``chat.completions.create`` from 256 threads, nothing of PRISM;
- ``httpx sync``: one shared ``httpx.Client`` (a pool of 256 connections), ``post`` and ``json()`` from 256 threads;
- ``httpx async``: one ``httpx.AsyncClient``, 256 tasks on one event loop;
- ``aiohttp``: one ``aiohttp.ClientSession`` (256 connections), 256 tasks on one event loop (when installed);
- ``http.client``: one keep-alive ``http.client.HTTPConnection`` per thread, 256 threads, ``json``;
- ``prism client=http``: the backend with ``model.client=http`` (its keep-alive ``http.client`` path) through
  ``dispatch``, when this tree has it.

Run as ``python -m benchmarks.client_cpu`` (``--quick`` for toy sizes) or ``python -m benchmarks --only client_cpu``.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmarks.common import Context, Section

COMMAND = "python -m benchmarks --only client_cpu"
REQUESTS = 4096
DELAY_S = 0.2
IN_FLIGHT = 256
TARGET_MS = 1.0


def _bodies(n: int, model: str) -> list[dict[str, Any]]:
    """The chat bodies PRISM's backend sends for the benchmark's ``n`` distinct requests."""
    from benchmarks.concurrency import requests
    from prism.backends.openai_wire import build_request

    return [build_request(request, model) for request in requests(n)]


def _check(replies: list[Mapping[str, Any]], n: int, arm: str) -> None:
    """Every reply must be a chat completion with an answer, or the arm's figure means nothing."""
    answered = sum(1 for r in replies if r.get("choices") and r["choices"][0]["message"]["content"])
    if len(replies) != n or answered != n:
        raise SystemExit(f"{arm}: expected {n} answered chat completions, got {answered} of {len(replies)}")


def _threads(n: int, send: Callable[[int], Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    with ThreadPoolExecutor(max_workers=IN_FLIGHT) as pool:
        return list(pool.map(send, range(n)))


def prism_backend(url: str, model: str, n: int, client: str | None = None) -> list[Mapping[str, Any]]:
    """PRISM's backend through the run's dispatch (the store left out); the identity probe before the clock."""
    from benchmarks.concurrency import requests
    from prism.backends.openai_compat import OpenAIModelConfig
    from prism.backends.registry import create_backend
    from prism.run.inference import dispatch, make_cells

    settings: dict[str, Any] = {"client": client} if client else {}
    backend = create_backend(OpenAIModelConfig(name=model, base_url=url, concurrency=IN_FLIGHT, **settings))
    identity = backend.identity()
    cells = make_cells(requests(n), identity, "bench", "test")
    try:
        return _measured(lambda: [{"choices": [{"message": {"content": c.text}}]}
                                  for _, c in dispatch(backend, cells, IN_FLIGHT)])
    finally:
        backend.close()


def prism_run_path(url: str, model: str, n: int, workdir: Path, client: str | None = None) -> list[Mapping[str, Any]]:
    """One process's whole run path: dispatch, the store and the response log (``store.sync_interval_s=1``).

    That is :func:`benchmarks.concurrency.timed_collect`, as section 20's one-process arm pays it; it checks every
    completion itself (and exits on a failed one), so the replies handed back only stand for that check.
    """
    from benchmarks.concurrency import timed_collect
    from prism.backends.openai_compat import OpenAIModelConfig
    from prism.backends.registry import create_backend

    settings: dict[str, Any] = {"client": client} if client else {}
    backend = create_backend(OpenAIModelConfig(name=model, base_url=url, concurrency=IN_FLIGHT, **settings))
    backend.identity()  # the probe, before the clock (timed_collect asks again: answered from the first)

    def collect() -> list[Mapping[str, Any]]:
        timed_collect(backend, n, workdir / f"run-{client or 'official'}", sync_interval_s=1.0)
        return [{"choices": [{"message": {"content": "checked by timed_collect"}}]}] * n

    return _measured(collect)


def openai_bare(url: str, bodies: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
    """The official client alone, as PRISM calls it (extra fields through ``extra_body``)."""
    import openai

    client = openai.OpenAI(base_url=url, api_key="bench", max_retries=0, timeout=120.0)

    def send(i: int) -> Mapping[str, Any]:
        body = bodies[i]
        rest = {k: v for k, v in body.items() if k not in ("model", "messages", "stream")}
        reply = client.chat.completions.create(model=body["model"], messages=body["messages"], stream=False,
                                               extra_body=rest)
        dumped: dict[str, Any] = reply.model_dump(exclude_unset=True)
        return dumped

    try:
        return _measured(lambda: _threads(len(bodies), send))
    finally:
        client.close()


def httpx_sync(url: str, bodies: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
    """One shared ``httpx.Client`` from 256 threads."""
    import httpx

    limits = httpx.Limits(max_connections=IN_FLIGHT, max_keepalive_connections=IN_FLIGHT)
    with httpx.Client(base_url=url, limits=limits, timeout=120.0) as client:
        def send(i: int) -> Mapping[str, Any]:
            response = client.post("/chat/completions", json=bodies[i])
            response.raise_for_status()
            data: dict[str, Any] = response.json()
            return data

        return _measured(lambda: _threads(len(bodies), send))


def httpx_async(url: str, bodies: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
    """One ``httpx.AsyncClient``, 256 tasks at a time on one event loop."""
    import httpx

    async def main() -> list[Mapping[str, Any]]:
        limits = httpx.Limits(max_connections=IN_FLIGHT, max_keepalive_connections=IN_FLIGHT)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120.0) as client:
            gate = asyncio.Semaphore(IN_FLIGHT)

            async def send(body: dict[str, Any]) -> Mapping[str, Any]:
                async with gate:
                    response = await client.post("/chat/completions", json=body)
                response.raise_for_status()
                data: dict[str, Any] = response.json()
                return data

            return list(await asyncio.gather(*(send(b) for b in bodies)))

    return _measured(lambda: asyncio.run(main()))


def aiohttp_arm(url: str, bodies: list[dict[str, Any]]) -> list[Mapping[str, Any]] | None:
    """One ``aiohttp.ClientSession`` with 256 connections, 256 tasks at a time; None when aiohttp is absent."""
    try:
        import aiohttp
    except ImportError:
        return None

    async def main() -> list[Mapping[str, Any]]:
        connector = aiohttp.TCPConnector(limit=IN_FLIGHT)
        timeout = aiohttp.ClientTimeout(total=120.0)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            gate = asyncio.Semaphore(IN_FLIGHT)

            async def send(body: dict[str, Any]) -> Mapping[str, Any]:
                async with gate, session.post(url + "/chat/completions", data=json.dumps(body).encode(),
                                              headers={"Content-Type": "application/json"}) as response:
                    response.raise_for_status()
                    data: dict[str, Any] = json.loads(await response.read())
                    return data

            return list(await asyncio.gather(*(send(b) for b in bodies)))

    return _measured(lambda: asyncio.run(main()))


def http_client_threads(url: str, bodies: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
    """One keep-alive ``http.client.HTTPConnection`` per thread, 256 threads, the body written with ``json``."""
    parts = urlsplit(url)
    host, port, path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path + "/chat/completions"
    local = threading.local()

    def send(i: int) -> Mapping[str, Any]:
        connection = getattr(local, "connection", None)
        if connection is None:
            connection = local.connection = http.client.HTTPConnection(host, port, timeout=120.0)
        payload = json.dumps(bodies[i]).encode()
        connection.request("POST", path, payload, {"Content-Type": "application/json"})
        response = connection.getresponse()
        data: dict[str, Any] = json.loads(response.read())
        if response.status != 200:
            raise SystemExit(f"http.client: HTTP {response.status}")
        return data

    return _measured(lambda: _threads(len(bodies), send))


# What the last arm measured: set by _measured, read by measure().
_LAST: dict[str, float] = {}


def _measured(work: Callable[[], list[Mapping[str, Any]]]) -> list[Mapping[str, Any]]:
    """Run one arm's requests, keeping its wall and CPU seconds in :data:`_LAST` (setup is outside the clock)."""
    cpu, start = time.process_time(), time.perf_counter()
    replies = work()
    _LAST.update(seconds=time.perf_counter() - start, cpu_s=time.process_time() - cpu)
    return replies


def _has_client_option() -> bool:
    from prism.backends.openai_compat import OpenAIModelConfig

    return "client" in OpenAIModelConfig.__dataclass_fields__


def measure(n: int, delay_s: float, workdir: Path) -> list[tuple[str, float, float, int]]:
    """(arm, wall s, CPU s, most in flight at the stand-in) for every arm, in one run against one stand-in."""
    from benchmarks.stub_process import StubProcess

    results: list[tuple[str, float, float, int]] = []
    with StubProcess("openai", delay_s) as stub:
        bodies = _bodies(n, stub.model)
        arms: list[tuple[str, Callable[[], list[Mapping[str, Any]] | None]]] = [
            ("prism official", lambda: prism_backend(stub.url, stub.model, n)),
            ("openai bare", lambda: openai_bare(stub.url, bodies)),
            ("httpx sync, threads", lambda: httpx_sync(stub.url, bodies)),
            ("httpx async", lambda: httpx_async(stub.url, bodies)),
            ("aiohttp", lambda: aiohttp_arm(stub.url, bodies)),
            ("http.client, threads", lambda: http_client_threads(stub.url, bodies)),
        ]
        arms.append(("prism official, run path (store + log)",
                     lambda: prism_run_path(stub.url, stub.model, n, workdir)))
        if _has_client_option():
            arms.append(("prism client=http", lambda: prism_backend(stub.url, stub.model, n, "http")))
            arms.append(("prism client=http, run path (store + log)",
                         lambda: prism_run_path(stub.url, stub.model, n, workdir, "http")))
        for arm, call in arms:
            stub.reset()
            replies = call()
            if replies is None:
                continue
            _check(replies, n, arm)
            most, _ = stub.stats()
            results.append((arm, _LAST["seconds"], _LAST["cpu_s"], most))
    return results


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def run(ctx: Context) -> Section:
    """Every arm side by side: one table."""
    n, delay = (256, 0.05) if ctx.quick else (REQUESTS, DELAY_S)
    load_before = _load()
    results = measure(n, delay, ctx.workdir)
    load_after = _load()
    ideal = n * delay / IN_FLIGHT
    figures: dict[str, float] = {"requests": float(n), "delay_s": delay}
    rows = []
    for arm, seconds, cpu_s, most in results:
        key = "".join(c if c.isalnum() else "_" for c in arm).strip("_")
        ms = 1000 * cpu_s / n
        figures[f"{key}_cpu_ms"] = ms
        figures[f"{key}_seconds"] = seconds
        rows.append(f"| {arm} | {seconds:.2f} | {seconds / ideal:.2f} | {n / seconds:.0f} | {ms:.2f} | {most} |")
    body = [
        f"{n:,} distinct chat requests to one OpenAI-compatible stand-in answering after {delay:g} s, in a process "
        f"of its own, {IN_FLIGHT} in flight (ideal {ideal:.2f} s); the arms one after another in one process. CPU "
        f"is this process's user + system time per request (all its threads; the stand-in's excluded). Load "
        f"average (1, 5, 15 min) {load_before} before, {load_after} after.",
        "",
        "| arm | wall s | ratio to ideal | requests/s | client CPU ms/request | most in flight |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        *rows,
    ]
    return Section("Client CPU per request: the official client against lighter paths (issue 37)", COMMAND, body,
                   figures)


def main() -> None:
    """``python -m benchmarks.client_cpu [--quick]``: print the section."""
    quick = "--quick" in sys.argv[1:]
    with tempfile.TemporaryDirectory(prefix="prism-client-cpu-") as tmp:
        work = Path(tmp)
        print(run(Context(workdir=work, data_dir=work, quick=quick)).markdown(), flush=True)


if __name__ == "__main__":
    main()
