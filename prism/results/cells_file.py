"""``results/cells.parquet``: a run's scored records as columns, written beside ``scored.jsonl``.

``scored.jsonl`` stays the evidence (one JSON object per scored cell, the contract of
docs/architecture.md); the Parquet file holds the same records, one row per cell in the same order, so a
comparison or a site reads a run's cells without parsing JSON: at 20 runs x 5,000 cells ``json.loads``
was most of a comparison's reading time (BENCHMARKS.md section 14).

The columns are the fields of :class:`prism.records.ScoredRecord` (its raw record's fields but the prompt
texts, then its own), each typed from its declaration: text as strings (Parquet stores a column's
repeated values once, in a dictionary page: model, condition, answer... cost a code per row), whole
numbers as int64, numbers as float64, flags as bool, and a nested field (``generation``,
``backend_options``, ``option_probs``...) as its JSON text, decoded on reading. An optional field a record
leaves out is null in its row, and a column an optional field never filled is left out on reading, so
:func:`read_cells` gives the frame ``pandas.DataFrame`` makes of the JSON records (columns sorted by name,
as ``scored.jsonl`` writes its keys).

pyarrow is imported when a file is written or read, not with this module.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import pandas as pd

from prism.records import _OPTIONAL, RawRecord, ScoredRecord

#: The file's name under ``results/`` (``prism.names.CELLS_ARTIFACT`` is its artifact path).
CELLS_FILE = "cells.parquet"

# The file's own version, in its schema metadata: a reader refuses a version it does not know.
CELLS_VERSION = "1"
_VERSION_KEY = b"prism.cells.version"
_JSON_KEY = b"prism.cells.json"
_OPTIONAL_KEY = b"prism.cells.optional"

# Rows per row group: large enough for fast reading, small enough that a 1M-cell run holds one batch at a time.
_BATCH = 65_536

# Fields of the records that are not columns: the scored record's raw record is flattened, prompts stay out.
_LEFT_OUT = frozenset({"raw", "prompt", "turns"})


def _kind(annotation: Any) -> str:
    """The column kind of a field's type: ``str``, ``int``, ``float``, ``bool`` or ``json`` (nested values)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        if len(args) != 1:
            raise TypeError(f"a cell column needs one type besides None, not {annotation}")
        annotation = args[0]
    if annotation in (str, int, float, bool):
        return str(annotation.__name__)
    return "json"


def _columns() -> dict[str, tuple[str, bool]]:
    """Column name -> (kind, optional), from the record dataclasses' declarations, sorted by name."""
    found: dict[str, tuple[str, bool]] = {}
    for cls in (RawRecord, ScoredRecord):
        hints = typing.get_type_hints(cls)
        for f in fields(cls):
            if f.name not in _LEFT_OUT:
                found[f.name] = (_kind(hints[f.name]), bool(f.metadata.get(_OPTIONAL)))
    return dict(sorted(found.items()))


COLUMNS: dict[str, tuple[str, bool]] = _columns()


def _arrow_schema() -> Any:
    import pyarrow as pa

    types_ = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "json": pa.string()}
    metadata = {_VERSION_KEY: CELLS_VERSION.encode(),
                _JSON_KEY: ",".join(n for n, (k, _) in COLUMNS.items() if k == "json").encode(),
                _OPTIONAL_KEY: ",".join(n for n, (_, o) in COLUMNS.items() if o).encode()}
    return pa.schema([pa.field(name, types_[kind]) for name, (kind, _) in COLUMNS.items()], metadata=metadata)


class CellsWriter:
    """Writes scored records (their JSON objects) to ``cells.parquet`` a row group at a time.

    Use as a context manager; :meth:`add` each record as it is written to ``scored.jsonl``.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._schema: Any = None
        self._writer: Any = None
        self._rows: dict[str, list[Any]] = {name: [] for name in COLUMNS}
        self._json = [name for name, (kind, _) in COLUMNS.items() if kind == "json"]
        self._count = 0

    def __enter__(self) -> CellsWriter:
        import pyarrow.parquet as pq

        self._schema = _arrow_schema()
        self._writer = pq.ParquetWriter(self._path, self._schema, compression="zstd", use_dictionary=True)
        return self

    def add(self, record: Mapping[str, Any]) -> None:
        """Append one scored record (:meth:`prism.records.ScoredRecord.to_json`).

        Raises:
            ValueError: If the record has a field the columns do not (a record kind this file does not know).
        """
        unknown = [key for key in record if key not in self._rows]
        if unknown:
            raise ValueError(f"cells.parquet has no column for the scored-record field(s) {unknown}: add them to "
                             "prism.records.ScoredRecord (or RawRecord), whose fields are the columns")
        for name, column in self._rows.items():
            column.append(record.get(name))
        for name in self._json:
            column = self._rows[name]
            if column[-1] is not None:
                column[-1] = json.dumps(column[-1], ensure_ascii=False, sort_keys=True)
        self._count += 1
        if self._count == _BATCH:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self._count:
            self._writer.write_table(pa.Table.from_pydict(self._rows, schema=self._schema))
        self._rows = {name: [] for name in self._rows}
        self._count = 0

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                self._flush()
        finally:
            self._writer.close()


def read_cells(path: Path, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A run's ``cells.parquet`` as the frame ``pandas.DataFrame`` makes of its ``scored.jsonl`` records.

    Args:
        path: The file.
        columns: Only these columns (those the file has; a column no record filled is left out as the
            JSON frame would lack it); None: every column.

    Raises:
        ValueError: If the file is not a cells file of a version this code reads.
    """
    import pyarrow.parquet as pq

    schema = pq.read_schema(path)
    metadata = schema.metadata or {}
    version = metadata.get(_VERSION_KEY, b"").decode()
    if version != CELLS_VERSION:
        raise ValueError(f"{path} is not a PRISM cells file of version {CELLS_VERSION} (found {version or 'none'}); "
                         "read the run's results/scored.jsonl instead")
    nested = set(filter(None, metadata.get(_JSON_KEY, b"").decode().split(",")))
    optional = set(filter(None, metadata.get(_OPTIONAL_KEY, b"").decode().split(",")))
    wanted = [c for c in (columns if columns is not None else schema.names) if c in schema.names]
    table = pq.read_table(path, columns=wanted)
    # An optional field is left out of a record while None: a column it never filled is not in the JSON frame.
    kept = [c for c in wanted if c not in optional or table.column(c).null_count < table.num_rows]
    frame: pd.DataFrame = table.select(kept).to_pandas()
    for name in kept:  # a field null in every record: pandas holds the JSON's nulls as None in an object column
        if table.column(name).null_count == table.num_rows and table.num_rows:
            frame[name] = pd.Series([None] * table.num_rows, index=frame.index, dtype=object)
    for name in (c for c in kept if c in nested):
        texts = frame[name]
        decoded = {text: json.loads(text) for text in pd.unique(texts.dropna())}
        frame[name] = pd.Series([decoded[t] if isinstance(t, str) else t for t in texts], index=frame.index,
                                dtype=object)
    return frame
