"""A loopback stand-in for Anthropic's Messages API, run as a process of its own (so a test can SIGKILL it).

It answers ``POST /v1/messages`` (non-streamed) in the shapes of Anthropic's API reference, quoted in
``tests/backends/test_anthropic.py``: a ``message`` with ``id``, ``type``, ``role``, ``model``, ``content``
(one ``text`` block), ``stop_reason`` (``end_turn``, or ``max_tokens`` when the answer was cut),
``stop_sequence`` and ``usage`` (``input_tokens``, ``output_tokens``, ``cache_creation_input_tokens``,
``cache_read_input_tokens``). Errors are ``{"type": "error", "error": {"type", "message"}, "request_id"}``
with the documented statuses: 400 ``invalid_request_error`` (no ``anthropic-version`` header, a body that is
not JSON, no ``max_tokens`` or ``messages``), 401 ``authentication_error`` (a wrong or missing key, as
``x-api-key`` or, as the SDK's 2.x releases send it, ``Authorization: Bearer``),
404 ``not_found_error`` (a model it does not serve, any other path), and, when told to, 403
``permission_error``, 429 ``rate_limit_error`` and 529 ``overloaded_error`` with ``retry-after``, 500
``api_error``. Every response has a ``request-id`` header.

The model: a label chosen by the prompt's hash (``letter_answer``; a prompt starting "Explain" gets
"Because <label>."), one character per output token, an
input token per whitespace-separated word; half the prompts report half their input tokens as read from the
prompt cache (deterministically, by hash), so cached-token sums are not trivially zero.

Control (not part of Anthropic's API; the backend never calls it): ``POST /_stand-in/faults`` with
``{"faults": [...], "fail_all": null | {...}, "served_as": null | "MODEL"}`` queues faults for the next messages
(each ``{"status", "type", "message", "retry_after"?}``), fails every one, or has replies name another model
than the one asked (as when an alias moves to a new snapshot). Every messages request is appended to the log file
(one JSON line: path and body, never a header) before it is answered, so counts survive a SIGKILL.

Run: ``python -m backends.anthropic_server --port P --key K --model M --log FILE`` (``tests/`` on the path);
tests use :class:`AnthropicServer`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

MODEL = "claude-standin-4-5-20250929"
TESTS_DIR = Path(__file__).resolve().parent.parent


def letter_answer(prompt: str) -> str:
    """The stand-in's answer: a label chosen by the prompt's hash (every question has options A to C)."""
    return "ABC"[int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 3]


def cached_tokens(prompt: str, input_tokens: int) -> int:
    """Input tokens reported as read from the prompt cache: half of them for half the prompts."""
    return input_tokens // 2 if int(hashlib.sha256(b"cache" + prompt.encode()).hexdigest(), 16) % 2 else 0


def error_body(kind: str, message: str, request_id: str) -> dict[str, Any]:
    """Anthropic's error shape."""
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}


class StandIn:
    """The state of one stand-in process: key, models, queued faults, the request log."""

    def __init__(self, key: str, models: list[str], log: Path) -> None:
        self.key = key
        self.models = set(models)
        self.log = log
        self.faults: list[dict[str, Any]] = []
        self.fail_all: dict[str, Any] | None = None
        self.served_as: str | None = None  # the model replies name, when not the one asked (a new snapshot)
        self.count = 0
        self.lock = threading.Lock()

    def messages(self, headers: Any, raw: bytes) -> tuple[int, dict[str, Any], dict[str, str]]:
        """(status, body, extra headers) for one POST /v1/messages."""
        with self.lock:
            self.count += 1
            request_id = f"req_standin{self.count:06d}"
            try:
                logged: Any = json.loads(raw)
            except ValueError:
                logged = raw.decode("utf-8", "replace")
            with self.log.open("a") as out:  # before answering: a SIGKILL after this line keeps the count
                out.write(json.dumps({"path": "/v1/messages", "body": logged}) + "\n")
                out.flush()
                os.fsync(out.fileno())
            fault = self.faults.pop(0) if self.faults else self.fail_all
        # The reference documents x-api-key; the SDK's recent releases send the key as a bearer token.
        if self.key not in (headers.get("x-api-key"), (headers.get("authorization") or "").removeprefix("Bearer ")):
            return 401, error_body("authentication_error", "invalid x-api-key", request_id), {}
        if not headers.get("anthropic-version"):
            return 400, error_body("invalid_request_error", "anthropic-version: header is required", request_id), {}
        if fault is not None:
            extra = {"retry-after": str(fault["retry_after"])} if fault.get("retry_after") is not None else {}
            return int(fault["status"]), error_body(fault["type"], fault["message"], request_id), extra
        if not isinstance(logged, dict):
            return 400, error_body("invalid_request_error", "request body is not valid JSON", request_id), {}
        body = logged
        if body.get("model") not in self.models:
            return 404, error_body("not_found_error", f"model: {body.get('model')}", request_id), {}
        max_tokens, messages = body.get("max_tokens"), body.get("messages")
        if not isinstance(max_tokens, int) or max_tokens < 1:
            return 400, error_body("invalid_request_error", "max_tokens: Field required", request_id), {}
        if not isinstance(messages, list) or not messages:
            return 400, error_body("invalid_request_error", "messages: at least one message is required",
                                   request_id), {}
        if body.get("stream"):
            return 400, error_body("invalid_request_error", "this stand-in answers stream=false only", request_id), {}
        content = messages[-1].get("content", "") if isinstance(messages[-1], dict) else ""
        prompt = content if isinstance(content, str) else "".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict))
        answer = letter_answer(prompt)
        if prompt.startswith("Explain"):  # a longer answer, to be cut by a small max_tokens
            answer = f"Because {answer}."
        text, stop = (answer, "end_turn") if len(answer) <= max_tokens else (answer[:max_tokens], "max_tokens")
        words = len(prompt.split())
        reply = {
            "id": "msg_" + hashlib.sha256(f"{request_id}:{prompt}".encode()).hexdigest()[:24],
            "type": "message",
            "role": "assistant",
            "model": self.served_as or body["model"],
            "content": [{"type": "text", "text": text}],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": words, "output_tokens": len(text), "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": cached_tokens(prompt, words)},
        }
        return 200, reply, {}


def handler_for(state: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: dict[str, Any], extra: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("request-id", str(payload.get("request_id") or f"req_standin{state.count:06d}"))
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send(404, error_body("not_found_error", f"Not found: {self.path}", "req_standin_get"))

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path == "/_stand-in/faults":
                order = json.loads(raw)
                with state.lock:
                    state.faults = list(order.get("faults") or [])
                    state.fail_all = order.get("fail_all")
                    state.served_as = order.get("served_as")
                self._send(200, {"ok": True})
            elif self.path == "/v1/messages":
                self._send(*state.messages(self.headers, raw))
            else:
                self._send(404, error_body("not_found_error", f"Not found: {self.path}", "req_standin_post"))

    return Handler


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AnthropicServer:
    """The stand-in as a child process on a loopback port that stays the same across :meth:`kill` and :meth:`start`."""

    def __init__(self, directory: Path, key: str, models: tuple[str, ...] = (MODEL,), port: int | None = None) -> None:
        self.directory = directory
        self.key = key
        self.models = models
        self.port = port or free_port()
        self.log = directory / "requests.jsonl"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``model.base_url``: the root, without /v1."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, fail_all: dict[str, Any] | None = None) -> AnthropicServer:
        """Start the process and wait until it accepts connections."""
        env = {**os.environ, "PYTHONPATH": str(TESTS_DIR), "STANDIN_KEY": self.key}  # the key not in argv
        command = [sys.executable, "-m", "backends.anthropic_server", "--port", str(self.port), "--log", str(self.log),
                   *[a for m in self.models for a in ("--model", m)]]
        if fail_all is not None:
            command += ["--fail-all", json.dumps(fail_all)]
        self._proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=(self.directory / "stderr.log").open("ab"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"the stand-in exited with {self._proc.returncode}; see {self.directory}/stderr.log")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the stand-in did not listen within 30 s")

    def faults(self, faults: list[dict[str, Any]] | None = None, fail_all: dict[str, Any] | None = None,
               served_as: str | None = None) -> None:
        """Queue faults for the next messages, or fail every one, or name another model in replies (None: as asked)."""
        data = json.dumps({"faults": faults or [], "fail_all": fail_all, "served_as": served_as}).encode()
        request = urllib.request.Request(f"{self.url}/_stand-in/faults", data=data, method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as reply:
            assert reply.status == 200

    def requests(self) -> list[dict[str, Any]]:
        """Every messages request received so far (across restarts), in arrival order."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def kill(self) -> None:
        """SIGKILL the process: no reply to what is in flight, every later connection refused."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait(timeout=10)
        self._proc = None

    def stop(self) -> None:
        """Stop the process."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
        self._proc = None

    def __enter__(self) -> AnthropicServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description="A loopback stand-in for Anthropic's Messages API.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--model", action="append", default=[])
    parser.add_argument("--fail-all", default=None, help="JSON {status, type, message, retry_after?}")
    args = parser.parse_args()
    from backends.loopback import _Server

    state = StandIn(os.environ["STANDIN_KEY"], args.model or [MODEL], args.log)
    state.fail_all = json.loads(args.fail_all) if args.fail_all else None
    server = _Server(("127.0.0.1", args.port), handler_for(state))
    server.daemon_threads = True
    server.serve_forever(poll_interval=0.05)


if __name__ == "__main__":
    main()
