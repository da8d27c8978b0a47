"""A loopback reverse proxy in front of an OpenAI-compatible server: it counts, records and injects faults.

Every request is forwarded to the upstream server unchanged, except chat-completion requests for which a
fault was queued: those are answered by the proxy itself, with an error status and headers (``429`` with
``Retry-After``), a dropped connection, or a 200 body that is not JSON. The proxy records each chat body it
received, and the chats it had in flight to the upstream at once (``max_in_flight``): that is what shows
that requests overlap at the server's door, whatever the server then does with them.

Usage::

    with ChatProxy(server.url) as proxy:
        proxy.faults += [Status(429, {"Retry-After": "0.2"}), Drop()]
        ... model.base_url=proxy.url ...
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from backends.loopback import LoopbackServer


@dataclass(frozen=True)
class Status:
    """Answer with this status, headers and JSON body instead of forwarding."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=lambda: {"error": {"message": "injected by the test proxy"}})


@dataclass(frozen=True)
class Drop:
    """Read the request and close the connection without a reply."""


@dataclass(frozen=True)
class Garbage:
    """Answer 200 with a body that is not JSON, as a misconfigured gateway might."""


Fault = Status | Drop | Garbage


class ChatProxy(LoopbackServer):
    """A threaded HTTP proxy on 127.0.0.1 (see the module docstring)."""

    def __init__(self, upstream: str) -> None:
        super().__init__()
        split = urllib.parse.urlsplit(upstream)
        self._upstream = (split.hostname or "127.0.0.1", split.port or 80)
        self._root = split.path.rstrip("/")  # e.g. /v1
        self.faults: deque[Fault] = deque()
        self.chats: list[dict[str, Any]] = []  # every chat body received, in arrival order
        self.forwarded: list[tuple[float, float]] = []  # (start, end) of each chat forwarded upstream
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self.port}{self._root}"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler_for(self)

    def reset(self) -> None:
        """Forget what was recorded (faults still queued stay queued)."""
        with self._lock:
            self.chats.clear()
            self.forwarded.clear()
            self.max_in_flight = self.in_flight

    # -- called from handler threads ---------------------------------------------------------------------

    def _next_fault(self, body: bytes) -> Fault | None:
        with self._lock:
            try:
                self.chats.append(json.loads(body))
            except ValueError:
                self.chats.append({"unparsable": body.decode(errors="replace")})
            return self.faults.popleft() if self.faults else None

    def _forward(self, method: str, path: str, headers: dict[str, str], body: bytes,
                 chat: bool) -> tuple[int, list[tuple[str, str]], bytes]:
        if chat:
            with self._lock:
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
        start = time.perf_counter()
        try:
            connection = http.client.HTTPConnection(*self._upstream, timeout=600)
            try:
                connection.request(method, path, body=body or None, headers=headers)
                reply = connection.getresponse()
                data = reply.read()
                kept = [(k, v) for k, v in reply.getheaders()
                        if k.lower() not in ("content-length", "transfer-encoding", "connection")]
                return reply.status, kept, data
            finally:
                connection.close()
        finally:
            if chat:
                with self._lock:
                    self.in_flight -= 1
                    self.forwarded.append((start, time.perf_counter()))


def _handler_for(proxy: ChatProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the real server
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

        def _reply(self, status: int, headers: list[tuple[str, str]], data: bytes) -> None:
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            chat = self.command == "POST" and self.path.endswith("/chat/completions")
            fault = proxy._next_fault(body) if chat else None
            if isinstance(fault, Drop):
                self.close_connection = True
                return
            if isinstance(fault, Garbage):
                self._reply(200, [("Content-Type", "text/html")], b"<html>502 Bad Gateway</html>")
                return
            if isinstance(fault, Status):
                headers = [("Content-Type", "application/json"), *fault.headers.items()]
                self._reply(fault.status, headers, json.dumps(fault.body).encode())
                return
            forwarded = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            status, headers, data = proxy._forward(self.command, self.path, forwarded, body, chat)
            self._reply(status, headers, data)

        do_GET = _handle
        do_POST = _handle

    return Handler
