"""A light HTTP path to an OpenAI-compatible server: keep-alive ``http.client`` connections, bodies as JSON.

``model.client=http`` sends the OpenAI-compatible backend's requests through this module instead of the official
``openai`` client. BENCHMARKS.md section 20 measured why: at 256 in flight against a stand-in answering after
0.2 s, the official client costs about 2.3 ms of client CPU per request (request models, validation, its httpx
transport, response models), keep-alive ``http.client`` connections about 0.3 ms; one interpreter then drives
several times the requests per second.

What is the same as the official path, so that :class:`prism.backends.openai_compat.OpenAIBackend` keeps one set
of retries, error texts and reply readers for both:

- the body: the dict the backend built, as JSON (the official client sends the same fields, merged from
  ``model``, ``messages``/``prompt``, ``stream`` and ``extra_body``), with ``Authorization: Bearer KEY``;
- an error status raises :class:`StatusError` with what ``openai.APIStatusError`` holds: ``status_code``, the
  ``body`` (the JSON's ``error`` object when there is one, else the JSON, else the text), the ``message``
  (``Error code: N`` and `` - MESSAGE`` from the body), and the headers (``Retry-After``, ``retry-after-ms``);
- a reply is the parsed JSON, or its text when it is not JSON (the backend turns that into a failed request);
- ``model.request_timeout_s`` bounds each connect, send and read, as the official client's timeout does; a
  timeout raises ``TimeoutError``, a connection that cannot be made :class:`Unreachable`, a connection lost
  mid-request ``ConnectionError`` or ``http.client.HTTPException``.

What differs: no ``HTTP(S)_PROXY`` from the environment, and replies are not asked for compressed
(``Accept-Encoding`` is not sent); use ``model.client=official`` behind a proxy.
"""

from __future__ import annotations

import http.client
import json
import select
import ssl
from collections import deque
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit


class StatusError(Exception):
    """The server answered an error status; the attributes are those of ``openai.APIStatusError``.

    Attributes:
        status_code: The HTTP status.
        headers: The reply's headers (case-insensitive).
        body: The JSON's ``error`` object when it has one, else the JSON, else the body's text.
        message: ``Error code: STATUS``, with `` - MESSAGE`` when the body's error has a message.
    """

    def __init__(self, status_code: int, headers: http.client.HTTPMessage, text: str) -> None:
        """Read the error body as the official client reads it."""
        message = f"Error code: {status_code}"
        body: Any = text.strip()
        try:
            body = json.loads(body)
        except ValueError:
            pass
        else:
            error = body.get("error", body) if isinstance(body, Mapping) else None
            said = error.get("message") if isinstance(error, Mapping) else None
            if isinstance(said, str) and said:
                message += f" - {said}"
            body = error if isinstance(body, Mapping) else body
        super().__init__(message)
        self.status_code = status_code
        self.headers = headers
        self.body = body
        self.message = message


class Unreachable(ConnectionError):
    """The connection could not be made (refused, unreachable, an unknown host); nothing reached a server."""


class HTTPClient:
    """Keep-alive connections to one API root, shared by the backend's worker threads.

    Each request takes an idle connection (or opens one), and gives it back once the reply is read; a
    connection that failed is closed, never reused. So at most ``model.concurrency`` connections are open,
    as with the official client's pool.
    """

    def __init__(self, base_url: str, api_key: str, timeout_s: float) -> None:
        """Remember where and how to connect; nothing is opened until the first request.

        Args:
            base_url: The API root (``http://HOST:PORT/v1``), already checked.
            api_key: Sent as ``Authorization: Bearer``.
            timeout_s: Bound of each connect, send and read.
        """
        parts = urlsplit(base_url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or (443 if self._https else 80)
        self._root = parts.path.rstrip("/")
        self._timeout_s = timeout_s
        self._context: ssl.SSLContext | None = None
        if self._https:
            import certifi  # httpx's own dependency: the same certificates the official client trusts

            self._context = ssl.create_default_context(cafile=certifi.where())
        self._headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json",
                         "Accept": "application/json", "User-Agent": "prism"}
        self._idle: deque[http.client.HTTPConnection] = deque()

    def get(self, path: str) -> Any:
        """``GET {base_url}{path}``: the reply's JSON, or its text when it is not JSON.

        Raises:
            StatusError: For a status other than 2xx.
            TimeoutError, Unreachable, ConnectionError, http.client.HTTPException: For transport failures.
        """
        return self._request("GET", path, None)

    def post(self, path: str, body: Mapping[str, Any]) -> Any:
        """``POST {base_url}{path}`` with ``body`` as JSON: the reply's JSON, or its text when it is not JSON.

        Raises:
            StatusError: For a status other than 2xx.
            TimeoutError, Unreachable, ConnectionError, http.client.HTTPException: For transport failures.
        """
        return self._request("POST", path, json.dumps(body, ensure_ascii=False).encode())

    def close(self) -> None:
        """Close every idle connection (those in use close when their request fails or are closed here after)."""
        while self._idle:
            self._idle.pop().close()

    def _connection(self) -> http.client.HTTPConnection:
        """An idle connection the server has not closed meanwhile, or a new one, connected."""
        while True:
            try:
                connection = self._idle.pop()  # LIFO: the most recently used is the least likely to have expired
            except IndexError:
                break
            sock = connection.sock
            # A readable idle socket means the server closed it (or sent what nobody asked for): reusing it
            # would fail the request and cost a retry, as httpx's pool checks too.
            if sock is not None and not select.select([sock], [], [], 0)[0]:
                return connection
            connection.close()
        if self._https:
            connection = http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout_s,
                                                     context=self._context)
        else:
            connection = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout_s)
        try:
            connection.connect()
        except TimeoutError:
            connection.close()
            raise
        except OSError as exc:  # refused, unreachable, a name that does not resolve
            connection.close()
            raise Unreachable(f"cannot connect to {self._host}:{self._port} ({type(exc).__name__}: {exc})") from exc
        return connection

    def _request(self, method: str, path: str, payload: bytes | None) -> Any:
        connection = self._connection()
        try:
            connection.request(method, self._root + path, payload, self._headers)
            response = connection.getresponse()
            data = response.read()
        except BaseException:
            connection.close()
            raise
        if response.will_close:
            connection.close()
        else:
            self._idle.append(connection)
        text = data.decode("utf-8", errors="replace")
        if not 200 <= response.status < 300:
            raise StatusError(response.status, response.headers, text)
        try:
            return json.loads(data)
        except ValueError:
            return text
