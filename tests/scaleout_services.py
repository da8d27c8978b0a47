"""A real PostgreSQL and a real ``mlflow server`` on it, on loopback, for the scale-out tests.

Both run as child processes of the test session on free ports, in temporary directories, and are always
torn down. PostgreSQL comes from Debian's ``postgresql`` package (``.ci/run`` installs it); its ``initdb``
refuses to run as root, so under root the server runs as the ``postgres`` user the package creates.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Generous: CI runs these on 2 cores, next to other work; a healthy start takes 1-3 s (PostgreSQL) and
# 10-25 s (mlflow server, which migrates a new database first).
POSTGRES_START_TIMEOUT_S = 60.0
MLFLOW_START_TIMEOUT_S = 240.0
STOP_TIMEOUT_S = 30.0

# Set to "1" to skip (not fail) the server test on a machine without PostgreSQL. CI never sets it.
SKIP_ENV = "PRISM_SKIP_POSTGRES"


class ServiceError(RuntimeError):
    """A service could not be started; the message carries the tail of its log."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def postgres_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``postgres``: on PATH, else Debian's versioned directory.

    Debian installs the server binaries under ``/usr/lib/postgresql/<major>/bin``, off PATH.
    """
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                        key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0)
    return Path(candidates[-1]).parent if candidates else None


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-chars:]
    except OSError:
        return "(no log)"


@dataclass
class Postgres:
    """A running PostgreSQL server with trust authentication on 127.0.0.1."""

    process: subprocess.Popen[bytes]
    port: int
    root: Path
    user: str = "postgres"

    def url(self, database: str) -> str:
        """A SQLAlchemy URL for ``database`` with the psycopg2 driver named explicitly.

        SQLAlchemy 2.1 maps a bare ``postgresql://`` to psycopg 3, 2.0 to psycopg2: naming the driver
        makes the URL mean the same with either.
        """
        return f"postgresql+psycopg2://{self.user}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> None:
        """``CREATE DATABASE name`` (outside a transaction, as PostgreSQL requires)."""
        import psycopg2

        connection = psycopg2.connect(host="127.0.0.1", port=self.port, user=self.user, dbname="postgres")
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{name}"')
        finally:
            connection.close()

    def query(self, database: str, sql: str) -> list[tuple[object, ...]]:
        """Run one query and return its rows (for checks straight against the backend store)."""
        import psycopg2

        connection = psycopg2.connect(host="127.0.0.1", port=self.port, user=self.user, dbname=database)
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql)
                return list(cursor.fetchall())
        finally:
            connection.close()


def _as_postgres_user() -> dict[str, Any]:
    """Popen arguments that drop root to the ``postgres`` user; nothing to do for another user."""
    if os.geteuid() != 0:
        return {}
    try:
        account = pwd.getpwnam("postgres")
    except KeyError as exc:
        raise ServiceError("running as root, but there is no 'postgres' user to run PostgreSQL as; "
                           "install Debian's postgresql package (it creates the user).") from exc
    return {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}


@contextlib.contextmanager
def running_postgres() -> Iterator[Postgres]:
    """Initialize a throwaway cluster in a temporary directory, start it on a free port, stop it after.

    Raises:
        ServiceError: If the binaries are missing or the server does not accept connections in time.
    """
    import psycopg2

    bindir = postgres_bindir()
    if bindir is None:
        raise ServiceError("PostgreSQL's server binaries (initdb, postgres) are not installed: "
                           "apt-get install -y postgresql (.ci/run does this).")
    drop = _as_postgres_user()
    # In /tmp rather than pytest's tmp_path: the postgres user cannot enter root's 0700 pytest directory.
    root = Path(tempfile.mkdtemp(prefix="prism-pg-"))
    process: subprocess.Popen[bytes] | None = None
    try:
        if drop:
            os.chown(root, int(drop["user"]), int(drop["group"]))
        data, log_path = root / "data", root / "postgres.log"
        initdb = subprocess.run(
            [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
             "--locale=C", "--no-sync"],
            cwd=root, capture_output=True, text=True, timeout=120, **drop,
        )
        if initdb.returncode != 0:
            raise ServiceError(f"initdb failed ({initdb.returncode}):\n{initdb.stderr[-3000:]}")
        port = free_port()
        with log_path.open("wb") as log:
            # Durability is not under test: fsync off keeps a CI run on a slow disk fast.
            process = subprocess.Popen(
                [str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-c", "listen_addresses=127.0.0.1",
                 "-c", f"unix_socket_directories={root}", "-c", "fsync=off", "-c", "synchronous_commit=off",
                 "-c", "full_page_writes=off"],
                cwd=root, stdout=log, stderr=subprocess.STDOUT, **drop,
            )
        deadline = time.monotonic() + POSTGRES_START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise ServiceError(f"PostgreSQL exited with {process.returncode}:\n{_tail(log_path)}")
            try:
                psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres",
                                 connect_timeout=5).close()
                break
            except psycopg2.OperationalError:
                if time.monotonic() > deadline:
                    raise ServiceError(f"PostgreSQL did not accept connections in {POSTGRES_START_TIMEOUT_S:.0f} s:"
                                       f"\n{_tail(log_path)}") from None
                time.sleep(0.2)
        yield Postgres(process=process, port=port, root=root)
    finally:
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)  # PostgreSQL's "fast" shutdown: ends sessions, stops cleanly
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_TIMEOUT_S)
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class MlflowServer:
    """A running ``mlflow server`` that proxies artifacts into ``artifacts``."""

    process: subprocess.Popen[bytes]
    port: int
    artifacts: Path
    log_path: Path

    @property
    def uri(self) -> str:
        """The tracking URI clients use."""
        return f"http://127.0.0.1:{self.port}"


def _healthy(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=5) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def running_mlflow_server(backend_store_uri: str, workdir: Path) -> Iterator[MlflowServer]:
    """Start ``mlflow server`` on a free port with a served artifact root under ``workdir``; stop it after.

    Raises:
        ServiceError: If ``/health`` does not answer in time (with the tail of the server's log).
    """
    artifacts = workdir / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "mlflow-server.log"
    port = free_port()
    env = {**os.environ,
           # MLflow 3's server also starts a pool of job-runner processes for its GenAI features; runs and
           # artifacts do not need them, and 2 CI cores are better left to the sweep.
           "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    env.pop("MLFLOW_TRACKING_URI", None)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend_store_uri,
             "--serve-artifacts", "--artifacts-destination", str(artifacts), "--host", "127.0.0.1",
             "--port", str(port), "--workers", "2"],
            cwd=workdir, stdout=log, stderr=subprocess.STDOUT, env=env,
            # Its own process group: the server forks workers, and teardown must reach all of them.
            start_new_session=True,
        )
    server = MlflowServer(process=process, port=port, artifacts=artifacts, log_path=log_path)
    try:
        deadline = time.monotonic() + MLFLOW_START_TIMEOUT_S
        while not _healthy(server.uri):
            if process.poll() is not None:
                raise ServiceError(f"mlflow server exited with {process.returncode}:\n{_tail(log_path)}")
            if time.monotonic() > deadline:
                raise ServiceError(f"mlflow server did not answer /health in {MLFLOW_START_TIMEOUT_S:.0f} s:\n"
                                   f"{_tail(log_path)}")
            time.sleep(0.5)
        yield server
    finally:
        _stop_group(process)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group this test started, then SIGKILL whatever is left of it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=STOP_TIMEOUT_S)
    # Workers may outlive the parent for a moment; the group id is still ours to end.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=STOP_TIMEOUT_S)
