"""A loopback stand-in for an Ollama server: the parts of its REST API that PRISM uses, and its faults.

It speaks ``GET /api/version``, ``GET /api/tags`` and non-streamed ``POST /api/chat`` with the field names,
status codes and error bodies of Ollama's API documentation (``{"error": "model 'x' not found"}`` with 404,
``503`` when busy, Go's plain-text ``404 page not found`` for an unknown path), answering from a
deterministic function of the prompt. A chat with ``"logprobs": true`` gets the top-level ``logprobs`` list
of Ollama 0.12.11 and later (one entry per generated token: ``token``, ``logprob``, ``bytes`` and, with
``top_logprobs`` > 0, that many alternatives), from a deterministic first-token distribution; told to be an
older server, it ignores the field, as Ollama did before (unknown JSON fields are dropped). It can be told
to delay replies, to answer the first N chats with 503, to drop the connection of the first N chats without
a reply, to send a body that is not JSON, and to stop listening after N chats (every later connection is
refused). It counts chats in flight and records the most it saw at once, which is how the tests prove that
requests overlap.

Usage::

    with OllamaStub(models={"llama3:latest": DIGEST}) as stub:
        ... model.host=stub.url ...
        assert stub.max_in_flight == 4
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any, Self

from backends.loopback import LoopbackServer, conversation_text

LLAMA3_DIGEST = "365c0bd3c000a25d28ddbf732fe1c6add414de7275464c4e4d1c3b5fcb5d8ad1"
VERSION = "0.6.5"
BUSY = "server busy, please try again.  maximum pending requests exceeded"


def letter_answer(prompt: str) -> str:
    """The default model: a label chosen by the prompt's hash (every question has options A to C)."""
    return "ABC"[int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 3]


def first_token_distribution(prompt: str, answer: str) -> list[tuple[str, float]]:
    """The default first-token distribution: the answer's label likeliest, then the other labels and words.

    Some labels come with a leading space (`` B``), as tokenizers give them, so readers must strip tokens.
    """
    others = [label for label in "ABCD" if label != answer[:1]]
    shift = int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 3
    others = others[shift:] + others[:shift]
    weights = [(answer[:1] or "The", 0.5), ("The", 0.12), (f" {others[0]}", 0.1), (others[1], 0.08),
               ("I", 0.05), (others[2], 0.04), (f" {answer[:1]}", 0.03), ("\n", 0.02)]
    return [(token, math.log(weight)) for token, weight in weights]


def normalize(name: str) -> str:
    """Ollama's name for a tag: ``:latest`` when no tag is given."""
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


@dataclass
class Behaviour:
    """What the stub does; change fields between runs (they are read on every request).

    Attributes:
        models: Listed name -> digest.
        answer: Prompt -> completion text.
        delay_s: Seconds a chat takes, or a function of the prompt.
        fail_first: The first N chats are answered 503 with Ollama's busy message.
        drop_first: The N chats after those are read and their connection closed without a reply.
        garbage: Prompts for which the reply body is not JSON (status 200).
        error: Prompt -> (status, message) to answer with Ollama's error body instead, or None.
        down_after: After this many chats are answered, the server stops listening.
        logprobs: Whether ``"logprobs": true`` is honoured (Ollama 0.12.11 and later) or ignored (older).
        distribution: (prompt, answer) -> the first token's (token, log-probability) list, likeliest first.
    """

    models: dict[str, str] = field(default_factory=lambda: {"llama3:latest": LLAMA3_DIGEST})
    answer: Callable[[str], str] = letter_answer
    delay_s: float | Callable[[str], float] = 0.0
    fail_first: int = 0
    drop_first: int = 0
    garbage: Callable[[str], bool] = lambda prompt: False
    error: Callable[[str], tuple[int, str] | None] = lambda prompt: None
    down_after: int | None = None
    logprobs: bool = True
    distribution: Callable[[str, str], list[tuple[str, float]]] = first_token_distribution


class OllamaStub(LoopbackServer):
    """A threaded HTTP server on 127.0.0.1 that behaves like Ollama (see the module docstring)."""

    def __init__(self, behaviour: Behaviour | None = None, port: int = 0, **fields: Any) -> None:
        super().__init__(port)
        self.behaviour = behaviour or Behaviour(**fields)
        self._lock = threading.Lock()
        self.chats: list[dict[str, Any]] = []  # every /api/chat body received, in arrival order
        self.answered = 0  # chats answered with a completion (or garbage)
        self.requests: dict[str, int] = {}  # path -> count
        self.in_flight = 0
        self.max_in_flight = 0
        self._down = threading.Event()
        self._stopper: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler_for(self)

    def start(self) -> Self:
        """Listen (again, on the same port after :meth:`stop`) and serve in a daemon thread."""
        if self._stopper is not None:  # a stop triggered by down_after must finish before a restart
            self._stopper.join()
            self._stopper = None
        self._down.clear()
        return super().start()

    def stop(self) -> None:
        """Stop listening: new connections are refused, kept-alive ones are closed on their next request."""
        self._down.set()
        super().stop()

    # -- request handling (called from handler threads) ---------------------------------------------------

    def _count(self, path: str) -> None:
        with self._lock:
            self.requests[path] = self.requests.get(path, 0) + 1

    def _chat(self, body: dict[str, Any]) -> tuple[str, int, Any]:
        """Decide the reply to one chat: (kind, status, payload) with kind ``json``, ``raw`` or ``drop``."""
        b = self.behaviour
        with self._lock:
            index = len(self.chats)
            self.chats.append(body)
        if index < b.fail_first:
            return "json", 503, {"error": BUSY}
        if index < b.fail_first + b.drop_first:
            return "drop", 0, None
        model = body.get("model")
        if not isinstance(model, str) or normalize(model) not in b.models:
            return "json", 404, {"error": f"model '{model}' not found"}
        if body.get("stream") is not False:
            return "json", 400, {"error": "this stand-in answers stream=false only"}
        messages = body.get("messages") or []
        prompt = conversation_text(messages)
        if (error := b.error(prompt)) is not None:
            return "json", error[0], {"error": error[1]}
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            delay = b.delay_s(prompt) if callable(b.delay_s) else b.delay_s
            started = time.perf_counter()
            time.sleep(delay)
            with self._lock:
                self.answered += 1
                if b.down_after is not None and self.answered >= b.down_after and not self._down.is_set():
                    # Further requests, even on this kept-alive connection, find the server gone.
                    self._down.set()
                    self._stopper = threading.Thread(target=self.stop, daemon=True)
                    self._stopper.start()
            if b.garbage(prompt):
                return "raw", 200, b"<html>502 Bad Gateway</html>{not json"
            text = b.answer(prompt)
            elapsed_ns = int((time.perf_counter() - started) * 1e9)
            extra = {"logprobs": self._logprobs(body, prompt, text)} if b.logprobs and body.get("logprobs") else {}
            return "json", 200, {**extra,
                "model": normalize(model),
                "created_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
                "message": {"role": "assistant", "content": text},
                "done_reason": "stop",
                "done": True,
                "total_duration": elapsed_ns,
                "load_duration": 1000,
                "prompt_eval_count": len(prompt.split()),
                "prompt_eval_duration": elapsed_ns // 2,
                "eval_count": max(1, len(text.split())),
                "eval_duration": elapsed_ns // 2,
            }
        finally:
            with self._lock:
                self.in_flight -= 1

    def _logprobs(self, body: dict[str, Any], prompt: str, text: str) -> list[dict[str, Any]]:
        """Ollama's ``logprobs``: one entry per generated token (here, per character of the reply)."""
        top_n = int(body.get("top_logprobs") or 0)
        first = self.behaviour.distribution(prompt, text)

        def entry(token: str, logprob: float) -> dict[str, Any]:
            return {"token": token, "logprob": logprob, "bytes": list(token.encode())}

        tokens = list(text) or [""]
        entries = []
        for index, token in enumerate(tokens):
            chosen = dict(first).get(token, math.log(0.5)) if index == 0 else -0.01
            item = entry(token, chosen)
            if top_n:
                item["top_logprobs"] = [entry(t, lp) for t, lp in (first if index == 0 else [(token, -0.01)])][:top_n]
            entries.append(item)
        return entries

    def _tags(self) -> dict[str, Any]:
        return {"models": [
            {"name": name, "model": name, "modified_at": "2026-05-01T10:00:00.000000000Z", "size": 4661224676,
             "digest": digest,
             "details": {"parent_model": "", "format": "gguf", "family": "llama", "families": ["llama"],
                         "parameter_size": "8.0B", "quantization_level": "Q4_0"}}
            for name, digest in self.behaviour.models.items()
        ]}


def _handler_for(stub: OllamaStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, like Ollama's Go server
        # Go sets TCP_NODELAY on every connection; without it, headers and body written separately
        # meet the client's delayed ACK and every reply takes ~40 ms on loopback.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

        def _send(self, status: int, payload: Any, raw: bytes | None = None) -> None:
            data = raw if raw is not None else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8" if raw is None else "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _gone(self) -> bool:
            if stub._down.is_set():
                self.close_connection = True  # no reply at all: the client sees the connection drop
                return True
            return False

        def do_GET(self) -> None:
            if self._gone():
                return
            stub._count(self.path)
            if self.path == "/api/version":
                self._send(200, {"version": VERSION})
            elif self.path == "/api/tags":
                self._send(200, stub._tags())
            else:
                self._send(404, None, raw=b"404 page not found")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self._gone():
                return
            stub._count(self.path)
            if self.path != "/api/chat":
                self._send(404, None, raw=b"404 page not found")
                return
            try:
                body = json.loads(raw)
            except ValueError as exc:
                self._send(400, {"error": f"invalid character in request body: {exc}"})
                return
            kind, status, payload = stub._chat(body)
            if kind == "drop":
                self.close_connection = True
            elif kind == "raw":
                self._send(status, None, raw=payload)
            else:
                self._send(status, payload)

    return Handler
