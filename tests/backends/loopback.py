"""The lifecycle every loopback stand-in shares: a threaded HTTP server on 127.0.0.1, served from a daemon thread.

Subclasses say how requests are handled (:meth:`LoopbackServer.handler`); start, stop and ``with`` are here.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class _Server(ThreadingHTTPServer):
    # The standard library listens with a backlog of 5: with hundreds of requests in flight, connections
    # beyond it are dropped and the client retries, which measures the stub, not the client. Servers
    # PRISM talks to (Ollama, vLLM) accept far more.
    request_queue_size = 1024


class LoopbackServer:
    """A server on a loopback port (a free one unless given) that can be stopped and started again."""

    def __init__(self, port: int = 0) -> None:
        self._port = port
        self._server: ThreadingHTTPServer | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class, bound to this server's state."""
        raise NotImplementedError

    @property
    def port(self) -> int:
        """The port it listens on (known once started)."""
        return self._port

    def start(self) -> Self:
        """Listen (again on the same port after :meth:`stop`) and serve in a daemon thread."""
        server = _Server(("127.0.0.1", self._port), self.handler())
        server.daemon_threads = True
        self._port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop listening: new connections are refused."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def conversation_text(messages: list[dict[str, Any]]) -> str:
    """What a stand-in answers from: every message's content in order, so a system turn moves the answer as it
    could a model's; a one-message conversation is that message's content, as before stand-ins read turns."""
    return "\n\n".join(str(m.get("content", "")) for m in messages)
