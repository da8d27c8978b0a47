"""One run over many servers of one model: an endpoint pool (``model.endpoints``).

A lab serves one model from several machines. With ``model.endpoints=[URL, ...]`` the OpenAI-compatible and
Ollama backends become an :class:`EndpointPool`: one backend per URL (the same settings, its address set to
that URL), seen by the run path as one :class:`~prism.backends.base.Backend`:

- **Same model everywhere.** Before inference every endpoint is probed, all at once, and must serve the same
  model (:meth:`~prism.backends.remote.RemoteBackend.member_identity`: Ollama the same tag and digest; an
  OpenAI-compatible server the same id and model-list entry in ``/models`` and the same answer to one fixed
  greedy prompt). An unreachable endpoint or a mismatch stops the run before inference, naming the URL. The
  pool's digest leaves the URLs out, so the same model behind other URLs serves the same store cells; a run
  with ``model.base_url`` / ``model.host`` alone keeps the digest it always had.
- **Dispatch.** Each request goes to the endpoint with the fewest requests in flight, ties in turn (round
  robin), each endpoint up to ``model.concurrency``; the pool's :attr:`~EndpointPool.concurrency` is their
  sum. The completion says which endpoint answered (``endpoint``, an optional raw-record field that is not
  part of the completion key).
- **A dying endpoint.** When an endpoint's retry budget runs out (or it answers that it no longer serves the
  model), it is taken out of the pool: its requests in flight stop retrying there and are asked again on the
  others, each cell answered once. The run fails only when no endpoint is left, keeping every answered cell
  (the same command resumes).

Nothing here knows a particular server: a backend takes part by declaring the ``endpoints`` capability in
its registry entry and filling in :class:`~prism.backends.remote.RemoteBackend`'s ``address_field``,
``normalize_endpoint`` and ``member_identity``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from prism.backends.base import BackendError, Request
from prism.backends.remote import RESUMABLE, RemoteBackend, RemoteModelConfig
from prism.config import ModelConfig
from prism.types import Completion, ModelIdentity, canonical_json

log = logging.getLogger(__name__)

#: The identity detail (``prism.model.endpoints`` tag) that lists a pool's URLs, comma-separated, in order.
ENDPOINTS_DETAIL = "endpoints"
#: How :meth:`EndpointPool.address` starts: the key a dry run finds the pool's recorded identity by.
ADDRESS_PREFIX = "pool:"


@dataclass
class Endpoint:
    """One server of a pool and what it did in this run.

    Attributes:
        url: Its address, normalized as the backend writes it.
        backend: The backend that talks to it.
        in_flight: Requests it is answering now.
        answered: Completions it gave (failed requests included).
        failed: Of those, failed requests (``error`` set: an error status, an unreadable reply).
        reasked: Cells in flight here when it was taken out, asked again on another endpoint.
        gone: Why it was taken out of the pool, or None while it serves.
    """

    url: str
    backend: RemoteBackend
    in_flight: int = 0
    answered: int = 0
    failed: int = 0
    reasked: int = 0
    gone: str | None = None


@dataclass(frozen=True)
class EndpointCount:
    """What one endpoint did, for the end of a run (:meth:`EndpointPool.counts`)."""

    url: str
    answered: int
    failed: int
    reasked: int
    gone: str | None

    def line(self) -> str:
        """One line for the terminal: the URL, its counts and, when it left the pool, why."""
        text = f"{self.url}: {self.answered} answered"
        if self.failed:
            text += f" ({self.failed} failed requests)"
        if self.gone is not None:
            text += f"; taken out of the pool, {self.reasked} cells in flight there asked elsewhere ({self.gone})"
        return text


def pool_endpoints(model: RemoteModelConfig, factory: type[RemoteBackend]) -> list[str]:
    """``model.endpoints`` checked: each URL normalized, none twice, and the one address setting among them.

    Raises:
        BackendError: For a URL the backend does not accept (named ``model.endpoints[i]``), a URL given twice,
            or a ``model.base_url`` / ``model.host`` that is set but not one of the endpoints.
    """
    raw = list(getattr(model, "endpoints", None) or [])
    urls: list[str] = []
    for i, url in enumerate(raw):
        normalized = factory.normalize_endpoint(str(url), f"model.endpoints[{i}]")
        if normalized in urls:
            raise BackendError(f"model.endpoints lists {normalized} twice (entries {urls.index(normalized)} and {i}); "
                               "list each server once: a server listed twice would get twice its share of requests.")
        urls.append(normalized)
    field = factory.address_field
    single = getattr(model, field, None)
    if single is not None and str(single).strip():
        normalized = factory.normalize_endpoint(str(single), f"model.{field}")
        if normalized not in urls:
            raise BackendError(f"model.{field}={single!r} is not one of model.endpoints ({', '.join(urls)}). With "
                               f"model.endpoints set the pool is model.endpoints: add it to them, or set "
                               f"model.{field}=null.")
    return urls


class EndpointPool:
    """Many servers of one model as one backend (module docstring).

    Safe to call from :attr:`concurrency` threads at once: the choice of endpoint and the counts are kept
    under one condition variable; the requests themselves run outside it.
    """

    def __init__(self, endpoints: Sequence[tuple[str, RemoteBackend]], per_endpoint: int) -> None:
        """Take the endpoints' backends (built, nothing sent yet) and the requests each may have in flight.

        Raises:
            BackendError: If there is no endpoint or ``per_endpoint`` is below 1.
        """
        if not endpoints:
            raise BackendError("an endpoint pool needs at least one URL in model.endpoints.")
        if per_endpoint < 1:
            raise BackendError(f"model.concurrency must be >= 1 per endpoint, not {per_endpoint}.")
        self._endpoints = [Endpoint(url, backend) for url, backend in endpoints]
        self.per_endpoint = per_endpoint
        #: Requests the run may have in flight: ``model.concurrency`` on every endpoint.
        self.concurrency = per_endpoint * len(self._endpoints)
        self._turn = 0  # where the round robin over tied endpoints starts next
        self._changed = threading.Condition()
        self._identity: ModelIdentity | None = None
        self._identity_lock = threading.Lock()

    @classmethod
    def from_config(cls, model: ModelConfig, factory: Callable[[Any], Any]) -> EndpointPool:
        """One backend per URL of ``model.endpoints``, each with the config's settings and its own address.

        Raises:
            BackendError: For a bad, repeated or missing URL (:func:`pool_endpoints`), or a setting the
                backend refuses.
        """
        if not (isinstance(model, RemoteModelConfig) and isinstance(factory, type)
                and issubclass(factory, RemoteBackend)):
            raise BackendError(f"{factory!r} cannot serve a pool of endpoints: it is not a RemoteBackend.")
        urls = pool_endpoints(model, factory)
        built: list[tuple[str, RemoteBackend]] = []
        try:
            for url in urls:
                changes: dict[str, Any] = {"endpoints": [], factory.address_field: url}
                member = dataclasses.replace(model, **changes)
                built.append((url, factory(member)))
        except BaseException:
            for _, backend in built:
                backend.close()
            raise
        return cls(built, built[0][1].concurrency)

    # -- what the run path asks ---------------------------------------------------------------------------

    @property
    def urls(self) -> list[str]:
        """The endpoints' URLs, in the order of ``model.endpoints``."""
        return [e.url for e in self._endpoints]

    def address(self) -> str:
        """Where the pool is (no request is sent): ``pool:`` and its URLs, for the dry run's recorded identity."""
        return ADDRESS_PREFIX + ",".join(self.urls)

    def identity(self) -> ModelIdentity:
        """The model's identity, once every endpoint has been probed and found to serve the same model.

        Raises:
            BackendError: Naming every endpoint that cannot be reached or refuses, or the first that serves
                another model than the first endpoint does, and what differs; nothing was asked.
        """
        with self._identity_lock:
            if self._identity is None:
                self._identity = self._probe_all()
            return self._identity

    def _probe_all(self) -> ModelIdentity:
        failures: list[str] = []

        def probe(endpoint: Endpoint) -> tuple[ModelIdentity, dict[str, Any]] | None:
            try:
                return endpoint.backend.member_identity()
            except BackendError as exc:
                failures.append(f"{endpoint.url}: {exc}")
                return None

        with ThreadPoolExecutor(max_workers=len(self._endpoints), thread_name_prefix="prism-probe") as probes:
            found = list(probes.map(probe, self._endpoints))
        if failures:
            raise BackendError(
                f"{len(failures)} of the {len(self._endpoints)} endpoints of model.endpoints cannot be used, so "
                f"nothing was asked. {' | '.join(sorted(failures))} -- Start or fix them, or take them out of "
                "model.endpoints."
            )
        first_url = self._endpoints[0].url
        first_identity, first_facts = found[0]  # type: ignore[misc]  # None only with a failure, raised above
        for endpoint, result in zip(self._endpoints[1:], found[1:], strict=True):
            assert result is not None
            identity, facts = result
            differs = _differences(first_facts, facts)
            if differs or identity.digest != first_identity.digest:
                raise BackendError(
                    f"the endpoint {endpoint.url} serves another model than {first_url}, the first of "
                    f"model.endpoints ({'; '.join(differs) or 'another digest'}), so nothing was asked. A pool must "
                    f"serve one model everywhere: serve {first_identity.name!r} with the same weights and settings "
                    f"on {endpoint.url}, or take it out of model.endpoints."
                )
        field = self._endpoints[0].backend.address_field
        details = {k: v for k, v in first_identity.details.items() if k != field}
        details[ENDPOINTS_DETAIL] = ",".join(self.urls)
        log.info("endpoint pool: %d endpoints serve %s (digest %s): %s", len(self._endpoints), first_identity.name,
                 first_identity.digest[:12], ", ".join(self.urls))
        return ModelIdentity(first_identity.name, first_identity.backend, first_identity.digest, details)

    def check_label_probs(self, label_sets: Mapping[str, tuple[str, ...]]) -> None:
        """Every endpoint must give label probabilities (each checks its own server).

        Raises:
            BackendError: Naming the endpoint that gives none, or the pool's identity failure.
        """
        self.identity()
        for endpoint in self._endpoints:
            checker: Any = endpoint.backend
            try:
                checker.check_label_probs(label_sets)
            except BackendError as exc:
                raise BackendError(f"the endpoint {endpoint.url} of model.endpoints: {exc}") from None

    def generate(self, request: Request) -> Completion:
        """Ask the endpoint with the fewest in flight; if it is taken out meanwhile, ask another.

        Returns:
            The completion, its ``endpoint`` naming the server that answered.

        Raises:
            BackendError: When no endpoint is left, naming each and why it left (everything answered is kept).
        """
        self.identity()
        while True:
            endpoint = self._acquire()
            try:
                completion = endpoint.backend.generate(request)
            except Exception as exc:
                if not self._left(endpoint, exc):
                    raise
                continue
            with self._changed:
                endpoint.in_flight -= 1
                endpoint.answered += 1
                endpoint.failed += completion.error is not None
                self._changed.notify_all()
            return dataclasses.replace(completion, endpoint=endpoint.url)

    def _acquire(self) -> Endpoint:
        """The serving endpoint with the fewest in flight and a free slot (ties in turn); waits for a slot.

        Raises:
            BackendError: When every endpoint has been taken out.
        """
        n = len(self._endpoints)
        with self._changed:
            while True:
                serving = [e for e in self._endpoints if e.gone is None]
                if not serving:
                    raise self._none_left()
                order = [self._endpoints[(self._turn + i) % n] for i in range(n)]
                free = [e for e in order if e.gone is None and e.in_flight < self.per_endpoint]
                if free:
                    chosen = min(free, key=lambda e: e.in_flight)  # min keeps the first of a tie: the turn
                    chosen.in_flight += 1
                    self._turn = (self._endpoints.index(chosen) + 1) % n
                    return chosen
                self._changed.wait()

    def _left(self, endpoint: Endpoint, exc: Exception) -> bool:
        """Account for a request that raised: True when the endpoint is (now) out and the cell is asked again.

        A BackendError from a serving endpoint (its retry budget ran out, or its answer means it cannot go on)
        takes it out of the pool; any error from an endpoint already taken out is the abandoned retry of a
        cell that was in flight there. Anything else is not the endpoint's doing and goes up unchanged.
        """
        with self._changed:
            endpoint.in_flight -= 1
            if endpoint.gone is None and isinstance(exc, BackendError):
                endpoint.gone = " ".join(str(exc).split())[:300]
                left = sum(e.gone is None for e in self._endpoints)
                log.warning("endpoint %s is taken out of the pool (%d of %d left); its cells in flight are asked "
                            "again on the others: %s", endpoint.url, left, len(self._endpoints), endpoint.gone)
                endpoint.backend.abandon()
            elif endpoint.gone is None:
                self._changed.notify_all()
                return False
            endpoint.reasked += 1
            self._changed.notify_all()
            return True

    def _none_left(self) -> BackendError:
        gone = "; ".join(f"{e.url} ({e.answered} answered): {e.gone}" for e in self._endpoints)
        return BackendError(f"every endpoint of model.endpoints was taken out of the pool: {gone}. {RESUMABLE}")

    def counts(self) -> list[EndpointCount]:
        """What each endpoint did so far, in the order of ``model.endpoints``."""
        with self._changed:
            return [EndpointCount(e.url, e.answered, e.failed, e.reasked, e.gone) for e in self._endpoints]

    def close(self) -> None:
        """Close every endpoint's connections."""
        for endpoint in self._endpoints:
            endpoint.backend.close()


def _differences(first: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """``<fact> <value here> where the first has <value>`` for each fact two endpoints do not share."""
    out = []
    for key in sorted(set(first) | set(other)):
        if canonical_json(first.get(key)) != canonical_json(other.get(key)):
            out.append(f"{key} {_short(other.get(key))} where the first has {_short(first.get(key))}")
    return out


def _short(value: Any) -> str:
    text = canonical_json(value)
    return text if len(text) <= 120 else text[:117] + "..."
