"""The shared retry loop, on a fake clock: no test here sleeps."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import httpx
import pytest

from prism.backends.base import BackendError
from prism.backends.ollama import OllamaModelConfig
from prism.backends.openai_compat import OpenAIModelConfig
from prism.backends.remote import RemoteSettings
from prism.backends.retry import (
    RetriesExhausted,
    RetryPolicy,
    Transient,
    call_with_retries,
    parse_retry_after,
    transient_status,
    transport_failure,
)


class FakeTime:
    """A clock that only moves when the retry loop sleeps (plus a fixed cost per attempt)."""

    def __init__(self, attempt_cost: float = 0.0) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.attempt_cost = attempt_cost

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def failing(times: int, exc: Exception, clock: FakeTime | None = None):
    calls = {"n": 0}

    def call() -> str:
        calls["n"] += 1
        if clock is not None:
            clock.now += clock.attempt_cost
        if calls["n"] <= times:
            raise exc
        return "ok"

    return call, calls


def classify(exc: Exception) -> Transient | None:
    return Transient("refused") if isinstance(exc, ConnectionRefusedError) else None


def test_transient_failures_are_retried_until_success_with_growing_capped_backoff() -> None:
    t = FakeTime()
    call, calls = failing(5, ConnectionRefusedError(), t)
    policy = RetryPolicy(budget_s=100, base_delay_s=1, max_delay_s=4)
    assert call_with_retries(call, classify, policy, clock=t.clock, sleep=t.sleep, rng=random.Random(0)) == "ok"
    assert calls["n"] == 6 and len(t.sleeps) == 5
    for retry, slept in enumerate(t.sleeps):  # full jitter: anywhere in [0, cap]
        assert 0 <= slept <= min(4, 2**retry)


def test_other_exceptions_pass_through_at_once() -> None:
    t = FakeTime()
    call, calls = failing(1, KeyError("bug"), t)
    with pytest.raises(KeyError):
        call_with_retries(call, classify, RetryPolicy(), clock=t.clock, sleep=t.sleep)
    assert calls["n"] == 1 and t.sleeps == []


def test_budget_bounds_the_time_spent_retrying_and_the_last_wait_ends_on_it() -> None:
    t = FakeTime(attempt_cost=0.1)
    call, calls = failing(10**6, ConnectionRefusedError(), t)
    policy = RetryPolicy(budget_s=5, base_delay_s=0.5, max_delay_s=2)
    with pytest.raises(RetriesExhausted) as caught:
        call_with_retries(call, classify, policy, clock=t.clock, sleep=t.sleep, rng=random.Random(1))
    first_failure = 0.1
    assert t.now - first_failure <= 5 + 0.1 + 1e-9  # the budget, plus the one attempt that ends past it
    assert caught.value.attempts == calls["n"] > 2
    assert caught.value.reason == "refused" and isinstance(caught.value.__cause__, ConnectionRefusedError)


def test_zero_budget_means_no_retry() -> None:
    t = FakeTime()
    call, calls = failing(1, ConnectionRefusedError(), t)
    with pytest.raises(RetriesExhausted):
        call_with_retries(call, classify, RetryPolicy(budget_s=0), clock=t.clock, sleep=t.sleep)
    assert calls["n"] == 1


def test_retry_after_is_honoured_and_one_beyond_the_budget_stops_at_once() -> None:
    t = FakeTime()
    call, _ = failing(1, ConnectionRefusedError(), t)
    call_with_retries(call, lambda e: Transient("429", 3.0), RetryPolicy(budget_s=10), clock=t.clock, sleep=t.sleep)
    assert t.sleeps == [3.0]
    t = FakeTime()
    call, _ = failing(1, ConnectionRefusedError(), t)
    with pytest.raises(RetriesExhausted):
        call_with_retries(call, lambda e: Transient("429", 60.0), RetryPolicy(budget_s=10), clock=t.clock,
                          sleep=t.sleep)
    assert t.sleeps == []


def test_retry_after_header_forms() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("7", now) == 7.0
    assert parse_retry_after("Thu, 01 Jan 2026 12:00:30 GMT", now) == 30.0
    assert parse_retry_after("Thu, 01 Jan 2026 11:00:00 GMT", now) == 0.0  # in the past: now
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None and parse_retry_after("") is None


def test_status_and_transport_classification() -> None:
    assert transient_status(503) == Transient("HTTP 503", None)
    assert transient_status(429, "2") == Transient("HTTP 429", 2.0)
    assert transient_status(404) is None and transient_status(500) is None and transient_status(400) is None
    request = httpx.Request("POST", "http://127.0.0.1:9/api/chat")
    assert transport_failure(httpx.ConnectError("refused", request=request)).reason.startswith("connection refused")
    assert transport_failure(ConnectionError("Failed to connect to Ollama")).reason.startswith("connection refused")
    assert transport_failure(httpx.ReadTimeout("slow", request=request)).reason.startswith("timed out")
    assert transport_failure(httpx.RemoteProtocolError("gone", request=request)).reason.startswith("connection dropped")
    assert transport_failure(ConnectionResetError()).reason.startswith("connection dropped")
    assert transport_failure(httpx.UnsupportedProtocol("ftp", request=request)) is None
    assert transport_failure(ValueError("not json")) is None


def test_policy_and_settings_reject_values_that_cannot_work() -> None:
    with pytest.raises(ValueError, match="budget"):
        RetryPolicy(budget_s=-1)
    with pytest.raises(ValueError, match="base_delay_s"):
        RetryPolicy(base_delay_s=0)
    settings = RemoteSettings.from_config(OllamaModelConfig(name="m", concurrency=4, retry_budget_s=2))
    assert (settings.concurrency, settings.retry.budget_s, settings.request_timeout_s) == (4, 2.0, 120.0)
    for bad, match in (({"concurrency": 0}, "concurrency"), ({"concurrency": 1.5}, "concurrency"),
                       ({"request_timeout_s": 0}, "request_timeout_s"), ({"retry_budget_s": -1}, "retry"),
                       ({"retry_budget_s": "soon"}, "retry_budget_s"), ({"concurrency": True}, "concurrency"),
                       ({"request_timeout_s": float("inf")}, "request_timeout_s")):
        with pytest.raises(BackendError, match=match):
            RemoteSettings.from_config(OpenAIModelConfig(name="m", **bad))



def test_a_refused_connection_gets_the_shorter_budget_and_other_failures_the_full_one() -> None:
    policy = RetryPolicy(budget_s=30, base_delay_s=0.5, max_delay_s=0.5, refused_budget_s=2)
    t = FakeTime()
    call, _ = failing(10**6, ConnectionRefusedError(), t)
    with pytest.raises(RetriesExhausted) as caught:
        call_with_retries(call, lambda exc: Transient("refused", refused=True), policy, clock=t.clock, sleep=t.sleep)
    assert caught.value.budget_s == 2 and t.now == pytest.approx(2)
    t = FakeTime()
    call, _ = failing(10**6, ConnectionRefusedError(), t)
    with pytest.raises(RetriesExhausted) as caught:
        call_with_retries(call, lambda exc: Transient("timed out"), policy, clock=t.clock, sleep=t.sleep)
    assert caught.value.budget_s == 30 and t.now == pytest.approx(30)
    with pytest.raises(ValueError, match="refused-connection budget"):
        RetryPolicy(refused_budget_s=-1)


def test_a_server_never_reached_fails_fast_and_one_that_answered_gets_the_full_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import prism.backends.remote as remote

    t = FakeTime()
    real = remote.call_with_retries
    monkeypatch.setattr(remote, "call_with_retries",
                        lambda *args, **kwargs: real(*args, **kwargs, clock=t.clock, sleep=t.sleep))
    request = httpx.Request("GET", "http://127.0.0.1:9/api/tags")
    refused = httpx.ConnectError("All connection attempts failed", request=request)
    settings = RemoteSettings.from_config(OllamaModelConfig(name="m", retry_budget_s=30, retry_max_delay_s=0.5))

    def attempt(outcome: Exception | None):
        def call() -> str:
            if outcome is not None:
                raise outcome
            return "ok"
        return remote.retry_or_fail(call, transport_failure, settings, label="test", who="the server",
                                    endpoint="/api/tags", fix_for=lambda reason: "Start it.", kept="Nothing asked.")

    with pytest.raises(BackendError) as caught:
        attempt(refused)
    assert caught.value.__cause__.budget_s == remote.FIRST_CONTACT_BUDGET_S and t.now <= remote.FIRST_CONTACT_BUDGET_S
    message = str(caught.value)
    assert "connection refused" in message and "never reached" in message and "model.retry_budget_s=30" in message
    assert "Start it. Nothing asked." in message
    assert attempt(None) == "ok"  # the server answers: from now on it has the whole budget
    t.now = 0.0
    with pytest.raises(BackendError) as caught:
        attempt(refused)
    assert caught.value.__cause__.budget_s == 30 and t.now == pytest.approx(30)
    assert "never reached" not in str(caught.value) and "(model.retry_budget_s=30)" in str(caught.value)


def test_a_wrapped_refused_connection_counts_as_refused() -> None:
    import prism.backends.remote as remote

    request = httpx.Request("GET", "http://127.0.0.1:9/v1/models")
    wrapper = RuntimeError("Connection error.")  # what openai's APIConnectionError is to the classifier
    wrapper.__cause__ = httpx.ConnectError("refused", request=request)
    assert remote._mark_refused(Transient("connection refused or dropped"), wrapper).refused
    dropped = RuntimeError("Connection error.")
    dropped.__cause__ = httpx.RemoteProtocolError("gone", request=request)
    assert not remote._mark_refused(Transient("connection refused or dropped"), dropped).refused
    assert remote._mark_refused(None, wrapper) is None
