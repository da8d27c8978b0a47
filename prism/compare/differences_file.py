"""The differences table written to ``differences.csv`` pair by pair, never held whole in memory.

:func:`prism.compare.tables.differences` builds the whole table and sorts it: every differing cell of
every pair, by ``question_disagreement`` (descending), then pair, question, condition and repetition. With
``pairs=all differences.max_per_pair=null`` that is every differing cell with both raw responses and the
prompt: 352 MiB of CSV at 20 runs, which doubled the comparison's peak (BENCHMARKS.md section 21).
:func:`stream_differences` writes the same bytes while holding one pair's rows at a time:

1. Each pair's listed cells are made and sorted within the pair, by the table's order restricted to the
   pair (``question_disagreement`` descending, then question, condition, repetition; a stable sort, as the
   whole table's). Each run of rows with one ``question_disagreement`` value is formatted as CSV (the
   same ``to_csv`` call :func:`prism.compare.core.write_tables` makes) and appended to a spool file beside
   the target; only its value, pair and byte range are kept.
2. In the whole table, the rows of one pair and one ``question_disagreement`` value are contiguous
   (the sort key after the value is the pair), so the file is those byte ranges in the order of
   (value descending, pair): copied from the spool, a few thousand ranges, not a row at a time.

Only the first :data:`HEAD_ROWS` rows are kept as a frame: the report and the terminal show fewer, and
how many are listed comes from the counts (:func:`listed_count`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from itertools import combinations, pairwise
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

from prism.compare.comparison_tables import ComparisonTables, size
from prism.compare.tables import (
    DIFFERENCE_COLUMNS,
    DIFFERENCE_COUNT_COLUMNS,
    ModelCells,
    Pair,
    _difference_rows,
    pair_cells,
    shared_conditions,
)

# Rows of the differences table kept in memory: more than any reader shows (the report page 12, the terminal 8).
HEAD_ROWS = 100

# The frame attribute naming the file a streamed table was written to (:func:`written_to`).
WRITTEN_TO = "prism.written_to"

# As prism.compare.core.write_tables writes every table.
_FLOAT_FORMAT = "%.10g"
_COPY_BYTES = 1 << 20
_ORDER = ["question_disagreement", "_q", "_c", "repetition"]


def stream_differences(path: Path, models: Sequence[ModelCells], pairs: Sequence[Pair] | None = None,
                       max_per_pair: int | None = None,
                       head_rows: int = HEAD_ROWS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Write :func:`prism.compare.tables.differences`'s table to ``path`` as CSV, pair by pair.

    The file is byte for byte what ``write_tables`` writes of the in-memory table; the counts are the same
    table.

    Args:
        path: The CSV file (``comparison/differences.csv``); its directory is created.
        models: The compared runs.
        pairs: The pairs (:func:`prism.compare.tables.model_pairs`); None: every pair.
        max_per_pair: Most cells listed per pair; None lists every differing cell.
        head_rows: How many of the table's first rows to return.

    Returns:
        (head, counts): the table's first ``head_rows`` rows (columns :data:`DIFFERENCE_COLUMNS`, marked as
        written to ``path``: :func:`written_to`), and the counts (:data:`DIFFERENCE_COUNT_COLUMNS`).

    Raises:
        ValueError: If the cap is negative.
    """
    if max_per_pair is not None and max_per_pair < 0:
        raise ValueError(f"differences.max_per_pair must be 0 or more, or null for no cap; got {max_per_pair}")
    path.parent.mkdir(parents=True, exist_ok=True)
    counts: list[tuple[object, ...]] = []
    ranges: list[tuple[float, int, int, int]] = []  # (question_disagreement, pair, offset, length)
    head: pd.DataFrame | None = None
    with tempfile.TemporaryFile(dir=path.parent, prefix=".differences-") as spool:
        for pair_index, (a, b) in enumerate(combinations(models, 2) if pairs is None else pairs):
            count, rows = pair_rows(a, b, pair_index, max_per_pair)
            counts.append(count)
            if rows is None or not len(rows):
                continue
            ranges += _spool(spool, rows, pair_index)
            top = rows.head(head_rows)
            head = top if head is None else _first(pd.concat([head, top], ignore_index=True), head_rows)
            del rows, top
        with path.open("wb") as out:
            out.write(_empty().to_csv(index=False).encode("utf-8"))
            for _, _, offset, length in sorted(ranges, key=lambda r: (-r[0], r[1])):
                _copy(spool, out, offset, length)
    count_table = pd.DataFrame(counts, columns=list(DIFFERENCE_COUNT_COLUMNS)).astype({"max_per_pair": "Int64"})
    shown = _empty() if head is None else head[list(DIFFERENCE_COLUMNS)].reset_index(drop=True)
    shown.attrs[WRITTEN_TO] = str(path)
    return shown, count_table


def pair_rows(a: ModelCells, b: ModelCells, pair_index: int,
              max_per_pair: int | None) -> tuple[tuple[object, ...], pd.DataFrame | None]:
    """One pair's row of the counts and its listed cells, in the table's order within the pair.

    The cells are those :func:`prism.compare.tables.differences` lists for the pair, with its sort keys
    (``_pair``, ``_q``, ``_c``); None when no paired cell differs.
    """
    conditions = shared_conditions(a, b)
    cells = pair_cells(a, b, conditions)
    differ = cells["category_a"] != cells["category_b"]
    n_paired, n_differ = len(cells), int(differ.sum())
    listed = n_differ if max_per_pair is None else min(n_differ, max_per_pair)
    count = (a.label, b.label, a.run_id, b.run_id, n_paired, n_differ, listed, max_per_pair)
    if not n_differ:
        return count, None
    cells["question_disagreement"] = differ.astype(np.float64).groupby(cells["question_id"]).transform("mean")
    cells = cells[differ]
    question_order = {q: i for i, q in enumerate(dict.fromkeys(a.cells["question_id"]))}
    condition_order = {c: i for i, c in enumerate(conditions)}
    cells = cells.assign(_q=cells["question_id"].map(question_order), _c=cells["condition"].map(condition_order))
    # Stable, as the whole table's sort: cells that tie on every key keep their paired order in both.
    cells = cells.sort_values(_ORDER, ascending=[False, True, True, True], kind="stable").head(listed)
    return count, _difference_rows(a, b, cells, pair_index)


def written_to(table: pd.DataFrame) -> Path | None:
    """The file a streamed table was already written to (:func:`stream_differences`), else None."""
    found = table.attrs.get(WRITTEN_TO)
    return Path(found) if found else None


def listed_count(tables: ComparisonTables) -> int:
    """How many rows the differences table lists (its file's rows), from the counts; 0 without the table."""
    counts = tables.difference_counts
    if counts is not None and "listed" in counts:
        return int(counts["listed"].sum())
    return size(tables.differences)


def _spool(spool: IO[bytes], rows: pd.DataFrame, pair_index: int) -> list[tuple[float, int, int, int]]:
    """Append one pair's rows as CSV lines, one block per ``question_disagreement`` value; their ranges."""
    shares = rows["question_disagreement"].to_numpy(np.float64)
    starts = [0, *(np.flatnonzero(shares[1:] != shares[:-1]) + 1).tolist(), len(rows)]
    table = rows[list(DIFFERENCE_COLUMNS)]
    found = []
    for start, end in pairwise(starts):
        text = table.iloc[start:end].to_csv(header=False, index=False, float_format=_FLOAT_FORMAT)
        data = text.encode("utf-8")
        offset = spool.tell()
        spool.write(data)
        found.append((float(shares[start]), pair_index, offset, len(data)))
    return found


def _copy(spool: IO[bytes], out: IO[bytes], offset: int, length: int) -> None:
    """Copy ``length`` bytes of the spool from ``offset`` to ``out``, a chunk at a time."""
    spool.seek(offset, os.SEEK_SET)
    while length > 0:
        chunk = spool.read(min(length, _COPY_BYTES))
        if not chunk:
            raise OSError("the differences spool file ended early")
        out.write(chunk)
        length -= len(chunk)


def _first(rows: pd.DataFrame, n: int) -> pd.DataFrame:
    """The first ``n`` rows in the table's order (question_disagreement descending, pair, question, ...)."""
    return rows.sort_values(["question_disagreement", "_pair", "_q", "_c", "repetition"],
                            ascending=[False, True, True, True, True], kind="stable").head(n)


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in DIFFERENCE_COLUMNS})
