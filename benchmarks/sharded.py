"""20. One run across processes (issue 37): ``execution=ray`` against one process, and a two-node loopback cluster.

Part 1, stand-ins at 0.2 s per request (an OpenAI-compatible stub in a process of its own,
:mod:`benchmarks.stub_process`), 4,096 distinct requests: one process with 256 in flight
(``prism.run.inference.collect``: backend, store, response log, ``store.sync_interval_s=1``; both arms with
``model.client`` from ``PRISM_SHARDED_CLIENT``, default ``official``) against
:class:`prism.run.sharding.RayExecution` with 2 actors at 128 in flight each, fed by this process, which writes
every completion into the store and the log as a run does. Ray is a local instance (2 CPUs) started here; the
actors' start (model probe included) is before the clock. CPU per request is counted for this process, for the
actors (their processes' user + system time) and for Ray's own daemons (this process's other children).

Part 2, a two-node Ray cluster on loopback (``ray start --head`` and ``ray start --address``, one CPU each) and
one replay run of ``python -m prism`` (ARC-Challenge x the 21 robustness conditions x repetitions) with
``execution=ray execution.workers=2 execution.address=127.0.0.1:PORT``, against the same run local; the merged
store's count and content and the scored records are checked against the local run's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, Context, Section, run_timed
from benchmarks.concurrency import requests, timed_collect

COMMAND = "python -m benchmarks --only sharded"
REQUESTS = 4096
DELAY_S = 0.2
ONE_PROCESS_IN_FLIGHT = 256
WORKERS = 2
# ARC-Challenge questions x repetitions of the 21-condition robustness set for the cluster run:
# PRISM_SHARDED_SIZE=QxR (1164x4 = 97,776 cells; the default is scaled down for a loaded 2-core machine).
DEFAULT_SIZE = (476, 1)
VOLATILE = ("cached", "timestamp", "latency_s", "endpoint")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, user + system CPU seconds) of a process, from /proc (None once it is gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after the command name, which may hold spaces
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _ray_children_cpu(exclude: set[int]) -> float:
    """User + system CPU seconds of this process's descendants (Ray's daemons and workers), except ``exclude``."""
    parents = {pid: stat[0] for pid in _pids() if (stat := _stat(pid)) is not None}
    me, total = os.getpid(), 0.0
    for pid in parents:
        ancestor, seen = parents.get(pid), 0
        while ancestor not in (None, 0, 1, me) and seen < 64:
            ancestor, seen = parents.get(ancestor), seen + 1
        if ancestor == me and pid not in exclude and (stat := _stat(pid)) is not None:
            total += stat[1]
    return total


def _cpu_of(pids: list[int]) -> float:
    return sum(stat[1] for pid in pids if (stat := _stat(pid)) is not None)


def one_process(url: str, model: str, n: int, workdir: Path, client: str = "official") -> tuple[float, float]:
    """Wall and CPU seconds of ``n`` requests from this process at 256 in flight (``model.client=client``)."""
    from prism.backends.openai_compat import OpenAIModelConfig
    from prism.backends.registry import create_backend

    backend = create_backend(OpenAIModelConfig(name=model, base_url=url, concurrency=ONE_PROCESS_IN_FLIGHT,
                                               client=client))
    before = time.process_time()
    seconds = timed_collect(backend, n, workdir, sync_interval_s=1.0)
    return seconds, time.process_time() - before


def sharded(url: str, model: str, n: int, workdir: Path, stub_pid: int, client: str = "official") -> dict[str, float]:
    """Wall and CPU seconds (driver, actors, Ray's daemons) of ``n`` requests over 2 actors at 128 each."""
    import ray

    from prism.backends.openai_compat import OpenAIModelConfig
    from prism.backends.registry import create_backend
    from prism.config import ExecutionConfig
    from prism.run.inference import make_cells
    from prism.run.sharding import RayExecution
    from prism.run.store import CompletionStore, ResponseLog

    temp = tempfile.mkdtemp(prefix="ray-bench-")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=WORKERS, include_dashboard=False, _temp_dir=temp, logging_level=logging.WARNING,
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})
    workdir.mkdir(parents=True, exist_ok=True)
    store = CompletionStore(workdir / "store.sqlite", 1.0)
    response_log = ResponseLog(workdir / "responses.jsonl", 1.0)
    model_cfg = OpenAIModelConfig(name=model, base_url=url, concurrency=ONE_PROCESS_IN_FLIGHT // WORKERS,
                                  client=client)
    probe = create_backend(model_cfg)
    identity = probe.identity()
    probe.close()
    executor = RayExecution.launch(ExecutionConfig(kind="ray", workers=WORKERS, batch=64), model_cfg,
                                   workdir / "shards", 1.0, identity, store)
    try:
        actors = [w.pid for w in executor.workers]
        cells = make_cells(requests(n), identity, "bench", "test")
        cpu0, actors0 = time.process_time(), _cpu_of(actors)
        ray0 = _ray_children_cpu({stub_pid, *actors})
        start = time.perf_counter()
        records = list(executor.ask_each(identity, cells, response_log, store, None))
        seconds = time.perf_counter() - start
        driver = time.process_time() - cpu0
        actors_cpu = _cpu_of(actors) - actors0
        daemons = _ray_children_cpu({stub_pid, *actors}) - ray0
    finally:
        executor.close()
        response_log.close()
        stored = store.count()
        store.close()
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
    failed = [r for r in records if r.error]
    if len(records) != n or failed or stored != n:
        raise SystemExit(f"expected {n} completions, got {len(records)} ({len(failed)} failed, {stored} stored)")
    return {"seconds": seconds, "driver_cpu_s": driver, "actors_cpu_s": actors_cpu, "ray_cpu_s": daemons}


def part_one(ctx: Context) -> tuple[list[str], dict[str, float]]:
    """The stand-in comparison: one table."""
    from benchmarks.stub_process import StubProcess

    n, delay = (256, 0.05) if ctx.quick else (REQUESTS, DELAY_S)
    client = os.environ.get("PRISM_SHARDED_CLIENT", "official")  # model.client of both arms
    ideal = n * delay / ONE_PROCESS_IN_FLIGHT
    with StubProcess("openai", delay) as stub:
        assert stub._proc is not None
        stub.reset()
        one_s, one_cpu = one_process(stub.url, stub.model, n, ctx.workdir / "one", client)
        stub.reset()
        ray_m = sharded(stub.url, stub.model, n, ctx.workdir / "ray", stub._proc.pid, client)
    ray_cpu = ray_m["driver_cpu_s"] + ray_m["actors_cpu_s"] + ray_m["ray_cpu_s"]
    figures = {"requests": float(n), "delay_s": delay, "one_s": one_s, "one_cpu_ms": 1000 * one_cpu / n,
               "ray_s": ray_m["seconds"], "ray_driver_cpu_ms": 1000 * ray_m["driver_cpu_s"] / n,
               "ray_actors_cpu_ms": 1000 * ray_m["actors_cpu_s"] / n,
               "ray_daemons_cpu_ms": 1000 * ray_m["ray_cpu_s"] / n,
               "ray_total_cpu_ms": 1000 * ray_cpu / n}
    body = [
        f"{n:,} distinct requests to one OpenAI-compatible stand-in answering after {delay:g} s, in a process of "
        f"its own, `model.client={client}`; {ONE_PROCESS_IN_FLIGHT} in flight in all on both sides, so the ideal is "
        f"{ideal:.2f} s. CPU is "
        "user + system seconds per request, by process.",
        "",
        "| arm | wall s | ratio to ideal | requests/s | CPU ms/request: driver | actors | Ray daemons | total |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| one process, {ONE_PROCESS_IN_FLIGHT} in flight | {one_s:.2f} | {one_s / ideal:.2f} | {n / one_s:.0f} | "
        f"{figures['one_cpu_ms']:.2f} | - | - | {figures['one_cpu_ms']:.2f} |",
        f"| execution=ray, {WORKERS} actors x {ONE_PROCESS_IN_FLIGHT // WORKERS} | {ray_m['seconds']:.2f} | "
        f"{ray_m['seconds'] / ideal:.2f} | {n / ray_m['seconds']:.0f} | {figures['ray_driver_cpu_ms']:.2f} | "
        f"{figures['ray_actors_cpu_ms']:.2f} | {figures['ray_daemons_cpu_ms']:.2f} | "
        f"{figures['ray_total_cpu_ms']:.2f} |",
    ]
    return body, figures


def _ray_cli() -> str:
    return str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _end_cluster(temp: str, gcs: str) -> None:
    """End the processes of the cluster this benchmark started, and every process they started.

    The daemons' command lines name its temp dir or its GCS address; Ray's agents rename themselves
    (``ray::DashboardAgent``), so they are found as the daemons' children.
    """
    import signal

    parents = {pid: stat[0] for pid in _pids() if (stat := _stat(pid)) is not None}
    ours: set[int] = set()
    for pid in parents:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if (temp in cmdline or f"{gcs}\x00" in cmdline or f"={gcs}" in cmdline) and pid != os.getpid():
            ours.add(pid)
    grew = True
    while grew:  # and their descendants
        more = {pid for pid, parent in parents.items() if parent in ours and pid not in ours and pid != os.getpid()}
        ours |= more
        grew = bool(more)
    for pid in ours:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _store_content(path: Path) -> dict[str, str]:
    import json

    db = sqlite3.connect(path)
    try:
        return {key: json.dumps({k: v for k, v in json.loads(record).items() if k not in VOLATILE}, sort_keys=True)
                for key, record in db.execute("SELECT key, record FROM completions")}
    finally:
        db.close()


def part_two(ctx: Context) -> tuple[list[str], dict[str, float]]:
    """The two-node loopback cluster against a local run of the same replay experiment."""
    from benchmarks.run_scale import SYNC, Setup, _counts, _prism, compare_records, condition_set, write_replay
    from prism.questions import freeze_question_set

    raw = os.environ.get("PRISM_SHARDED_SIZE")
    n, repetitions = (20, 1) if ctx.quick else (tuple(int(x) for x in raw.split("x")) if raw else DEFAULT_SIZE)
    work = ctx.workdir / "cluster"
    work.mkdir(parents=True, exist_ok=True)
    conditions = condition_set()
    frozen = freeze_question_set("arc_challenge", "test", n, 0, ctx.data_dir, work / "frozen")
    replay = work / "replay.jsonl"
    cells = write_replay(replay, list(frozen.questions), conditions, repetitions)
    setup = Setup(work, replay, ctx.data_dir, n, repetitions)
    temp = tempfile.mkdtemp(prefix="ray-2n-")
    port = _free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(REPO)}
    try:
        common = ["--num-cpus=1", "--disable-usage-stats"]
        for command in ([_ray_cli(), "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                         "--include-dashboard=false", f"--temp-dir={temp}", *common],
                        [_ray_cli(), "start", f"--address=127.0.0.1:{port}", "--node-ip-address=127.0.0.1", *common]):
            started = subprocess.run(command, env=env, text=True, capture_output=True, timeout=300)
            if started.returncode != 0:
                raise SystemExit(f"{' '.join(command)} failed ({started.returncode}):\n{started.stdout[-2000:]}\n"
                                 f"{started.stderr[-2000:]}")
        local = run_timed(_prism(setup, work / "local.sqlite", "local", SYNC), cwd=work)
        clustered = run_timed(_prism(setup, work / "ray.sqlite", "ray", SYNC, "execution=ray",
                                     f"execution.workers={WORKERS}", f"execution.address=127.0.0.1:{port}",
                                     "execution.batch=256"), env=env, cwd=work)
        nodes = subprocess.run([_ray_cli(), "status", f"--address=127.0.0.1:{port}"], env=env, text=True,
                               capture_output=True, timeout=120).stdout
    finally:
        _end_cluster(temp, f"127.0.0.1:{port}")
        shutil.rmtree(temp, ignore_errors=True)
    for name, timed in (("local", local), ("ray", clustered)):
        if _counts(timed.stdout) != (0, cells):
            raise SystemExit(f"{name}: expected {cells} cells asked, got {_counts(timed.stdout)}")
    local_store, ray_store = _store_content(work / "local.sqlite"), _store_content(work / "ray.sqlite")
    same_store = local_store == ray_store
    same, _, other = compare_records(work / "runs" / "local" / "results" / "scored.jsonl",
                                     work / "runs" / "ray" / "results" / "scored.jsonl", VOLATILE)
    if not same_store or other:
        raise SystemExit(f"the cluster run differs from the local run: store equal {same_store}, {other} scored "
                         "records differ")
    shards_left = len(list((work / "ray.sqlite.shards").glob("*.sqlite")))
    n_nodes = nodes.count("node_")
    figures = {"cells": float(cells), "local_s": local.seconds, "ray_s": clustered.seconds,
               "local_cells_per_s": cells / local.seconds, "ray_cells_per_s": cells / clustered.seconds,
               "local_cpu_s": local.cpu_seconds, "ray_driver_cpu_s": clustered.cpu_seconds,
               "store_rows": float(len(ray_store)), "scored_identical": float(same), "shards_left": float(shards_left)}
    body = [
        f"`ray start --head --port={port} --num-cpus=1` and `ray start --address=127.0.0.1:{port} --num-cpus=1` on "
        f"this machine ({n_nodes} nodes in `ray status`), then one replay run of {cells:,} cells "
        f"({n} ARC-Challenge questions x 21 robustness conditions x {repetitions}), `{SYNC}`, local and with "
        f"`execution=ray execution.workers={WORKERS} execution.address=127.0.0.1:{port} execution.batch=256`. "
        "Wall from spawn to exit of `python -m prism` (start-up, MLflow and scoring included); CPU is the "
        "`python -m prism` process's (the cluster's processes are not its children).",
        "",
        "| run | wall s | cells/s | CPU s (python -m prism) |",
        "| --- | ---: | ---: | ---: |",
        f"| local | {local.seconds:.1f} | {cells / local.seconds:.0f} | {local.cpu_seconds:.1f} |",
        f"| two-node cluster | {clustered.seconds:.1f} | {cells / clustered.seconds:.0f} | "
        f"{clustered.cpu_seconds:.1f} |",
        "",
        f"Merged store: {len(ray_store):,} completions, the same keys and the same records (apart from "
        f"{', '.join(VOLATILE)}) as the local run's {len(local_store):,}; {same:,} scored records identical apart "
        f"from those fields, none different; {shards_left} shard files left after the run.",
    ]
    return body, figures


def run(ctx: Context) -> Section:
    """Both parts, one section."""
    body_one, figures_one = part_one(ctx)
    body_two, figures_two = part_two(ctx)
    figures: dict[str, Any] = {**{f"standin_{k}": v for k, v in figures_one.items()},
                               **{f"cluster_{k}": v for k, v in figures_two.items()}}
    body = ["**Stand-ins: one process against execution=ray.**", "", *body_one, "",
            "**A two-node loopback cluster: one replay run.**", "", *body_two]
    return Section("One run across processes: execution=ray (issue 37)", COMMAND, body, figures)
