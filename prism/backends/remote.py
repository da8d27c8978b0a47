"""What every remote backend reads from the ``model`` config the same way: concurrency, timeout, retries.

Ollama and OpenAI-compatible backends both take these settings from here, so ``model.concurrency``,
``model.request_timeout_s`` and the ``model.retry_*`` keys mean one thing whatever serves the model.
Concurrency itself is applied by :func:`prism.inference.dispatch`, which keeps up to a backend's
``concurrency`` requests in flight; a remote backend only has to be safe to call from that many threads.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from prism.backends.base import BackendError
from prism.backends.retry import RetriesExhausted, RetryPolicy, Transient, call_with_retries, transport_failure
from prism.config import RemoteModelConfig

T = TypeVar("T")

# How long to keep retrying a refused connection to a server that has never answered: long enough for one
# that is just starting, short enough that a server that is not running is reported within seconds.
FIRST_CONTACT_BUDGET_S = 2.0


@dataclass(frozen=True)
class RemoteSettings:
    """Validated transport settings of one remote backend.

    Attributes:
        concurrency: Requests in flight at once (``model.concurrency``, at least 1).
        request_timeout_s: Time allowed for one HTTP request (``model.request_timeout_s``).
        retry: Backoff and budget for transient failures (``model.retry_budget_s``,
            ``model.retry_base_delay_s``, ``model.retry_max_delay_s``).
        reached: Set once the server has answered a call; until then a refused connection gets only
            :data:`FIRST_CONTACT_BUDGET_S` (the full budget is for a server that goes away mid-run).
    """

    concurrency: int
    request_timeout_s: float
    retry: RetryPolicy
    reached: threading.Event = dataclasses.field(default_factory=threading.Event, compare=False, repr=False)

    @classmethod
    def from_config(cls, model: RemoteModelConfig) -> RemoteSettings:
        """Read and check the settings (the schema holds their defaults).

        Raises:
            BackendError: Naming the key and the value it got, when one is out of range.
        """
        concurrency = _number(model, "concurrency")
        if concurrency != int(concurrency) or concurrency < 1:
            raise BackendError(f"model.concurrency must be a whole number >= 1, not {concurrency!r}; "
                               "it is how many requests PRISM keeps in flight at once.")
        timeout = _number(model, "request_timeout_s")
        if not timeout > 0:
            raise BackendError(f"model.request_timeout_s must be > 0 seconds, not {timeout!r}.")
        try:
            retry = RetryPolicy(
                budget_s=_number(model, "retry_budget_s"),
                base_delay_s=_number(model, "retry_base_delay_s"),
                max_delay_s=_number(model, "retry_max_delay_s"),
            )
        except ValueError as exc:
            raise BackendError(f"model.retry_* is out of range: {exc}.") from exc
        return cls(concurrency=int(concurrency), request_timeout_s=timeout, retry=retry)


def quiet_transport_logs() -> None:
    """Keep httpx from logging one INFO line per request, unless its logger was configured on purpose.

    Both official clients send through httpx (ollama) or its successor httpx2 (openai 3.x), which log every
    request at INFO; under Hydra's INFO logging that is hundreds of lines beside the progress bar. Retries
    and failures are logged by PRISM itself, at WARNING.
    """
    for name in ("httpx", "httpx2"):
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.WARNING)


def _number(model: RemoteModelConfig, key: str) -> float:
    """``model.<key>`` as a finite float.

    The schema's types do not rule out ``inf`` or ``nan``, nor, for a config built in code, any value at all.
    """
    value = getattr(model, key)
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        raise BackendError(f"model.{key} must be a number, not {value!r}.")
    return number


def retry_or_fail(
    call: Callable[[], T],
    classify: Callable[[Exception], Transient | None],
    settings: RemoteSettings,
    *,
    label: str,
    who: str,
    endpoint: str,
    fix_for: Callable[[str], str],
    kept: str,
) -> T:
    """``call()`` with transient failures retried; a one-paragraph BackendError once the budget is spent.

    Shared by the remote backends so they retry, and report running out of retries, the same way. Until
    the server has answered once, a refused connection is retried for :data:`FIRST_CONTACT_BUDGET_S` only.

    Args:
        call: One attempt.
        classify: Which failures are transient (see ``prism.backends.retry``).
        settings: The backend's validated settings (retry policy).
        label: Where the request goes, for log lines.
        who: How the error names the server (``Ollama at http://...``).
        endpoint: The API path.
        fix_for: How to fix what kept failing, given the last failure's reason.
        kept: What the error says about collected work and how to go on (a sentence).
    """
    policy = settings.retry
    if not settings.reached.is_set():
        policy = dataclasses.replace(policy, refused_budget_s=FIRST_CONTACT_BUDGET_S)
    try:
        result = call_with_retries(call, lambda exc: _mark_refused(classify(exc), exc), policy, label=label)
    except RetriesExhausted as exc:
        budget = f"model.retry_budget_s={settings.retry.budget_s:g}"
        if exc.budget_s < settings.retry.budget_s:
            budget = f"never reached, so not retried for the full {budget}"
        raise BackendError(f"{who} did not answer {endpoint}: {exc} ({budget}). {fix_for(exc.reason)} {kept}") from exc
    settings.reached.set()
    return result


def _mark_refused(transient: Transient | None, exc: BaseException) -> Transient | None:
    """Mark a transient failure ``refused`` when it, or an exception behind it, is a connection never made.

    A client library may wrap the transport error (openai's ``APIConnectionError`` covers refused and
    dropped connections alike), so the chain of causes is read too.
    """
    if transient is None or transient.refused:
        return transient
    link: BaseException | None = exc
    for _ in range(8):  # a cause chain is short; the bound only guards against a cycle
        if link is None:
            break
        found = transport_failure(link)
        if found is not None and found.refused:
            return dataclasses.replace(transient, refused=True)
        link = link.__cause__ or link.__context__
    return transient
