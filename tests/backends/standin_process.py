"""An Ollama or OpenAI-compatible loopback stand-in in a process of its own, so a test can SIGKILL it.

The endpoint-pool tests need servers that die as a real one does: a SIGKILLed process whose in-flight
requests see their connection drop and whose port then refuses every connection. This runs
``ollama_server.OllamaStub`` or ``openai_stub.OpenAIStub`` in a child process on a fixed loopback port (so a
restart is the same endpoint) until it is killed or stopped. Its first line of output is ``{"url": ...}``.

``answer`` chooses the stand-in's model: ``letters`` (both stubs' default, a label chosen by the prompt's
hash) or ``other`` (another label for the same prompt: other weights behind the same name).

Usage::

    with StandIn("openai", delay_s=0.1) as server:
        ... model.endpoints=[server.url, ...] ...
        server.kill()
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Self

from backends.llama_server import free_port

TESTS_DIR = Path(__file__).resolve().parents[1]


def other_answer(prompt: str) -> str:
    """Another model: the label after the one ``letter_answer`` picks."""
    from backends.ollama_server import letter_answer

    return "ABC"[("ABC".index(letter_answer(prompt)) + 1) % 3]


class StandIn:
    """A stand-in child process on a loopback port that stays the same across :meth:`kill` and :meth:`start`."""

    def __init__(self, kind: str, delay_s: float = 0.0, answer: str = "letters", digest: str | None = None,
                 port: int | None = None) -> None:
        """``kind`` is ``ollama`` or ``openai``; ``digest`` the Ollama stand-in's digest of ``llama3:latest``."""
        self.kind, self.delay_s, self.answer, self.digest = kind, delay_s, answer, digest
        self.port = port or free_port()
        self.url = ""
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> Self:
        """Start the process and wait until it listens.

        Raises:
            RuntimeError: If the child exits before it says where it listens.
        """
        command = [sys.executable, "-m", "backends.standin_process", self.kind, "--port", str(self.port),
                   "--delay", str(self.delay_s), "--answer", self.answer]
        if self.digest:
            command += ["--digest", self.digest]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")])}
        self._proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        first = self._proc.stdout.readline() if self._proc.stdout else ""
        if not first:
            raise RuntimeError(f"the {self.kind} stand-in exited ({self._proc.wait()}) before it listened")
        self.url = str(json.loads(first)["url"])
        return self

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill would: in-flight requests see their connection drop."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait(timeout=30)

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description="A loopback stand-in of an Ollama or OpenAI-compatible server.")
    parser.add_argument("kind", choices=["ollama", "openai"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--answer", choices=["letters", "other"], default="letters")
    parser.add_argument("--digest", default=None)
    args = parser.parse_args()
    if args.kind == "ollama":
        from backends.ollama_server import LLAMA3_DIGEST, OllamaStub, letter_answer

        answer = letter_answer if args.answer == "letters" else other_answer
        stub: Any = OllamaStub(port=args.port, delay_s=args.delay, answer=answer,
                               models={"llama3:latest": args.digest or LLAMA3_DIGEST})
    else:
        from backends.openai_stub import OpenAIStub
        from backends.openai_stub import letter_answer as openai_letters

        stub = OpenAIStub(delay_s=args.delay, answer=openai_letters if args.answer == "letters" else other_answer)
        stub._port = args.port
    stub.start()
    print(json.dumps({"url": stub.url}), flush=True)
    threading.Event().wait()  # serve until killed


if __name__ == "__main__":
    main()
