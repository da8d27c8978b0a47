"""Raw and scored records: one JSON shape, optional fields absent until set, one cell key."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO_ROOT

from prism.records import CELL_COLUMNS, CellKey, RawRecord, ScoredRecord, optional

FLAT_RUN = REPO_ROOT / "tests" / "data" / "flat_schema_run"


def logged_records() -> list[dict]:
    return [json.loads(line) for line in (FLAT_RUN / "responses.jsonl").open(encoding="utf-8")]


def test_a_logged_raw_record_reads_and_writes_back_unchanged() -> None:
    for logged in logged_records():
        assert RawRecord.from_json(logged).to_json() == logged


@dataclass(frozen=True, kw_only=True)
class WithReason(RawRecord):
    finish_reason: str | None = optional()
    """Why generation stopped, when the backend says."""


def test_an_optional_field_is_absent_until_set_not_null() -> None:
    logged = logged_records()[0]
    unset = WithReason.from_json(logged)
    assert unset.finish_reason is None and "finish_reason" not in unset.to_json()
    assert unset.to_json() == logged  # a run that never records it keeps its exact records
    stopped = WithReason.from_json({**logged, "finish_reason": "stop"})
    assert stopped.to_json() == {**logged, "finish_reason": "stop"}


def test_a_record_missing_a_required_field_names_it() -> None:
    logged = logged_records()[0]
    del logged["prompt_sha256"]
    with pytest.raises(ValueError, match="prompt_sha256"):
        RawRecord.from_json(logged)


def test_the_scored_json_is_the_raw_one_without_the_prompt_plus_the_scored_fields() -> None:
    raw = RawRecord.from_json(logged_records()[0])
    scored = ScoredRecord(raw=raw, displayed="A", answer="B", recovered=True, compliant=True, method="exact",
                          correct_answer="B", correct=True, parser_version="9", scorer_version="1")
    record = scored.to_json()
    assert "prompt" not in record and "raw" not in record
    assert {k: v for k, v in record.items() if k in raw.to_json()} == {
        k: v for k, v in raw.to_json().items() if k != "prompt"}
    assert (record["answer"], record["parser_version"]) == ("B", "9")
    assert scored.cell == raw.cell == CellKey.of(record)


def test_the_cell_key_is_one_type_from_json_lines_records_and_requests() -> None:
    assert CellKey.of({"question_id": 7, "condition": "P1"}) == CellKey("7", "P1", 0)
    assert CELL_COLUMNS == ("question_id", "condition", "repetition")
    assert sorted([CellKey("q", "P1", 1), CellKey("q", "P1", 0)])[0].repetition == 0


def test_the_cell_key_module_is_the_only_one_defining_a_cell_tuple() -> None:
    root = REPO_ROOT / "prism"
    sources = {p: p.read_text(encoding="utf-8") for p in root.rglob("*.py")}
    aliases = [p.name for p, text in sources.items() if "= tuple[str, str, int]" in text]
    assert aliases == [], f"cell keys as bare tuples in {aliases}: use prism.records.CellKey"
    assert Path(root / "records.py").is_file()
