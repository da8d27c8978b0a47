"""A loopback stand-in of a server (Ollama or OpenAI-compatible) in a process of its own.

The server-scale benchmark sends thousands of requests at 64 and 256 in flight. A stub answering in the
client's own interpreter shares its CPU and its GIL with the client, so what it measures is the two
together; a real server runs elsewhere. This module serves one stub until its standard input closes and
answers two commands on it, one line each, so the benchmark can read what only the server sees:

- ``reset``: forget the most requests in flight seen so far; answers ``{}``;
- ``stats``: answers ``{"max_in_flight": N, "cpu_s": S}``, the most in flight since the last reset and the
  CPU seconds this process has used.

Run as ``python -m benchmarks.stub_process NAME DELAY_S``; its first line of output is
``{"url": ..., "model": ...}``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from types import TracebackType
from typing import Any, Self

from benchmarks.common import REPO


class StubProcess:
    """The stub of ``name`` (``ollama`` or ``openai``) answering after ``delay_s``, served by a child process."""

    def __init__(self, name: str, delay_s: float) -> None:
        """Describe the stub; :meth:`start` (or ``with``) launches it."""
        self.name, self.delay_s = name, delay_s
        self._proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.model = ""

    def start(self) -> Self:
        """Launch the child and wait for its address.

        Raises:
            RuntimeError: If the child exits before it says where it listens.
        """
        self._proc = subprocess.Popen([sys.executable, "-m", "benchmarks.stub_process", self.name, str(self.delay_s)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
        first = self._proc.stdout.readline() if self._proc.stdout else ""
        if not first:
            raise RuntimeError(f"the {self.name} stub process exited ({self._proc.wait()}) before it listened")
        address = json.loads(first)
        self.url, self.model = str(address["url"]), str(address["model"] or "")
        return self

    def _ask(self, command: str) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdin and self._proc.stdout, "start the stub first"
        self._proc.stdin.write(command + "\n")
        self._proc.stdin.flush()
        answer: dict[str, Any] = json.loads(self._proc.stdout.readline())
        return answer

    def reset(self) -> None:
        """Forget the most in flight seen so far (before a measurement)."""
        self._ask("reset")

    def stats(self) -> tuple[int, float]:
        """(most requests in flight since the last reset, CPU seconds the stub's process has used)."""
        found = self._ask("stats")
        return int(found["max_in_flight"]), float(found["cpu_s"])

    def stop(self) -> None:
        """Close the child's input (it stops serving and exits) and wait for it."""
        proc, self._proc = self._proc, None
        if proc is not None:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=30)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def serve(name: str, delay_s: float) -> None:
    """Serve the stub until standard input closes, answering its commands (module docstring)."""
    from benchmarks.concurrency import stub_for

    with stub_for(name, delay_s) as stub:
        print(json.dumps({"url": stub.url, "model": getattr(stub, "model", None)}), flush=True)
        for line in sys.stdin:
            command = line.strip()
            if command == "reset":
                stub.max_in_flight = stub.in_flight
                print("{}", flush=True)
            elif command == "stats":
                print(json.dumps({"max_in_flight": stub.max_in_flight, "cpu_s": time.process_time()}), flush=True)
            else:
                print(json.dumps({"error": f"unknown command {command!r}: reset or stats"}), flush=True)


if __name__ == "__main__":
    serve(sys.argv[1], float(sys.argv[2]))
