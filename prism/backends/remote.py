"""What every remote backend reads from the ``model`` config the same way: concurrency, timeout, retries.

Ollama and OpenAI-compatible backends both take these settings from here, so ``model.concurrency``,
``model.request_timeout_s`` and the ``model.retry_*`` keys mean one thing whatever serves the model.
Concurrency itself is applied by :func:`prism.inference.dispatch`, which keeps up to a backend's
``concurrency`` requests in flight; a remote backend only has to be safe to call from that many threads.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from prism.backends.base import BackendError
from prism.backends.retry import RetriesExhausted, RetryPolicy, Transient, call_with_retries
from prism.config import RemoteModelConfig

T = TypeVar("T")


@dataclass(frozen=True)
class RemoteSettings:
    """Validated transport settings of one remote backend.

    Attributes:
        concurrency: Requests in flight at once (``model.concurrency``, at least 1).
        request_timeout_s: Time allowed for one HTTP request (``model.request_timeout_s``).
        retry: Backoff and budget for transient failures (``model.retry_budget_s``,
            ``model.retry_base_delay_s``, ``model.retry_max_delay_s``).
    """

    concurrency: int
    request_timeout_s: float
    retry: RetryPolicy

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

    Shared by the remote backends so they retry, and report running out of retries, the same way.

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
    try:
        return call_with_retries(call, classify, settings.retry, label=label)
    except RetriesExhausted as exc:
        raise BackendError(
            f"{who} did not answer {endpoint}: {exc} (model.retry_budget_s={settings.retry.budget_s:g}). "
            f"{fix_for(exc.reason)} {kept}"
        ) from exc
