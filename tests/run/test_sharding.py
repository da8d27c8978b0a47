"""execution=ray: one run's cells on Ray actors, merged into one store, one responses.jsonl and one MLflow run.

Every test shares one local Ray instance (a start costs seconds), started in this process with this checkout on
the workers' PYTHONPATH, so the actors import the prism under test. Runs that are killed go through
``python -m prism`` in a child process, which starts a Ray instance of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO_ROOT, compose_config, run_overrides

from prism.names import TAG_EXECUTION
from prism.questions import freeze_question_set
from prism.run.pipeline import run
from prism.run.sharding import ExecutionError, merge_shards
from prism.run.store import CompletionStore

ray = pytest.importorskip("ray", reason="execution=ray needs the ray extra: pip install -e '.[ray]'")

pytestmark = pytest.mark.scaleout

CONDITIONS = ("P0", "P1", "P2", "P3", "P4")
# What may differ between a local and a sharded run's records of one cell: when and how fast it was answered,
# whether it came from the store, and which server answered it.
VOLATILE = ("cached", "timestamp", "latency_s", "endpoint")


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[None]:
    """One local Ray instance (2 CPUs) for the module; the workers import this checkout's prism."""
    # Ray's unix sockets live under its temp dir and their paths must stay under ~107 bytes.
    temp = tempfile.mkdtemp(prefix="ray-")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=temp, logging_level="WARNING",
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO_ROOT)}})
    try:
        yield
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


def replay_file(workdir: Path, data_dir: Path, n: int, answer: str = "B") -> Path:
    """A replay file answering every cell of the first ``n`` frozen questions (one cell fails, as evidence)."""
    frozen = freeze_question_set("arc_challenge", "test", n, 0, data_dir, workdir / "frozen")
    lines = []
    for q in frozen.questions:
        for c in CONDITIONS:
            line: dict[str, Any] = {"question_id": q.question_id, "condition": c}
            if q is frozen.questions[-1] and c == "P4":
                line["error"] = "connection reset"
            else:
                line["response"] = f"The answer is {q.answer if c != 'P2' else answer}"
            lines.append(line)
    path = workdir / "replay.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def stable(path: Path) -> list[dict[str, Any]]:
    """A JSONL file's records without the fields that may differ between two runs of one cell, sorted."""
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return sorted(({k: v for k, v in r.items() if k not in VOLATILE} for r in records),
                  key=lambda r: json.dumps(r, sort_keys=True))


def store_rows(path: Path) -> dict[str, str]:
    """key -> stored record text of every completion in a store."""
    db = sqlite3.connect(path)
    try:
        return dict(db.execute("SELECT key, record FROM completions"))
    finally:
        db.close()


def strip_volatile(record_text: str) -> dict[str, Any]:
    return {k: v for k, v in json.loads(record_text).items() if k not in VOLATILE}


def test_sharded_replay_run_equals_the_local_run(ray_instance: None, workdir: Path, data_dir: Path) -> None:
    import mlflow

    replay = replay_file(workdir, data_dir, 6)
    base = [*run_overrides(workdir, data_dir), "model=replay", f"model.path={replay}", "model.name=scripted",
            "dataset.n=6"]
    local = run(compose_config([*base, f"store.path={workdir}/local.sqlite"]), output_dir=workdir / "local")
    sharded = run(compose_config([*base, f"store.path={workdir}/ray.sqlite", "execution=ray",
                                  "execution.workers=2", "execution.batch=4"]), output_dir=workdir / "ray")
    assert (sharded.n_fresh, sharded.n_cached) == (local.n_fresh, local.n_cached) == (30, 0)
    # The same raw and scored records, apart from the volatile fields.
    for name in ("responses/responses.jsonl", "results/scored.jsonl"):
        assert stable(workdir / "ray" / name) == stable(workdir / "local" / name), name
    assert sharded.metrics == local.metrics
    # The merged store holds what the local store holds (the failed cell in neither), and no shard is left.
    local_rows, ray_rows = store_rows(workdir / "local.sqlite"), store_rows(workdir / "ray.sqlite")
    assert len(ray_rows) == 29
    assert {k: strip_volatile(v) for k, v in ray_rows.items()} == {k: strip_volatile(v) for k, v in local_rows.items()}
    assert not list((workdir / "ray.sqlite.shards").glob("*.sqlite"))
    # One MLflow run each, with the same params and artifacts; the sharded one says how it ran.
    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    ran_local, ran_ray = client.get_run(local.run_id), client.get_run(sharded.run_id)
    assert ran_ray.info.status == "FINISHED"
    # Only the store path differs (each run has its own store here); execution is not a param.
    assert ran_ray.data.params.pop("store.path") != ran_local.data.params.pop("store.path")
    assert ran_ray.data.params == ran_local.data.params
    assert ran_ray.data.tags[TAG_EXECUTION] == "ray workers=2 address=local"
    assert TAG_EXECUTION not in ran_local.data.tags

    def artifacts(run_id: str) -> list[str]:
        return sorted(f"{d.path}/{f.path.split('/')[-1]}" for d in client.list_artifacts(run_id)
                      for f in client.list_artifacts(run_id, d.path))

    assert artifacts(sharded.run_id) == artifacts(local.run_id)
    # A rerun, sharded, asks nothing: every cell but the failed one comes from the merged store.
    again = run(compose_config([*base, f"store.path={workdir}/ray.sqlite", "execution=ray"]),
                output_dir=workdir / "again")
    assert (again.n_cached, again.n_fresh) == (29, 1)


@pytest.mark.model
def test_sharded_smollm2_run_equals_the_local_run(ray_instance: None, workdir: Path, data_dir: Path) -> None:
    # The embedded model, loaded once per actor (2 actors, one thread each), against this process alone.
    base = [*run_overrides(workdir, data_dir), "dataset.n=3", "model.n_threads=1"]
    local = run(compose_config([*base, f"store.path={workdir}/local.sqlite"]), output_dir=workdir / "local")
    sharded = run(compose_config([*base, f"store.path={workdir}/ray.sqlite", "execution=ray", "execution.batch=2"]),
                  output_dir=workdir / "ray")
    assert (sharded.n_fresh, local.n_fresh) == (15, 15)
    for name in ("responses/responses.jsonl", "results/scored.jsonl"):
        assert stable(workdir / "ray" / name) == stable(workdir / "local" / name), name
    assert {k: v for k, v in sharded.metrics.items()} == pytest.approx(local.metrics, nan_ok=True)
    ray_rows = store_rows(workdir / "ray.sqlite")
    assert {k: strip_volatile(v) for k, v in ray_rows.items()} == {
        k: strip_volatile(v) for k, v in store_rows(workdir / "local.sqlite").items()}
    assert len(ray_rows) == 15


def test_each_actor_owns_a_shard_that_is_merged_once(workdir: Path) -> None:
    # Two shards holding one common cell and one each: the store gets three completions, and the shards go.
    from prism.run.store import CompletionStore as Store

    shards = workdir / "store.sqlite.shards"
    shards.mkdir()
    for name, keys in (("a-w0", ["k1", "k2"]), ("a-w1", ["k2", "k3"])):
        shard = Store(shards / f"{name}.sqlite")
        for key in keys:
            shard.put(key, backend="replay", digest="d", prompt_sha256="p", generation={}, repetition=0,
                      record={"response": key}, run_id="r", created_at="t")
        shard.close()
    store = CompletionStore(workdir / "store.sqlite")
    try:
        assert merge_shards(store, shards) == 3
        assert store.count() == 3
        assert merge_shards(store, shards) == 0
    finally:
        store.close()
    assert not list(shards.iterdir())


def test_unreachable_address_is_a_clear_error_before_any_request(workdir: Path, data_dir: Path) -> None:
    # A process of its own: this module's Ray instance would otherwise be reused.
    from backends.llama_server import free_port

    replay = replay_file(workdir, data_dir, 2)
    port = free_port()
    done = subprocess.run(prism_command(workdir, data_dir, "model=replay", f"model.path={replay}", "dataset.n=2",
                                        f"execution.address=127.0.0.1:{port}", f"hydra.run.dir={workdir}/out"),
                          cwd=workdir, env=child_env(), text=True, capture_output=True, timeout=300)
    assert done.returncode != 0
    assert f"execution.address=127.0.0.1:{port}: no Ray cluster answers there" in done.stderr
    assert f"ray start --head --port={port}" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (workdir / "out" / "responses").exists()  # nothing asked


def test_a_worker_that_cannot_load_the_model_stops_the_run_before_inference(ray_instance: None, workdir: Path,
                                                                             data_dir: Path) -> None:
    # The driver's replay file exists; on the workers model.path names a file they do not have.
    replay = replay_file(workdir, data_dir, 2)
    cfg = compose_config([*run_overrides(workdir, data_dir), "model=replay", f"model.path={replay}", "dataset.n=2",
                          "execution=ray"])
    cfg.execution.start_timeout_s = 60
    moved = replay.with_name("elsewhere.jsonl")

    import prism.run.sharding as sharding

    original = sharding.actor_model

    def missing_on_workers(model: Any, index: int, workers: int) -> Any:
        from dataclasses import replace

        return replace(original(model, index, workers), path=str(moved))

    sharding.actor_model = missing_on_workers
    try:
        with pytest.raises(ExecutionError, match=r"Ray worker \d could not start its backend .*does not exist"):
            run(cfg, output_dir=workdir / "out")
    finally:
        sharding.actor_model = original
    assert not (workdir / "out" / "responses").exists()


def test_a_worker_whose_shard_cannot_be_written_stops_the_run_before_inference(ray_instance: None, workdir: Path,
                                                                                data_dir: Path) -> None:
    replay = replay_file(workdir, data_dir, 2)
    blocked = workdir / "not-a-dir"
    blocked.write_text("a file where the shard directory should be")
    cfg = compose_config([*run_overrides(workdir, data_dir), "model=replay", f"model.path={replay}", "dataset.n=2",
                          "execution=ray", f"execution.shard_dir={blocked}"])
    with pytest.raises(ExecutionError, match=r"Ray worker \d could not start its backend or its shard store"):
        run(cfg, output_dir=workdir / "out")
    assert not (workdir / "out" / "responses").exists()


def test_resources_no_node_has_are_a_clear_error(ray_instance: None, workdir: Path, data_dir: Path) -> None:
    replay = replay_file(workdir, data_dir, 2)
    cfg = compose_config([*run_overrides(workdir, data_dir), "model=replay", f"model.path={replay}", "dataset.n=2",
                          "execution=ray", "+execution.resources={ollama: 1}", "execution.start_timeout_s=3"])
    with pytest.raises(ExecutionError, match=r"did not start within execution.start_timeout_s=3.*'ollama': 1"):
        run(cfg, output_dir=workdir / "out")


@pytest.mark.parametrize(("override", "message"), [
    ("execution.workers=0", "execution.workers=0 cannot be used"),
    ("execution.kind=slurm", "execution.kind='slurm' is not known; use one of: local, ray"),
    ("execution.batch=0", "execution.batch=0 cannot be used"),
])
def test_bad_execution_settings_are_refused_by_name(workdir: Path, data_dir: Path, override: str,
                                                    message: str) -> None:
    from prism.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        compose_config([*run_overrides(workdir, data_dir), "execution=ray", override])


# --- faults: SIGKILL mid-run ----------------------------------------------------------------------------------


def prism_command(workdir: Path, data_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "prism", *run_overrides(workdir, data_dir), "execution=ray", *extra]


def child_env() -> dict[str, str]:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(REPO_ROOT)}
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def stored(path: Path) -> int:
    if not path.exists():
        return 0
    db = sqlite3.connect(path, timeout=30)
    try:
        (n,) = db.execute("SELECT COUNT(*) FROM completions").fetchone()
        return int(n)
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()


def in_shards(directory: Path) -> int:
    return sum(stored(p) for p in directory.glob("*.sqlite"))


def store_keys(path: Path) -> set[str]:
    if not path.exists():
        return set()
    db = sqlite3.connect(path, timeout=30)
    try:
        return {key for (key,) in db.execute("SELECT key FROM completions")}
    except sqlite3.OperationalError:  # a store being created this moment has no table yet
        return set()
    finally:
        db.close()


def answered_anywhere(workdir: Path) -> set[str]:
    """The keys the run's store and every shard left on disk hold."""
    keys = store_keys(workdir / "store.sqlite")
    for shard in (workdir / "store.sqlite.shards").glob("*.sqlite"):
        keys |= store_keys(shard)
    return keys


ASKING = re.compile(r"(\d+) responses from the store, (\d+) new\.")
N_FAULT = 16  # 80 cells


@pytest.fixture
def slow_server() -> Iterator[Any]:
    """An OpenAI-compatible stand-in at 0.1 s a request, in a process of its own."""
    from backends.standin_process import StandIn

    with StandIn("openai", delay_s=0.1) as server:
        yield server


def fault_command(workdir: Path, data_dir: Path, server: Any, out: str) -> list[str]:
    ray_temp = tempfile.mkdtemp(prefix="ray-")  # a short path for Ray's sockets (and its own instance)
    return prism_command(workdir, data_dir, "model=openai", f"model.base_url={server.url}", "model.name=stub-model",
                         "model.concurrency=2", f"dataset.n={N_FAULT}", "execution.batch=2",
                         f"+execution.init={{num_cpus:2,_temp_dir:{ray_temp}}}", f"hydra.run.dir={workdir}/{out}")


def wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def rerun_asks_only_the_missing(workdir: Path, data_dir: Path, server: Any, record_property: Any) -> None:
    """After a kill: the same command asks for exactly the cells neither the store nor a shard holds."""
    from prism.run.sharding import _held

    # A killed driver's actors die with its job a moment later (answering into their shards until then).
    wait_for(lambda: not any(_held(p) for p in (workdir / "store.sqlite.shards").glob("*.sqlite")), 120,
             "the actors of the killed run to end")
    held = answered_anywhere(workdir)
    total = N_FAULT * len(CONDITIONS)
    assert 0 < len(held) < total
    done = subprocess.run(fault_command(workdir, data_dir, server, "again"), cwd=workdir, env=child_env(), text=True,
                          capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    found = ASKING.search(done.stdout)
    assert found is not None, done.stdout[-4000:]
    from_store, asked = map(int, found.groups())
    assert (from_store, asked) == (len(held), total - len(held))
    record_property("cells", total)
    record_property("held_after_kill", len(held))
    record_property("asked_again", asked)
    assert len(store_keys(workdir / "store.sqlite")) == total
    assert not list((workdir / "store.sqlite.shards").glob("*.sqlite"))  # merged, then removed
    responses = (workdir / "again" / "responses" / "responses.jsonl").read_text().splitlines()
    assert len(responses) == total
    record_property("lost", total - len(store_keys(workdir / "store.sqlite")))


def test_sigkill_of_the_driver_loses_nothing_and_the_rerun_asks_only_the_missing(
        workdir: Path, data_dir: Path, slow_server: Any, record_property: Any) -> None:
    driver = subprocess.Popen(fault_command(workdir, data_dir, slow_server, "killed"), cwd=workdir, env=child_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: len(answered_anywhere(workdir)) >= 10 or driver.poll() is not None, 300, "10 answers")
        assert driver.poll() is None, "the run ended before it could be killed"
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
        kill_ray_left_by(driver.pid)
    rerun_asks_only_the_missing(workdir, data_dir, slow_server, record_property)


def test_sigkill_of_an_actor_fails_the_run_clearly_and_the_rerun_asks_only_the_missing(
        workdir: Path, data_dir: Path, slow_server: Any, record_property: Any) -> None:
    log_path = workdir / "driver.log"
    with log_path.open("w") as log_file:
        driver = subprocess.Popen(fault_command(workdir, data_dir, slow_server, "killed"), cwd=workdir,
                                  env=child_env(), stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for(lambda: "worker(s) ready" in log_path.read_text() or driver.poll() is not None, 300,
                     "the workers to start")
            ready = re.search(r"worker 1 \(pid (\d+) on", log_path.read_text())
            assert ready is not None, log_path.read_text()[-3000:]
            wait_for(lambda: len(answered_anywhere(workdir)) >= 10 or driver.poll() is not None, 300, "10 answers")
            os.kill(int(ready.group(1)), signal.SIGKILL)
            code = driver.wait(timeout=300)
        finally:
            if driver.poll() is None:
                driver.kill()
            kill_ray_left_by(driver.pid)
    output = log_path.read_text()
    assert code != 0, output[-3000:]
    assert re.search(r"worker 1 \(pid \d+ on \S+\) died mid-run", output), output[-3000:]
    assert "run the same command again and it asks only for the cells no shard holds" in output
    rerun_asks_only_the_missing(workdir, data_dir, slow_server, record_property)


def kill_ray_left_by(pid: int) -> None:
    """End the Ray processes the killed driver started (its session: start_new_session), if any outlive it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
