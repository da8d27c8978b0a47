"""The run path at any number of cells: cells made when needed, the store read in batches, records read back.

A run of a million cells must not hold a million of anything but numbers. :class:`CellGrid` is the run's
cells as arithmetic over its rendered prompts (condition-major, as ``prism.conditions.render_all`` makes
them) and its repetitions' parameters: cell ``i`` is repetition ``i // P`` of prompt ``i % P``, its store
key computed when it is asked for. :func:`reuse_stored` logs the stored cells a batch at a time and keeps
only the indices of the cells still to ask. :class:`RecordOffsets` notes where each cell's raw record
starts in ``responses.jsonl`` as it is written, and :func:`records_in_scored_order` reads them back one
at a time in the order of ``results/scored.jsonl`` (condition, question, repetition).
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from prism.backends.base import Request
from prism.records import CellKey, RawRecord
from prism.run.inference import Cell, raw_record, stored_fields
from prism.run.store import CompletionStore, ResponseLog, StoreError, store_key
from prism.types import GenerationParams, ModelIdentity, Prompt

# Cells looked up in the store per query, and logged per fsync of the response log.
REUSE_BATCH = 2000


class CellGrid:
    """Every (prompt, repetition) cell of a run, in asking order, made on demand."""

    def __init__(self, prompts: Sequence[Prompt], params: Sequence[GenerationParams], question_ids: Sequence[str],
                 conditions: Sequence[str], identity: ModelIdentity, dataset: str, split: str,
                 settings: Mapping[str, Any] | None = None) -> None:
        """The grid of ``prompts`` x ``params``.

        Args:
            prompts: The rendered prompts, condition-major: condition ``c``, question ``q`` at ``c * Q + q``.
            params: The generation parameters of each repetition, in repetition order.
            question_ids: The frozen set's question ids in order (``Q`` of them).
            conditions: The condition names in order.
            identity: The model that answers (its backend and digest enter every key).
            dataset: Dataset name for the records.
            split: Split for the records.
            settings: Keyed backend settings (``prism.backends.registry.keyed_settings``).

        Raises:
            ValueError: If the prompts are not the condition-major product the indices assume.
        """
        n = len(question_ids)
        expected = ((conditions[i // n], question_ids[i % n]) for i in range(len(prompts)))
        if len(prompts) != n * len(conditions) or any((p.condition, p.question_id) != cell
                                                      for p, cell in zip(prompts, expected, strict=True)):
            raise ValueError(f"the {len(prompts)} prompts are not the {len(conditions)} conditions x "
                             f"{len(question_ids)} questions in condition-major order")
        self.prompts, self.params = list(prompts), list(params)
        self.question_ids, self.conditions = list(question_ids), list(conditions)
        self.identity, self.dataset, self.split = identity, dataset, split
        self.settings = dict(settings or {})
        self._canonical = [p.canonical() for p in self.params]
        self._questions = {q: i for i, q in enumerate(self.question_ids)}
        self._conditions = {c: i for i, c in enumerate(self.conditions)}

    def __len__(self) -> int:
        """The number of cells: prompts x repetitions."""
        return len(self.prompts) * len(self.params)

    def __iter__(self) -> Iterator[Cell]:
        """Every cell in asking order (repetition-major, then condition, then question)."""
        return (self.cell(i) for i in range(len(self)))

    def cell(self, index: int) -> Cell:
        """Cell ``index`` (asking order) with its store key."""
        repetition, position = divmod(index, len(self.prompts))
        prompt, params = self.prompts[position], self.params[repetition]
        key = store_key(self.identity.backend, self.identity.digest, prompt.sha256, self._canonical[repetition],
                        repetition, self.settings or None)
        return Cell(Request(prompt=prompt, params=params, repetition=repetition), self.dataset, self.split, key)

    def index(self, cell: CellKey) -> int:
        """The asking-order index of a (question, condition, repetition) cell of this grid."""
        position = self._conditions[cell.condition] * len(self.question_ids) + self._questions[cell.question_id]
        return cell.repetition * len(self.prompts) + position

    def scored_order(self) -> Iterator[int]:
        """Cell indices in the order of the scored records: condition, then question, then repetition."""
        n_prompts, repetitions = len(self.prompts), len(self.params)
        for position in range(n_prompts):
            for repetition in range(repetitions):
                yield repetition * n_prompts + position


class RecordOffsets:
    """Where each cell's raw record starts in the run's ``responses.jsonl`` (8 bytes a cell, -1 until written)."""

    def __init__(self, n_cells: int) -> None:
        """Room for ``n_cells`` offsets, none written yet."""
        self._offsets = array("q", [-1]) * n_cells

    def note(self, index: int, offset: int) -> None:
        """Cell ``index``'s record starts at byte ``offset``."""
        self._offsets[index] = offset

    def __getitem__(self, index: int) -> int:
        """The offset of cell ``index``'s record, or -1 when it has none."""
        return self._offsets[index]


def reuse_stored(grid: CellGrid, store: CompletionStore | None, response_log: ResponseLog, offsets: RecordOffsets,
                 on_producer: Callable[[str], None] | None = None) -> array[int]:
    """Log every stored cell (``cached: true``) a batch at a time; return the indices of the cells to ask.

    The stored completions are already durable, so their records are fsynced once per batch, not each.

    Args:
        grid: The run's cells.
        store: The completion store, or None (nothing is reused).
        response_log: The run's ``responses.jsonl``.
        offsets: Filled in for every logged cell.
        on_producer: Called with the run id that stored each reused completion (resume tagging).

    Returns:
        The asking-order indices of the cells the store does not hold (4 bytes each).
    """
    missing = array("I")
    if store is None:
        missing.extend(range(len(grid)))
        return missing
    identity = grid.identity
    for start in range(0, len(grid), REUSE_BATCH):
        cells = [grid.cell(i) for i in range(start, min(start + REUSE_BATCH, len(grid)))]
        found = store.get_many([c.key for c in cells])
        for index, cell in enumerate(cells, start=start):
            hit = found.get(cell.key)
            if hit is None:
                missing.append(index)
                continue
            stored, producer = hit
            record = raw_record(cell, identity, stored_fields(stored), cached=True, error=None)
            offsets.note(index, response_log.append(record.to_json(), durable=False))
            if on_producer is not None and producer:
                on_producer(producer)
        response_log.sync()
    return missing


def records_in_scored_order(path: Path, grid: CellGrid, offsets: RecordOffsets) -> Iterator[RawRecord]:
    """Read the run's raw records back from ``responses.jsonl``, one at a time, in scored order.

    Raises:
        StoreError: If a line the run wrote cannot be read back as a raw record.
    """
    with path.open("rb") as handle:
        for index in grid.scored_order():
            offset = offsets[index]
            if offset < 0:
                continue
            handle.seek(offset)
            line = handle.readline()
            try:
                yield RawRecord.from_json(json.loads(line.decode("utf-8")))
            except (ValueError, UnicodeDecodeError) as exc:
                raise StoreError(f"{path} at byte {offset}: the record this run wrote cannot be read back "
                                 f"({exc}); the file changed during the run.") from exc
