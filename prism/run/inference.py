"""Asking the model: raw records, the store lookup, and bounded-concurrency dispatch.

Everything a completion turns into is written here, in arrival order, before any parsing: first the
store (committed), then the run's response log (fsynced). A fatal error mid-run lets the requests already in
flight finish and be written before it propagates, so nothing already collected is lost.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ParamSpec

from prism.backends.base import Backend, Request
from prism.cloze import CLOZE_FIELDS
from prism.label_probs import LABEL_FIELDS
from prism.records import RawRecord
from prism.run.store import CompletionStore, ResponseLog, store_key
from prism.turns import earlier_field
from prism.types import PROTOCOL_VERSION, Completion, ModelIdentity

log = logging.getLogger(__name__)
_P = ParamSpec("_P")

# What the store keeps of a completion: everything that came from the model, nothing about the run.
COMPLETION_FIELDS = (
    "response", "latency_s", "prompt_tokens", "completion_tokens", "backend_options", "timestamp", "finish_reason"
)
# Completion fields kept only when the backend gave them, so records and stored completions of backends
# that do not report them are exactly as before the field existed.
OPTIONAL_FIELDS = ("provider_cached_tokens", "endpoint")


def stored_fields(completion: dict[str, Any]) -> dict[str, Any]:
    """What the store keeps of a completion: :data:`COMPLETION_FIELDS`, plus the label fields it has.

    The label fields (``generation.label_probs``) are optional: a completion without them is stored and
    recorded exactly as before they existed, with no nulls in their place.
    """
    fields = {k: completion.get(k) for k in COMPLETION_FIELDS}
    fields.update({k: completion[k] for k in (*OPTIONAL_FIELDS, *LABEL_FIELDS, *CLOZE_FIELDS) if k in completion})
    return fields


@dataclass(frozen=True)
class Cell:
    """A request plus the context its raw record needs and its key in the completion store."""

    request: Request
    dataset: str
    split: str
    key: str


def utc_now() -> str:
    """The current UTC time in ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def make_cells(requests: Iterable[Request], identity: ModelIdentity, dataset: str, split: str,
               settings: Mapping[str, Any] | None = None) -> list[Cell]:
    """Attach the store key (per-request values only, docs/architecture.md) to every request.

    ``settings``: the backend settings that can change a completion and differ from their defaults
    (:func:`prism.backends.registry.keyed_settings`); they are part of every key.
    """
    return [
        Cell(
            request=r,
            dataset=dataset,
            split=split,
            key=store_key(identity.backend, identity.digest, r.prompt.sha256, r.params.canonical(), r.repetition,
                          settings),
        )
        for r in requests
    ]




def raw_record(
    cell: Cell, identity: ModelIdentity, completion: Mapping[str, Any], cached: bool, error: str | None
) -> RawRecord:
    """Build the raw response record (docs/architecture.md) from a cell and the completion's stored fields.

    The one place a raw record is made: a failed request (``error`` set) has no response, whatever the
    backend said.
    """
    prompt = cell.request.prompt
    return RawRecord(
        question_id=prompt.question_id,
        dataset=cell.dataset,
        split=cell.split,
        condition=prompt.condition,
        repetition=cell.request.repetition,
        prompt=prompt.text,
        prompt_sha256=prompt.sha256,
        response=None if error is not None else completion.get("response"),
        model=identity.name,
        model_digest=identity.digest,
        backend=identity.backend,
        generation=cell.request.params.canonical(),
        backend_options=completion.get("backend_options") or {},
        latency_s=completion.get("latency_s"),
        prompt_tokens=completion.get("prompt_tokens"),
        completion_tokens=completion.get("completion_tokens"),
        finish_reason=completion.get("finish_reason"),
        provider_cached_tokens=completion.get("provider_cached_tokens"),
        endpoint=completion.get("endpoint"),
        timestamp=completion.get("timestamp") or utc_now(),
        template_version=prompt.template_version,
        protocol_version=PROTOCOL_VERSION,
        cached=cached,
        error=error,
        turns=earlier_field(prompt.turns),
        **{k: completion[k] for k in (*LABEL_FIELDS, *CLOZE_FIELDS) if k in completion and error is None},
    )


def completion_fields(completion: Completion) -> dict[str, Any]:
    """The storable fields of a fresh completion, stamped with its arrival time."""
    fields = {
        "response": completion.text,
        "latency_s": round(completion.latency_s, 6),
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "backend_options": dict(completion.backend_options),
        "timestamp": utc_now(),
        "finish_reason": completion.finish_reason,
    }
    if completion.provider_cached_tokens is not None:
        fields["provider_cached_tokens"] = completion.provider_cached_tokens
    if completion.endpoint is not None:
        fields["endpoint"] = completion.endpoint
    if completion.label_reading is not None and completion.error is None:
        fields.update(completion.label_reading.record_fields())
    if completion.cloze_reading is not None and completion.error is None:
        fields.update(completion.cloze_reading.record_fields())
    return fields


def dispatch(
    backend: Backend, cells: Iterable[Cell], concurrency: int
) -> Iterator[tuple[Cell, Completion]]:
    """Yield (cell, completion) as completions arrive, with at most ``concurrency`` in flight.

    On a fatal error the requests already in flight are still awaited and yielded before the error is
    re-raised, so their completions reach the log and the store.
    """
    if concurrency <= 1:
        for cell in cells:
            yield cell, backend.generate(cell.request)
        return
    pending = iter(cells)
    in_flight: dict[Future[Completion], Cell] = {}
    failure: BaseException | None = None
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="prism-request") as pool:

        def submit_next() -> None:
            cell = next(pending, None)
            if cell is not None:
                in_flight[pool.submit(backend.generate, cell.request)] = cell

        for _ in range(concurrency):
            submit_next()
        while in_flight:
            done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            for future in done:
                cell = in_flight.pop(future)
                try:
                    completion = future.result()
                except BaseException as exc:  # fatal: stop submitting, drain what is in flight
                    failure = failure or exc
                    continue
                yield cell, completion
                if failure is None:
                    submit_next()
    if failure is not None:
        raise failure


def ask_each(
    backend: Backend,
    identity: ModelIdentity,
    cells: Iterable[Cell],
    response_log: ResponseLog,
    store: CompletionStore | None,
    run_id: str | None,
    on_record: Callable[[RawRecord], None] | None = None,
) -> Iterator[RawRecord]:
    """Ask for every cell, yielding each record once it is in the store and the log.

    ``cells`` may be a generator: a run of a million cells makes each when it is sent.

    Args:
        backend: The model to ask.
        identity: The model's identity (for records and keys).
        cells: Cells that are not in the store.
        response_log: The run's ``responses.jsonl``.
        store: The completion store, or None when disabled.
        run_id: The MLflow run the completions belong to (kept in the store for resume tagging).
        on_record: Called after each record is durable, before it is yielded (progress bars).

    Yields:
        The raw records, in arrival order.
    """
    for cell, completion in dispatch(backend, cells, backend.concurrency):
        record = keep(cell, identity, completion_fields(completion), completion.error, response_log, store, run_id)
        if on_record is not None:
            on_record(record)
        yield record


def keep(cell: Cell, identity: ModelIdentity, fields: dict[str, Any], error: str | None, response_log: ResponseLog,
         store: CompletionStore | None, run_id: str | None) -> RawRecord:
    """Make a fresh completion's raw record durable: in the store (unless it failed), then in the log.

    The one place a fresh completion is written, whether this process asked it or a Ray actor did
    (:mod:`prism.run.sharding`). ``fields``: :func:`completion_fields` of the completion.
    """
    record = raw_record(cell, identity, fields, cached=False, error=error)
    # Store first, then log: a kill between the two leaves a stored completion that the next run
    # reuses, never a logged one that the next run would ask for again.
    if store is not None and error is None:
        store_put(store, cell, identity, fields, run_id)
    response_log.append(record.to_json())
    return record


def store_put(store: CompletionStore, cell: Cell, identity: ModelIdentity, fields: dict[str, Any],
              run_id: str | None) -> None:
    """Put a fresh completion's stored fields into ``store`` under the cell's key."""
    store.put(
        cell.key, backend=identity.backend, digest=identity.digest, prompt_sha256=cell.request.prompt.sha256,
        generation=cell.request.params.canonical(), repetition=cell.request.repetition,
        record=stored_fields(fields), run_id=run_id, created_at=fields["timestamp"],
    )


def _gathered(each: Callable[_P, Iterator[RawRecord]]) -> Callable[_P, list[RawRecord]]:
    """``each`` with its records gathered into a list: the same parameters by construction, one path."""

    def gathered(*args: _P.args, **kwargs: _P.kwargs) -> list[RawRecord]:
        return list(each(*args, **kwargs))

    gathered.__name__ = gathered.__qualname__ = "collect"
    gathered.__doc__ = ("Ask for every cell as :func:`ask_each` does (the same parameters), and return the "
                        "raw records in arrival order instead of yielding them.")
    return gathered


# For callers that want every record at once (the concurrency benchmark): ask_each, kept in a list.
collect = _gathered(ask_each)
