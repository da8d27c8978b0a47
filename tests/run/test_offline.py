"""MLflow failing mid-run: inference finishes, nothing is lost, and ``prism.upload`` sends it later.

A real ``mlflow server`` is stopped while a run is asking a (loopback, Ollama-API) model, then started
again on the same store for the upload.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from backends.ollama_server import OllamaStub
from conftest import compose_config, run_overrides

from prism.run.pipeline import run
from prism.run.tracking import TrackingError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MlflowServer:
    """``mlflow server`` on loopback over a SQLite store and a local artifact root."""

    def __init__(self, root: Path, port: int) -> None:
        self.root, self.port, self.proc = root, port, None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MlflowServer:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(self.port),
             "--backend-store-uri", f"sqlite:///{self.root}/mlflow.db", "--artifacts-destination",
             str(self.root / "artifacts"), "--workers", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as reply:
                    if reply.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        raise RuntimeError("mlflow server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            import os
            import signal

            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None


@pytest.fixture
def server(tmp_path: Path):
    srv = MlflowServer(tmp_path / "server", free_port()).start()
    yield srv
    srv.stop()


def test_mlflow_down_mid_run_keeps_everything_and_upload_sends_it_later(server, workdir: Path, data_dir: Path,
                                                                        monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    answered = threading.Event()

    def answer(prompt: str) -> str:
        answered.set()
        return "B"

    with OllamaStub(answer=answer, delay_s=0.05) as stub:
        overrides = [*run_overrides(workdir, data_dir), f"tracking.uri={server.uri}", "model=llama3",
                     f"model.host={stub.url}", "dataset.n=8"]
        # Stop the tracking server as soon as the model starts answering.
        threading.Thread(target=lambda: (answered.wait(60), server.stop()), daemon=True).start()
        with pytest.raises(TrackingError, match=r"python -m prism.upload .*out") as failure:
            run(compose_config(overrides), output_dir=workdir / "out")
    assert "nothing is lost" in str(failure.value)
    import mlflow

    assert mlflow.active_run() is None  # forgotten locally, so this process can start the next run
    records = [json.loads(line) for line in (workdir / "out/responses/responses.jsonl").open()]
    assert len(records) == 40 and all(r["response"] == "B" for r in records)  # inference finished
    assert (workdir / "out/results/scored.jsonl").is_file()

    server.start()
    done = subprocess.run([sys.executable, "-m", "prism.upload", str(workdir / "out")], capture_output=True,
                          text=True, timeout=300, env={**__import__("os").environ})
    assert done.returncode == 0, done.stderr[-2000:]
    client = mlflow.tracking.MlflowClient(server.uri)
    experiment = client.get_experiment_by_name("prism")
    finished = [r for r in client.search_runs(experiment.experiment_id) if r.info.status == "FINISHED"]
    (uploaded,) = finished
    assert uploaded.data.metrics["n_responses"] == 40
    assert uploaded.data.tags["prism.uploaded_from"] == str((workdir / "out").resolve())
    assert uploaded.data.params["model.name"] == "llama3"
    paths = {a.path for a in client.list_artifacts(uploaded.info.run_id, "responses")}
    assert paths == {"responses/responses.jsonl"}


def test_upload_of_a_directory_without_a_manifest_is_a_clear_error(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "prism.upload", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and "has no tracking/manifest.jsonl" in done.stderr
