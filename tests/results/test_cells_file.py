"""``results/cells.parquet``: the scored records as columns, read back as the frame their JSON gives.

The fixture ``tests/data/cells_run`` is a run logged by today's code (``scripts/make_cells_run.py``): its
``cells.parquet`` and ``scored.jsonl`` were written side by side by :func:`prism.results.summary.write_results`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO_ROOT

from prism.compare.select import load_scored, load_scored_cells
from prism.results.cells_file import COLUMNS, CellsWriter, read_cells

RUN = REPO_ROOT / "tests" / "data" / "cells_run" / "results"


def json_frame(path: Path) -> pd.DataFrame:
    with path.open(encoding="utf-8") as handle:
        return pd.DataFrame([json.loads(line) for line in handle if line.strip()])


def test_the_fixture_reads_as_its_json_records() -> None:
    from_json = json_frame(RUN / "scored.jsonl")
    from_parquet = read_cells(RUN / "cells.parquet")
    assert sorted(from_json.columns) == list(from_parquet.columns)
    pd.testing.assert_frame_equal(from_parquet, from_json[list(from_parquet.columns)])
    # Nested fields come back as the dicts the JSON holds.
    assert from_parquet["generation"].iloc[0] == from_json["generation"].iloc[0]
    assert isinstance(from_parquet["generation"].iloc[0], dict)


def test_a_comparison_reads_the_same_cells_from_either_file() -> None:
    from_json = load_scored(RUN / "scored.jsonl")
    from_parquet = load_scored_cells(RUN / "cells.parquet")
    pd.testing.assert_frame_equal(from_parquet, from_json)
    assert len(from_json) > 0 and from_json["category"].eq("UNKNOWN").any()  # the fixture has UNKNOWN answers


def test_repeated_strings_are_dictionary_encoded() -> None:
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(RUN / "cells.parquet").metadata
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    encodings = meta.row_group(0).column(names.index("model")).encodings
    assert "RLE_DICTIONARY" in encodings or "PLAIN_DICTIONARY" in encodings


def test_written_in_several_row_groups_the_rows_keep_their_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch)\
        -> None:
    import prism.results.cells_file as cells_file

    monkeypatch.setattr(cells_file, "_BATCH", 7)
    records = [json.loads(line) for line in (RUN / "scored.jsonl").read_text(encoding="utf-8").splitlines()]
    with CellsWriter(tmp_path / "cells.parquet") as writer:
        for record in records:
            writer.add(record)
    pd.testing.assert_frame_equal(read_cells(tmp_path / "cells.parquet"), read_cells(RUN / "cells.parquet"))


def test_a_record_field_without_a_column_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no column for the scored-record field"), \
            CellsWriter(tmp_path / "cells.parquet") as writer:
        writer.add({"question_id": "q", "surprise": 1})


def test_a_file_of_another_kind_is_refused(tmp_path: Path) -> None:
    pd.DataFrame({"a": [1]}).to_parquet(tmp_path / "other.parquet")
    with pytest.raises(ValueError, match="not a PRISM cells file"):
        read_cells(tmp_path / "other.parquet")


def test_the_columns_are_the_scored_record_fields() -> None:
    from dataclasses import fields

    from prism.records import RawRecord, ScoredRecord

    declared = {f.name for cls in (RawRecord, ScoredRecord) for f in fields(cls)} - {"raw", "prompt", "turns"}
    assert set(COLUMNS) == declared
