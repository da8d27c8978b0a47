"""A loopback stand-in for an OpenAI-compatible server: the two endpoints PRISM uses, with a fixed delay.

It speaks ``GET /v1/models`` and non-streamed ``POST /v1/chat/completions`` in the shapes of OpenAI's API
reference (a ``list`` of ``model`` objects; a ``chat.completion`` with ``choices``, ``usage``, ``model`` and
``system_fingerprint``), which is all :class:`prism.backends.openai_compat.OpenAIBackend` reads, including
its identity probe. Errors use OpenAI's body (``{"error": {"message", "type", "code"}}``): 404 for a model
it does not serve or an unknown path, 400 for a streamed request. Replies come from a deterministic
function of the prompt after ``delay_s``; the stub counts chats in flight and records the most it saw at
once, which is how a benchmark or a test proves that requests overlap.

Unlike ``openai_proxy.py`` (a proxy in front of a real llama.cpp server, for faults and fidelity), this
needs no model: it is for measuring what PRISM adds around a server of known speed.

Usage::

    with OpenAIStub(delay_s=0.2) as stub:
        ... model=openai model.base_url=stub.url model.name=stub.model ...
        assert stub.max_in_flight == 4
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from backends.loopback import LoopbackServer, conversation_text

MODEL = "stub-model"
FINGERPRINT = "fp_stub0001"


def letter_answer(prompt: str) -> str:
    """The default model: a label chosen by the prompt's hash (every question has options A to C)."""
    return "ABC"[int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 3]


class OpenAIStub(LoopbackServer):
    """A threaded HTTP server on 127.0.0.1 that answers like an OpenAI-compatible server (module docstring).

    Attributes:
        model: The one model id it lists and serves.
        fingerprint: The ``system_fingerprint`` of every reply (None: sent as absent, like vLLM).
        delay_s: Seconds each chat completion takes.
        answer: Prompt -> completion text.
        chats: Every chat body received, in arrival order.
        max_in_flight: The most chats it was answering at once since the last :meth:`reset`.
    """

    def __init__(self, delay_s: float = 0.0, model: str = MODEL, fingerprint: str | None = FINGERPRINT,
                 answer: Callable[[str], str] = letter_answer) -> None:
        super().__init__()
        self.model = model
        self.fingerprint = fingerprint
        self.delay_s = delay_s
        self.answer = answer
        self.chats: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """The base URL to give the backend (``model.base_url``), ending in ``/v1``."""
        assert self._server is not None, "start the stub first"
        return f"http://127.0.0.1:{self.port}/v1"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler_for(self)

    def reset(self) -> None:
        """Forget the chats received and the most in flight (between measurements)."""
        with self._lock:
            self.chats.clear()
            self.max_in_flight = self.in_flight

    # -- called from handler threads ---------------------------------------------------------------------

    def _models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.model, "object": "model", "created": int(time.time()),
                                            "owned_by": "prism-tests"}]}

    def _chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.chats.append(body)
        if body.get("model") != self.model:
            return 404, _error(f"The model `{body.get('model')}` does not exist.", "invalid_request_error",
                               "model_not_found")
        if body.get("stream"):
            return 400, _error("this stand-in answers stream=false only", "invalid_request_error", None)
        messages = body.get("messages") or []
        prompt = conversation_text(messages)
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.delay_s)
        finally:
            with self._lock:
                self.in_flight -= 1
        text = self.answer(prompt)
        reply: dict[str, Any] = {
            "id": "chatcmpl-" + hashlib.sha256(f"{len(self.chats)}:{prompt}".encode()).hexdigest()[:24],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": 1,
                      "total_tokens": len(prompt.split()) + 1},
        }
        if self.fingerprint is not None:
            reply["system_fingerprint"] = self.fingerprint
        return 200, reply


def _error(message: str, kind: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _handler_for(stub: OpenAIStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
        # Without TCP_NODELAY, headers and body written separately meet the client's delayed ACK and every
        # reply takes ~40 ms on loopback (see ollama_server.py).
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                self._send(200, stub._models())
            else:
                self._send(404, _error(f"Unknown path {self.path}", "invalid_request_error", None))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path != "/v1/chat/completions":
                self._send(404, _error(f"Unknown path {self.path}", "invalid_request_error", None))
                return
            try:
                body = json.loads(raw)
            except ValueError as exc:
                self._send(400, _error(f"request body is not JSON: {exc}", "invalid_request_error", None))
                return
            self._send(*stub._chat(body))

    return Handler
