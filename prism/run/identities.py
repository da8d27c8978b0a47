"""The identity each model server last answered with, kept in the completion store for a dry run.

Store keys hold the model's digest, which a remote backend learns only by asking its server. A run records
the identity it read under (backend, model name, address); a dry run, which asks nothing, reads it back
(:mod:`prism.run.dry_run`).
"""

from __future__ import annotations

from prism.backends.base import Backend
from prism.backends.pool import EndpointPool
from prism.backends.remote import RemoteBackend
from prism.run.inference import utc_now
from prism.run.store import CompletionStore
from prism.types import ModelIdentity


def address(backend: Backend) -> str:
    """Where a backend's server is (its configured address), or ``""`` for one without a server."""
    return backend.address() if isinstance(backend, RemoteBackend | EndpointPool) else ""


def record_identity(store: CompletionStore, backend: Backend, identity: ModelIdentity) -> None:
    """Remember the identity a run read, for a later dry run of the same backend, model and address."""
    store.record_identity(address(backend), identity.backend, identity.name, identity.digest, identity.details,
                          utc_now())
