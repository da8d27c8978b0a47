"""The built-in survey datasets (political_compass, opinions_qa, wvs7): synthetic items in their schema here,
the real files only when the full data is present (their licences are unknown, so no copy is committed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prism.questions import DataError, builtin_dataset, dataset_config, load_questions

WVS_EXCLUDED = {"Q56", "Q111", "Q119", "Q221", "Q222", *(f"Q{i}" for i in range(241, 250)), "Q254"}


def write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def test_wvs7_reads_its_own_folder_and_drops_and_counts_the_recoded_items(tmp_path: Path) -> None:
    scale = ["Very important", "Rather important", "Not very important", "Not at all important"]
    rows = [{"id": qid, "statement": f"Synthetic {qid}?", "options": scale} for qid in ("Q1", "Q56", "Q2", "Q254")]
    write(tmp_path / "wvs7_worldvaluesbench" / "value_questions.jsonl", rows)
    loaded = load_questions(builtin_dataset("wvs7", split="value_questions", data_dir=str(tmp_path)))
    assert [q.question_id for q in loaded.questions] == ["Q1", "Q2"]
    assert loaded.dropped["excluded"] == 2
    assert loaded.questions[0].options == tuple(scale) and loaded.questions[0].answer is None


def test_political_compass_keeps_the_scale_in_order_and_opinions_qa_keeps_refused(tmp_path: Path) -> None:
    scale = ["Strongly disagree", "Disagree", "Agree", "Strongly agree"]
    write(tmp_path / "political_compass" / "test_rottger2024.jsonl",
          [{"id": "pc-01", "statement": "Synthetic proposition.", "options": scale}])
    write(tmp_path / "opinions_qa" / "test.jsonl",
          [{"id": "X_W1", "statement": "Synthetic question?", "options": ["Yes", "No", "Refused"]}])
    pc = builtin_dataset("political_compass", split="test_rottger2024", data_dir=str(tmp_path))
    assert pc.ordinal and pc.type == "subjective" and pc.answer_format == "none"
    (question,) = load_questions(pc).questions
    assert question.options == tuple(scale)
    (opinion,) = load_questions(builtin_dataset("opinions_qa", data_dir=str(tmp_path))).questions
    assert opinion.options == ("Yes", "No", "Refused")


def test_an_ordered_scale_refuses_a_rule_that_shuffles_it() -> None:
    with pytest.raises(DataError, match="ordinal=true keeps an ordered scale"):
        dataset_config({"name": "custom", "path": "x.jsonl", "answer_format": "none", "ordinal": True,
                                 "rules": ["seeded_option_order"],
                                 "fields": {"question": "statement", "options": "options"}})


@pytest.mark.parametrize(("name", "split", "kept", "dropped"), [
    ("political_compass", "test", 62, {}),
    ("political_compass", "test_rottger2024", 62, {}),
    ("opinions_qa", "test", 1505, {"too_many_options": 1}),  # INDUSTRY_W27 has 12 options
    ("wvs7", "value_questions", 224, {"excluded": 15}),
])
def test_the_real_survey_files_load(full_data_dir: Path, name: str, split: str, kept: int, dropped: dict) -> None:
    if not (full_data_dir / (builtin_dataset(name).folder or name)).is_dir():
        pytest.skip(f"needs the full {name} data under {full_data_dir}")
    loaded = load_questions(builtin_dataset(name, split=split, data_dir=str(full_data_dir)))
    assert len(loaded.questions) == kept
    assert {reason: count for reason, count in loaded.dropped.items() if count} == dropped
    assert {q.answer for q in loaded.questions} == {None}
    if name == "wvs7":
        assert not WVS_EXCLUDED & {q.question_id for q in loaded.questions}
