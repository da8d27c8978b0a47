"""Retrying transient failures of a model server: exponential backoff, full jitter, one time budget.

One implementation for every remote backend (Ollama, OpenAI-compatible servers). A backend hands over the
call and a classifier that says which exceptions are transient (a refused or dropped connection, a
timeout, a busy server) and, when the server said so, how long to wait (``Retry-After``). This module
decides when to try again and when to stop; stopping raises :class:`RetriesExhausted`, which the backend
turns into its own :class:`~prism.backends.base.BackendError` saying where it tried, what failed and what
to do. Nothing here knows about a particular server or client library except :func:`transport_failure`,
which reads ``httpx`` exceptions (both official clients are built on httpx).
"""

from __future__ import annotations

import email.utils
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

# Jitter only spreads the retries of concurrent requests apart and never changes a result, so it comes
# from a private generator instead of a seeded one (seeds are reserved for what can change results).
_JITTER = random.Random()

# Statuses that mean "not now" rather than "never": rate limited, or a busy or restarting server behind
# a proxy (Ollama itself answers 503 when its request queue is full, OLLAMA_MAX_QUEUE).
TRANSIENT_STATUSES = frozenset({408, 429, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """How long to keep trying and how to space the attempts.

    Attributes:
        budget_s: Time allowed for retrying, counted from the first failure of a call; 0 disables retries.
            An attempt already started is bounded by the client's own timeout, not by the budget.
        base_delay_s: Backoff cap of the first retry; each further retry doubles it.
        max_delay_s: Largest backoff cap.
        refused_budget_s: A shorter budget for failures marked :attr:`Transient.refused` (the connection
            could not be made at all), or None to give them the full budget. Used for a server that was
            never reached: it is most likely not running, and waiting out the budget would only delay that news.
    """

    budget_s: float = 30.0
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    refused_budget_s: float | None = None

    def __post_init__(self) -> None:
        """Reject values that would never retry sensibly.

        Raises:
            ValueError: If a value is negative, not finite, or the delays are not positive.
        """
        if not (math.isfinite(self.budget_s) and self.budget_s >= 0):
            raise ValueError(f"the retry budget must be a number of seconds >= 0, not {self.budget_s!r}")
        if self.refused_budget_s is not None and not (math.isfinite(self.refused_budget_s)
                                                      and self.refused_budget_s >= 0):
            raise ValueError(f"the refused-connection budget must be >= 0 seconds, not {self.refused_budget_s!r}")
        for name, value in (("base_delay_s", self.base_delay_s), ("max_delay_s", self.max_delay_s)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"retry {name} must be a number of seconds > 0, not {value!r}")

    def backoff(self, retry: int, rng: random.Random = _JITTER) -> float:
        """The wait before retry number ``retry`` (0-based): uniform in [0, min(max, base * 2**retry)].

        Full jitter (rather than a fixed doubling) keeps concurrent requests that failed together from
        retrying together and failing together again.
        """
        cap = min(self.max_delay_s, self.base_delay_s * 2.0 ** min(retry, 62))
        return rng.uniform(0.0, cap)


@dataclass(frozen=True)
class Transient:
    """A classifier's verdict that a failure is worth retrying.

    Attributes:
        reason: What failed, for logs and the final error (``connection refused``, ``timed out``...).
        retry_after_s: The wait the server asked for (``Retry-After``), or None to use the backoff.
        refused: The connection could not be made at all (refused, unreachable): nothing reached a server.
    """

    reason: str
    retry_after_s: float | None = None
    refused: bool = False


class RetriesExhausted(Exception):
    """A transient failure outlasted the retry budget (or the server asked to wait beyond it)."""

    def __init__(self, reason: str, attempts: int, elapsed_s: float, budget_s: float) -> None:
        """Record what kept failing and for how long.

        Args:
            reason: The last failure's :attr:`Transient.reason`.
            attempts: How many attempts were made in all.
            elapsed_s: Seconds from the first failure to giving up.
            budget_s: The budget that ran out.
        """
        super().__init__(f"{reason} on {attempts} attempt(s) over {elapsed_s:.1f} s")
        self.reason = reason
        self.attempts = attempts
        self.elapsed_s = elapsed_s
        self.budget_s = budget_s


def call_with_retries(
    call: Callable[[], T],
    classify: Callable[[Exception], Transient | None],
    policy: RetryPolicy,
    *,
    label: str = "request",
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random = _JITTER,
) -> T:
    """Return ``call()``, retrying the failures ``classify`` calls transient until the budget is spent.

    The last wait is shortened to end exactly when the budget does, so a server that comes back just
    in time is still reached; a ``Retry-After`` beyond the remaining budget ends the retries at once.
    A failure marked ``refused`` gets ``policy.refused_budget_s`` when that is set.
    Safe to use from many threads at once: all state is local to the call.

    Args:
        call: One attempt. It is called again, unchanged, after each transient failure.
        classify: Returns a :class:`Transient` for a retryable exception, None for any other.
        policy: Budget and backoff.
        label: Names the call in log lines (``Ollama at http://... /api/chat``).
        clock: Monotonic seconds (replaced in tests).
        sleep: Waits (replaced in tests).
        rng: Source of jitter.

    Returns:
        What ``call`` returned on its first success.

    Raises:
        RetriesExhausted: When a transient failure outlasts the budget; chained to the last exception.
        Exception: Whatever ``call`` raised that ``classify`` did not call transient, unchanged.
    """
    first_failure: float | None = None
    attempts = 0
    while True:
        attempts += 1
        try:
            return call()
        except Exception as exc:
            transient = classify(exc)
            if transient is None:
                raise
            now = clock()
            first_failure = now if first_failure is None else first_failure
            elapsed = now - first_failure
            budget = policy.budget_s
            if transient.refused and policy.refused_budget_s is not None:
                budget = min(budget, policy.refused_budget_s)
            remaining = budget - elapsed
            asked = transient.retry_after_s
            if remaining <= 0 or (asked is not None and asked > remaining):
                raise RetriesExhausted(transient.reason, attempts, elapsed, budget) from exc
            delay = min(asked if asked is not None else policy.backoff(attempts - 1, rng), remaining)
            log.warning("%s: %s; retry %d in %.2f s (%.1f of %g s retry budget used)", label,
                        transient.reason, attempts, delay, elapsed, budget)
            sleep(delay)


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date), or None if absent/bad."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # HTTP dates are GMT; a naive one means the same
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def transient_status(status: int, retry_after: str | None = None) -> Transient | None:
    """A :class:`Transient` for an HTTP status that means "try again later", else None."""
    if status not in TRANSIENT_STATUSES:
        return None
    return Transient(f"HTTP {status}", parse_retry_after(retry_after))


def transport_failure(exc: BaseException) -> Transient | None:
    """A :class:`Transient` for a connection that could not be made, timed out or was dropped, else None.

    Reads ``httpx`` exceptions and the builtin ``ConnectionError`` (the official ``ollama`` client turns
    httpx's ``ConnectError`` into one). Other transport errors (an unsupported scheme, a malformed request)
    are mistakes that retrying cannot fix, so they are not transient.
    """
    import httpx

    if isinstance(exc, httpx.TimeoutException):
        return Transient(f"timed out ({type(exc).__name__})")
    # A bare ConnectionError is what the ollama client raises for httpx's ConnectError; its subclasses
    # other than ConnectionRefusedError (reset, broken pipe, aborted) mean an established connection died.
    if isinstance(exc, httpx.ConnectError | ConnectionRefusedError) or type(exc) is ConnectionError:
        return Transient("connection refused or host unreachable", refused=True)
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError | ConnectionError):
        return Transient(f"connection dropped ({type(exc).__name__})")
    return None
