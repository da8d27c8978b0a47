"""What every backend behind a server shares: its settings, and one base class that does the asking.

Ollama and OpenAI-compatible backends both take their settings from here, so ``model.concurrency``,
``model.request_timeout_s`` and the ``model.retry_*`` keys mean one thing whatever serves the model.
Concurrency itself is applied by :func:`prism.run.inference.dispatch`, which keeps up to a backend's
``concurrency`` requests in flight; a remote backend only has to be safe to call from that many threads.

:class:`RemoteBackend` holds the part that is the same for every server (identity read once under a
lock, one timed request retried within the budget, a failed reply kept as a failed request, warnings
given once); a subclass supplies only what differs, as the hooks of inspect_ai's ``ModelAPI`` do: how
to read the identity, send a body, classify a failure, read a reply, and its fix-it texts.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from prism.backends.base import BackendError, Request
from prism.backends.retry import RetriesExhausted, RetryPolicy, Transient, call_with_retries, transport_failure
from prism.config import ModelConfig
from prism.types import Completion, ModelIdentity, canonical_json

T = TypeVar("T")
log = logging.getLogger(__name__)

# What a run that stops mid-way says about the work it collected.
RESUMABLE = ("Everything collected so far is kept: run the same command again once the server answers and it "
             "resumes where this run stopped.")
NOTHING_ASKED = "Nothing was asked yet: run the same command again once the server answers."

# How long to keep retrying a refused connection to a server that has never answered: long enough for one
# that is just starting, short enough that a server that is not running is reported within seconds.
FIRST_CONTACT_BUDGET_S = 2.0


@dataclass
class RemoteModelConfig(ModelConfig):
    """What every model behind a server shares: requests in flight, timeout and retries."""

    # Requests in flight; raise it to what the server runs at once.
    concurrency: int = 1
    request_timeout_s: float = 120.0
    # Transient failures (refused or dropped connection, timeout, busy server) are retried with
    # exponential backoff and full jitter for at most retry_budget_s after the first failure.
    retry_budget_s: float = 30.0
    retry_base_delay_s: float = 0.5
    retry_max_delay_s: float = 8.0


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


def sent_options(body: Mapping[str, Any]) -> dict[str, Any]:
    """What a record keeps of a request body as ``backend_options``: everything but the messages."""
    return {k: v for k, v in body.items() if k != "messages"}


class RemoteBackend(ABC):
    """A model behind a server, asked through one client shared by every worker thread.

    Subclasses set :attr:`backend` and :attr:`chat_endpoint` and supply the hooks below; the base reads
    ``model.name`` and the transport settings, serialises the identity read, times and retries each
    request, and turns a reply the server could not give into a failed request.
    """

    #: The backend name in records and tags (``ollama``, ``openai``).
    backend: ClassVar[str]
    #: The API path one cell is asked at, for log lines and errors.
    chat_endpoint: ClassVar[str]
    #: The BackendError when ``model.name`` is empty: what to set it to.
    name_needed: ClassVar[str]
    #: Fix-it texts of an error once retries are spent: the server kept saying it is busy (429/503...),
    #: requests kept timing out (``parallel_hint`` names the server's own setting), it could not be reached.
    fix_busy: ClassVar[str]
    parallel_hint: ClassVar[str] = ""
    fix_unreachable: ClassVar[str]
    #: The setting that holds the server's one address (``base_url``, ``host``): each endpoint of a pool
    #: (``model.endpoints``, :mod:`prism.backends.pool`) is a backend with this set to its URL.
    address_field: ClassVar[str] = ""

    def __init__(self, model: RemoteModelConfig) -> None:
        """Read ``model.name`` and the transport settings; nothing is sent until :meth:`identity`.

        Raises:
            BackendError: If ``model.name`` is empty or a transport setting is unusable.
        """
        self._name = model.name.strip()
        if not self._name:
            raise BackendError(self.name_needed)
        self._settings = RemoteSettings.from_config(model)
        self.concurrency = self._settings.concurrency
        quiet_transport_logs()
        self._identity: ModelIdentity | None = None
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        self._abandoned = threading.Event()

    # -- what every server shares -------------------------------------------------------------------------

    def address(self) -> str:
        """Where the server is, as configured (no request is sent).

        With the backend and model name it finds the identity last recorded for this server in the
        completion store (:mod:`prism.run.dry_run`).
        """
        return self._where()

    def identity(self) -> ModelIdentity:
        """The model's identity, read from the server once (by the first of many threads to ask).

        Raises:
            BackendError: If the server cannot be reached within the retry budget, refuses the client or
                does not serve the model (the subclass's message says which and what to do).
        """
        with self._lock:
            if self._identity is None:
                self._identity = self._read_identity()
            return self._identity

    def generate(self, request: Request) -> Completion:
        """Ask for one chat completion.

        Returns:
            The completion; ``error`` set (``text`` None) when the server answered with an error status
            worth asking again, or with a body that is not a chat completion. Such a request is asked
            again on the next run.

        Raises:
            BackendError: When transient failures outlast the retry budget, or the server's answer means
                the run cannot go on (the model is gone, the client is refused).
        """
        self.identity()
        body = self._build(request)
        latency = [0.0]

        def attempt() -> Any:
            start = time.perf_counter()
            try:
                return self._send(body)
            finally:
                latency[0] = time.perf_counter() - start  # the last attempt's, not the retries'

        try:
            reply = self._retrying(attempt, self._endpoint(), RESUMABLE)
        except Exception as exc:
            if self._abandoned.is_set():  # taken out of its pool: the pool asks this cell elsewhere
                raise
            error = self._failed_request(exc)
            if error is None:
                raise
            return self._failed(request, body, latency[0], error)
        return self._read(reply, request, body, latency[0])

    def _endpoint(self) -> str:
        """The path each cell is sent to, as retries and errors name it.

        :attr:`chat_endpoint` unless the backend sends this run's cells elsewhere (``model.chat=false``:
        OpenAI-compatible ``/completions``, Ollama ``/api/generate``).
        """
        return self.chat_endpoint

    def _failed(self, request: Request, body: Mapping[str, Any], latency_s: float, error: str) -> Completion:
        """A failed request: no text, what was sent, and why."""
        return Completion(text=None, latency_s=latency_s, backend_options=self._options(request, body), error=error)

    def _retrying(self, call: Callable[[], T], endpoint: str, kept: str) -> T:
        """``call()`` with transient failures retried; a BackendError once the budget is spent.

        Args:
            call: One attempt.
            endpoint: The API path, for log lines and the error.
            kept: What the error says about collected work and how to go on (a sentence).
        """
        return retry_or_fail(call, self._classify_unless_abandoned, self._settings,
                             label=f"{self._where()}{endpoint}", who=self._who(), endpoint=endpoint,
                             fix_for=self._fix_for, kept=kept)

    def _classify_unless_abandoned(self, exc: Exception) -> Transient | None:
        """:meth:`_classify`, except that nothing is retried once :meth:`abandon` was called."""
        return None if self._abandoned.is_set() else self._classify(exc)

    # -- as one endpoint of a pool (prism.backends.pool) ----------------------------------------------------

    @classmethod
    def normalize_endpoint(cls, raw: str, source: str) -> str:
        """One URL of ``model.endpoints`` checked and written as this backend writes its address.

        Args:
            raw: The URL as configured.
            source: How an error names it (``model.endpoints[1]``).

        Raises:
            BackendError: If it is not an address this backend accepts, or the backend serves no pools.
        """
        raise BackendError(f"the {cls.backend} backend cannot serve a pool of endpoints ({source}={raw!r}).")

    def member_identity(self) -> tuple[ModelIdentity, dict[str, Any]]:
        """This server's identity as one endpoint of a pool, and what every endpoint of the pool must share.

        Returns:
            The identity with a digest that leaves the server's address out (so the same model behind other
            URLs serves the same store cells), and the facts compared across endpoints, by name.

        Raises:
            BackendError: If the server cannot be reached or does not serve the model (as :meth:`identity`).
        """
        raise BackendError(f"the {self.backend} backend cannot serve a pool of endpoints.")

    def abandon(self) -> None:
        """Stop retrying: the pool took this endpoint out.

        Its requests in flight fail at their next error and are asked on another endpoint instead of waiting
        out the retry budget here.
        """
        self._abandoned.set()

    def _warn_once(self, kind: str, message: str, *args: Any) -> None:
        """Log a WARNING the first time ``kind`` happens in this run (many threads may meet it at once)."""
        with self._lock:
            if kind in self._warned:
                return
            self._warned.add(kind)
        log.warning(message, *args)

    def _warn_if_served_changed(self, completion: Completion, pinned: Mapping[str, Any], server: str) -> Completion:
        """Warn once per answer seen when a reply names another model than the identity probe did.

        The model digest pins what the probe before the first cell was answered by; a server that swaps the
        model behind a name mid-run (an alias moved to a new snapshot) is said so, and every record keeps what
        its own reply said under ``backend_options.served``.
        """
        said = completion.backend_options["served"]
        if said != pinned and completion.error is None:
            self._warn_once(f"served:{canonical_json(said)}", "%s answered %r as %s, but the probe before the first "
                            "cell was answered as %s; the model digest pins the probe's. Records keep what each "
                            "reply said under backend_options.served.", server, self._name, canonical_json(said),
                            canonical_json(dict(pinned)))
        return completion

    # -- hooks: what differs between servers ----------------------------------------------------------------

    @abstractmethod
    def _read_identity(self) -> ModelIdentity:
        """Ask the server what answers under ``model.name`` and pin it with a digest."""

    @abstractmethod
    def _build(self, request: Request) -> dict[str, Any]:
        """The request body for one cell, exactly as it goes over the wire."""

    @abstractmethod
    def _send(self, body: Mapping[str, Any]) -> Any:
        """Send one body through the client and return its reply (one attempt, no retries)."""

    @abstractmethod
    def _classify(self, exc: Exception) -> Transient | None:
        """Whether a failure is transient (retried within the budget), and why."""

    @abstractmethod
    def _failed_request(self, exc: Exception) -> str | None:
        """For a failure that is not transient: the ``error`` of a failed request, or None to re-raise it.

        Raises:
            BackendError: For an answer after which the run cannot go on (a vanished model, a refused key).
        """

    @abstractmethod
    def _read(self, reply: Any, request: Request, body: Mapping[str, Any], latency_s: float) -> Completion:
        """Turn the client's reply into a Completion (a failed one when it is not a chat completion)."""

    def _options(self, request: Request, body: Mapping[str, Any]) -> dict[str, Any]:
        """What a record keeps as ``backend_options`` of a request; by default the body without messages."""
        return sent_options(body)

    @abstractmethod
    def _where(self) -> str:
        """The server's address as log lines name it, endpoint appended (``Ollama at http://host:port``)."""

    @abstractmethod
    def _who(self) -> str:
        """The server as an error names it, with where its address came from."""

    def _fix_for(self, reason: str) -> str:
        """How to fix what kept failing (the last transient failure's reason), from the subclass's texts."""
        if reason.startswith("HTTP"):
            return self.fix_busy
        if reason.startswith("timed out"):
            return (f"Each request may take up to model.request_timeout_s={self._settings.request_timeout_s:g} s: "
                    f"raise it for a slow model, or lower model.concurrency to what the server runs at "
                    f"once{self.parallel_hint}.")
        return self.fix_unreachable

    @abstractmethod
    def close(self) -> None:
        """Close the client's connections."""
