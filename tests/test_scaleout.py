"""Scaling out on existing engines: joblib and Ray sweeps, and a shared mlflow server on PostgreSQL.

Every sweep runs ``python -m prism -m`` as a person types it, through the replay backend, so what is
under test is the launcher, the shared completion store and the tracking store, not a model.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_overrides
from scaleout_services import (
    SKIP_ENV,
    MlflowServer,
    Postgres,
    postgres_bindir,
    running_mlflow_server,
    running_postgres,
)

from prism.questions import freeze_question_set

pytestmark = pytest.mark.scaleout

CONDITIONS = ("P0", "P1", "P2", "P3", "P4")
N = 3


def replay_file(workdir: Path, data_dir: Path, answer: str) -> Path:
    """A replay file that answers ``answer`` to every cell of the first N frozen questions."""
    frozen = freeze_question_set("arc_challenge", "test", N, 0, data_dir, workdir / "frozen")
    path = workdir / f"replay-{answer}.jsonl"
    path.write_text("".join(json.dumps({"question_id": q.question_id, "condition": c, "response": answer}) + "\n"
                            for q in frozen.questions for c in CONDITIONS))
    return path


def sweep(workdir: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """``python -m prism -m ARGS`` in ``workdir``; stdout and stderr together, since workers print to either."""
    # Ray would try to report usage statistics to its servers; this machine has no network for that.
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([sys.executable, "-m", "prism", "-m", *args], cwd=workdir, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)


def sweep_runs(tracking_uri: str, sweep_dir: Path) -> list:
    """The ``prism.kind=run`` runs of one sweep, in experiment ``prism``."""
    import mlflow

    client = mlflow.tracking.MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("prism")
    assert experiment is not None
    return client.search_runs([experiment.experiment_id],
                              filter_string=f"tags.`prism.sweep` = '{sweep_dir}' and tags.`prism.kind` = 'run'")


def store_rows(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        (count,) = db.execute("SELECT COUNT(*) FROM completions").fetchone()
        return int(count)
    finally:
        db.close()


def test_joblib_sweep_runs_jobs_in_parallel_each_its_own_run_sharing_one_store(workdir: Path, data_dir: Path) -> None:
    # Both jobs answer from one replay file, so they race for the same 15 store keys on a store (and an
    # MLflow SQLite database) that neither has created yet: the first use of both must be safe.
    replay = replay_file(workdir, data_dir, "B")
    sweep_dir = workdir / "multirun"
    done = sweep(workdir, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", *run_overrides(workdir, data_dir),
                 "model=replay", f"model.path={replay}", "model.name=alpha,beta", f"dataset.n={N}",
                 f"hydra.sweep.dir={sweep_dir}")
    assert done.returncode == 0, done.stdout[-4000:]
    assert "Joblib.Parallel(n_jobs=2" in done.stdout
    runs = sweep_runs(f"sqlite:///{workdir}/mlflow.db", sweep_dir)
    assert sorted(r.data.params["model.name"] for r in runs) == ["alpha", "beta"]
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert [r.data.metrics["n_responses"] for r in runs] == [N * len(CONDITIONS)] * 2
    assert store_rows(workdir / "store.sqlite") == N * len(CONDITIONS)  # first answer wins, nothing doubled


def test_ray_sweep_runs_each_job_on_a_local_ray_worker_resolving_config_there(workdir: Path, data_dir: Path) -> None:
    replay = replay_file(workdir, data_dir, "B")
    sweep_dir = workdir / "multirun"
    # Ray keeps unix sockets under its temp dir, and their paths must stay under ~107 bytes: pytest's
    # tmp_path is too deep, so a short directory in /tmp, removed after.
    ray_tmp = tempfile.mkdtemp(prefix="ray-")
    try:
        # model.path comes from an environment variable that only the Ray workers have: the config is
        # resolved on the worker, which is how each node of a cluster names its own model server.
        done = sweep(workdir, "hydra/launcher=ray", "+hydra.launcher.ray.init.num_cpus=2",
                     "+hydra.launcher.ray.init.include_dashboard=false",
                     f"+hydra.launcher.ray.init._temp_dir={ray_tmp}",
                     f"+hydra.launcher.ray.remote.runtime_env={{env_vars:{{PRISM_NODE_REPLAY:'{replay}'}}}}",
                     *run_overrides(workdir, data_dir), "model=replay", "model.path=${oc.env:PRISM_NODE_REPLAY}",
                     "model.name=alpha,beta", f"dataset.n={N}", f"hydra.sweep.dir={sweep_dir}")
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert done.returncode == 0, done.stdout[-4000:]
    assert "Ray Launcher is launching 2 jobs" in done.stdout
    assert "(_run_job pid=" in done.stdout  # Ray's prefix on what a worker printed: the jobs ran on workers
    runs = sweep_runs(f"sqlite:///{workdir}/mlflow.db", sweep_dir)
    assert sorted(r.data.params["model.name"] for r in runs) == ["alpha", "beta"]
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert {r.data.params["model.path"] for r in runs} == {str(replay)}
    assert store_rows(workdir / "store.sqlite") == N * len(CONDITIONS)


# --- a shared tracking server ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A real PostgreSQL on a free loopback port, for the whole session."""
    if postgres_bindir() is None and os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"PostgreSQL is not installed and {SKIP_ENV}=1")
    with running_postgres() as server:
        yield server


@pytest.fixture(scope="session")
def mlflow_server(postgres: Postgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    """``mlflow server`` with its backend store in PostgreSQL and a served artifact root."""
    postgres.create_database("mlflow")
    with running_mlflow_server(postgres.url("mlflow"), tmp_path_factory.mktemp("mlflow-server")) as server:
        yield server


def model_config(conf: Path, name: str, replay: Path) -> None:
    """A model config file of the team's own, found through ``hydra.searchpath``."""
    (conf / "model").mkdir(parents=True, exist_ok=True)
    (conf / "model" / f"{name}.yaml").write_text(
        f"defaults:\n  - /schema/model/replay@_here_\n  - _self_\nname: {name}\nbackend: replay\npath: {replay}\n")


def test_parallel_sweep_logs_to_a_postgresql_backed_server_and_compare_reads_it_back(
    postgres: Postgres, mlflow_server: MlflowServer, workdir: Path, data_dir: Path
) -> None:
    conf = workdir / "team-conf"
    model_config(conf, "alpha", replay_file(workdir, data_dir, "B"))
    model_config(conf, "beta", replay_file(workdir, data_dir, "C"))
    sweep_dir = workdir / "multirun"
    done = sweep(workdir, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"hydra.searchpath=[file://{conf}]",
                 "tracking=server", f"tracking.uri={mlflow_server.uri}", f"store.path={workdir}/store.sqlite",
                 f"dataset.data_dir={data_dir}", f"dataset.cache_dir={workdir}/frozen", "model=alpha,beta",
                 f"dataset.n={N}", f"hydra.sweep.dir={sweep_dir}")
    assert done.returncode == 0, done.stdout[-4000:]
    assert f"Open it: {mlflow_server.uri}/#/experiments/" in done.stdout  # the server's own UI, not `mlflow ui`

    compared = subprocess.run(
        [sys.executable, "-m", "prism.compare", "tracking=server", f"tracking.uri={mlflow_server.uri}",
         f"filters.sweep={sweep_dir}", "bootstrap=50", f"hydra.run.dir={workdir}/compare"],
        cwd=workdir, text=True, capture_output=True, timeout=600,
        env={k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
    )
    assert compared.returncode == 0, compared.stderr[-4000:]
    assert "alpha" in compared.stdout and "beta" in compared.stdout

    import mlflow

    runs = sweep_runs(mlflow_server.uri, sweep_dir)
    by_model = {r.data.params["model.name"]: r for r in runs}
    assert sorted(by_model) == ["alpha", "beta"]
    for model, answer in (("alpha", "B"), ("beta", "C")):
        run = by_model[model]
        assert run.info.status == "FINISHED"
        assert run.data.metrics["n_responses"] == N * len(CONDITIONS)
        assert {"accuracy", "answer_recovery_rate", "mean_agreement"} <= set(run.data.metrics)
        scored = mlflow.artifacts.download_artifacts(run_id=run.info.run_id, artifact_path="results/scored.jsonl",
                                                     dst_path=str(workdir / "read-back" / model),
                                                     tracking_uri=mlflow_server.uri)
        records = [json.loads(line) for line in Path(scored).read_text().splitlines()]
        assert len(records) == N * len(CONDITIONS) and {r["response"] for r in records} == {answer}
        # The server proxied the upload into its artifact root: the file is there, not in the client's cwd.
        assert list(mlflow_server.artifacts.glob(f"*/{run.info.run_id}/artifacts/results/scored.jsonl"))

    client = mlflow.tracking.MlflowClient(mlflow_server.uri)
    experiment = client.get_experiment_by_name("prism")
    assert experiment is not None
    comparisons = client.search_runs([experiment.experiment_id],
                                     filter_string=f"tags.`prism.sweep` = '{sweep_dir}' and "
                                                   "tags.`prism.kind` = 'comparison'")
    assert len(comparisons) == 1 and comparisons[0].info.status == "FINISHED"
    assert set(comparisons[0].data.tags["prism.compared_runs"].split(",")) == {r.info.run_id for r in runs}

    # The results site builds from the server too, and its run pages link each run on the server.
    published = subprocess.run(
        [sys.executable, "-m", "prism.publish", "tracking=server", f"tracking.uri={mlflow_server.uri}",
         f"filters.sweep={sweep_dir}", "bootstrap=50", f"publish.out={workdir / 'site'}",
         f"hydra.run.dir={workdir / 'publish'}"],
        cwd=workdir, text=True, capture_output=True, timeout=600,
        env={k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
    )
    assert published.returncode == 0, published.stderr[-4000:]
    for run in runs:
        page = (workdir / "site" / "runs" / f"{run.info.run_id}.html").read_text(encoding="utf-8")
        assert f'href="{mlflow_server.uri}/#/experiments/{experiment.experiment_id}/runs/{run.info.run_id}"' in page

    # And the runs live in PostgreSQL itself: the server's backend store, not a file beside it.
    ids = {r.info.run_id for r in runs} | {comparisons[0].info.run_id}
    statuses = dict(postgres.query("mlflow", "SELECT run_uuid, status FROM runs"))
    assert {statuses[i] for i in ids} == {"FINISHED"}
