"""``model.client=http`` (:mod:`prism.backends.openai_http`) against the official client, on the loopback stand-ins.

The light path must be the official path with less CPU: the same bodies reach the server, the same completions
and scored records come back, and every fault (a busy server, a dropped connection, a body that is not JSON,
an error status, a refused key, a vanished model, a server that is down or too slow) ends as the same failed
request or the same error text. Each test runs the two clients side by side and compares what they give.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from conftest import compose_config, run_overrides

from prism.backends.base import BackendError, Request
from prism.backends.openai_compat import CLIENTS, OpenAIBackend, OpenAIModelConfig
from prism.backends.openai_http import HTTPClient
from prism.run.pipeline import run
from prism.types import Completion, GenerationParams, Prompt

from .llama_server import free_port
from .loopback import LoopbackServer
from .openai_proxy import ChatProxy, Drop, Garbage, Status
from .openai_stub import MODEL, OpenAIStub

FAST_RETRY = {"retry_base_delay_s": 0.01, "retry_max_delay_s": 0.05}
KEY_ENV = "PRISM_TEST_HTTP_KEY"


def request(i: int, **params: Any) -> Request:
    settings = {"temperature": 0.0, "max_tokens": 8, "seed": 0, **params}
    return Request(Prompt(f"q{i}", "P0", f"Question {i}?\n\nA. yes\nB. no\nC. maybe", ("A", "B", "C"),
                          ("A", "B", "C"), ("yes", "no", "maybe"), "1"), GenerationParams(**settings), 0)


def without_latency(completion: Completion) -> dict[str, Any]:
    fields = dict(vars(completion))
    fields.pop("latency_s")
    return fields


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


@pytest.fixture
def proxy(stub: OpenAIStub) -> Iterator[ChatProxy]:
    with ChatProxy(stub.url) as server:
        yield server


def backends(url: str, **cfg: Any) -> dict[str, OpenAIBackend]:
    return {kind: OpenAIBackend(OpenAIModelConfig(name=MODEL, base_url=url, client=kind, **{**FAST_RETRY, **cfg}))
            for kind in CLIENTS}


def test_an_unknown_client_is_refused_naming_the_choices() -> None:
    with pytest.raises(BackendError, match=r"model.client must be one of official, http, not 'httpx'"):
        OpenAIBackend(OpenAIModelConfig(name=MODEL, base_url="http://127.0.0.1:1/v1", client="httpx"))


def test_both_clients_send_the_same_bodies_and_read_the_same_completions_and_identity(stub: OpenAIStub) -> None:
    asked = [request(0), request(1, top_p=0.9), request(2, max_tokens=3, top_k=5),
             request(3, temperature=0.7, seed=11)]
    got: dict[str, list[dict[str, Any]]] = {}
    bodies: dict[str, list[dict[str, Any]]] = {}
    identities = {}
    for kind, backend in backends(stub.url, extra_body={"repeat_penalty": 1.0}).items():
        stub.reset()
        try:
            identities[kind] = backend.identity()
            got[kind] = [without_latency(backend.generate(r)) for r in asked]
        finally:
            backend.close()
        bodies[kind] = list(stub.chats)
    assert identities["http"] == identities["official"]
    assert got["http"] == got["official"] and all(c["error"] is None and c["text"] for c in got["http"])
    assert bodies["http"] == bodies["official"] and len(bodies["http"]) == 5  # the probe and the four cells
    assert got["http"][2]["backend_options"]["not_sent"] == {"top_k": 5}


def test_a_run_through_either_client_gives_identical_scored_records(stub: OpenAIStub, workdir: Path,
                                                                    data_dir: Path) -> None:
    scored = {}
    for kind in CLIENTS:
        base = workdir / kind
        cfg = compose_config([*run_overrides(base, data_dir), "model=openai", f"model.base_url={stub.url}",
                              f"model.name={MODEL}", f"model.client={kind}", "model.concurrency=4", "dataset.n=3"])
        result = run(cfg, output_dir=base / "out")
        lines = (result.output_dir / "results" / "scored.jsonl").read_text().splitlines()
        volatile = ("cached", "timestamp", "latency_s", "run_id")
        scored[kind] = sorted(json.dumps({k: v for k, v in json.loads(line).items() if k not in volatile},
                                         sort_keys=True) for line in lines)
    assert scored["http"] == scored["official"] and len(scored["http"]) > 3


def each_client(proxy: ChatProxy, faults: list[Any], call: Callable[[OpenAIBackend], Any],
                **cfg: Any) -> dict[str, Any]:
    """What ``call(backend)`` gives through each client, the same faults queued in front of each."""
    found: dict[str, Any] = {}
    for kind, backend in backends(proxy.url, **cfg).items():
        try:
            backend.identity()
            proxy.reset()
            proxy.faults.clear()
            proxy.faults.extend(faults)
            try:
                found[kind] = call(backend)
            except BackendError as exc:
                found[kind] = normalized(str(exc))
            found[kind + " chats"] = len(proxy.chats)
        finally:
            proxy.faults.clear()  # what one client left unused must not meet the other's identity probe
            backend.close()
    return found


def normalized(message: str) -> str:
    """An error text without what differs from attempt to attempt (the time spent, the transport's own class)."""
    message = re.sub(r"on \d+ attempt\(s\) over [\d.]+ s", "on N attempt(s) over T s", message)
    return re.sub(r"connection refused or dropped \(\w+\)", "connection refused or dropped (CAUSE)", message)


def test_busy_and_dropped_replies_are_retried_alike_and_the_server_is_asked_as_often(proxy: ChatProxy) -> None:
    faults = [Status(429, {"Retry-After": "0.05"}), Status(503, {"retry-after-ms": "30"}), Drop(),
              Status(502), Status(504)]
    found = each_client(proxy, faults, lambda b: without_latency(b.generate(request(7))))
    assert found["http"] == found["official"] and found["http"]["error"] is None
    assert found["http chats"] == found["official chats"] == 6


def test_a_body_that_is_not_json_and_an_error_status_are_the_same_failed_requests(proxy: ChatProxy) -> None:
    faults = [Garbage(), Status(400, body={"error": {"message": "context length exceeded"}}),
              Status(422, body={"detail": "bad field"}), Status(500, body={"error": "plain"})]
    found = each_client(proxy, faults, lambda b: [without_latency(b.generate(request(i))) for i in range(4)])
    assert found["http"] == found["official"]
    errors = [c["error"] for c in found["http"]]
    assert errors[0].startswith("unreadable reply") and "502 Bad Gateway" in errors[0]
    assert errors[1:] == ["the server answered HTTP 400: context length exceeded",
                          "the server answered HTTP 422: bad field", "the server answered HTTP 500: Error code: 500"]


@pytest.mark.parametrize("fault", [
    Status(401, body={"error": {"message": "Incorrect API key provided: sk-abc****wxyz"}}),
    Status(403, body={"error": {"message": "forbidden"}}),
    Status(404, body={"error": {"message": "model not found"}}),
], ids=["401", "403", "404"])
def test_a_refused_key_or_a_vanished_model_stops_the_run_with_the_same_error(
        proxy: ChatProxy, fault: Status, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-abcdefwxyz")
    found = each_client(proxy, [fault], lambda b: b.generate(request(1)), api_key_env=KEY_ENV)
    assert found["http"] == found["official"]
    assert isinstance(found["http"], str) and "sk-abc" not in found["http"]
    assert ("refused the client" in found["http"]) == (fault.status != 404)


def test_a_server_that_stays_busy_ends_in_the_same_error(proxy: ChatProxy) -> None:
    found = each_client(proxy, [Status(503)] * 1000, lambda b: b.generate(request(1)), retry_budget_s=0.2)
    assert found["http"] == found["official"] and "busy or rate limited" in found["http"]


def test_a_request_slower_than_the_timeout_ends_in_the_same_error(stub: OpenAIStub) -> None:
    found = {}
    for kind, backend in backends(stub.url, request_timeout_s=0.2, retry_budget_s=0.0).items():
        try:
            backend.identity()
            stub.delay_s = 1.0
            with pytest.raises(BackendError) as caught:
                backend.generate(request(1))
            found[kind] = normalized(str(caught.value))
        finally:
            stub.delay_s = 0.0
            backend.close()
    assert found["http"] == found["official"] and "timed out" in found["http"]
    assert "model.request_timeout_s=0.2" in found["http"]


def test_a_server_that_is_down_is_named_alike_and_not_waited_for() -> None:
    port = free_port()
    found = {}
    for kind, backend in backends(f"http://127.0.0.1:{port}/v1", retry_budget_s=0.5).items():
        with pytest.raises(BackendError) as caught:
            backend.identity()
        backend.close()
        found[kind] = normalized(str(caught.value))
        assert caught.value.__cause__.budget_s < 0.5 + 1e-9  # type: ignore[union-attr]
    assert found["http"] == found["official"]
    assert "connection refused" in found["http"] and "Nothing was asked" in found["http"]



class CountingServer(LoopbackServer):
    """Answers every GET with ``{"n": N}``; counts the connections it accepted; with ``close_after`` it closes
    each connection after one reply without saying so (no ``Connection: close``), as an idle timeout does."""

    def __init__(self, close_after: bool) -> None:
        super().__init__()
        self.close_after = close_after
        self.connections = 0
        self.replies = 0

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                server.connections += 1

            def do_GET(self) -> None:
                server.replies += 1
                data = json.dumps({"n": server.replies}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = server.close_after

        return Handler


@pytest.mark.parametrize("close_after", [False, True], ids=["kept-alive", "closed-by-the-server"])
def test_one_connection_serves_many_requests_and_one_the_server_closed_is_not_reused(close_after: bool) -> None:
    with CountingServer(close_after) as server:
        client = HTTPClient(f"http://127.0.0.1:{server.port}/v1", "key", timeout_s=5.0)
        try:
            replies = []
            for _ in range(3):
                replies.append(client.get("/models"))
                time.sleep(0.05)  # lets the server's close reach this side before the next request
        finally:
            client.close()
    # A reused dead connection would have failed a request (RemoteDisconnected), not answered it.
    assert replies == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert server.connections == (3 if close_after else 1)
