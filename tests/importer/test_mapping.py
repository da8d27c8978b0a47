"""prism.importer.mapping: shipped mappings, recognition by doc fields, custom mappings, bad docs named."""

from __future__ import annotations

from pathlib import Path

import pytest

from prism.importer.mapping import ImportLogError, load_mapping, mapping_for, read_doc, recognise, shipped_names

ARC = {"id": "q1", "question": "Which is a metal?", "choices": {"text": ["wood", "iron", "glass"],
                                                                "label": ["1", "2", "3"]}, "answerKey": "2"}
MMLU = {"question": "2+2?", "subject": "math", "choices": ["3", "4", "5", "6"], "answer": 1}
SCIQ = {"question": "What falls?", "distractor1": "a", "distractor2": "b", "distractor3": "c", "correct_answer": "d",
        "support": ""}


def test_the_issue_s_mappings_are_shipped() -> None:
    assert {"arc_challenge", "arc_easy", "mmlu", "sciq", "openbookqa", "commonsense_qa"} <= set(shipped_names())


def test_a_task_name_picks_its_mapping_and_a_local_copy_is_recognised_by_its_fields() -> None:
    assert mapping_for("mmlu_anatomy", MMLU, None, "x").name == "mmlu"
    assert mapping_for("sciq", SCIQ, None, "x").name == "sciq"
    assert mapping_for("arc_local", ARC, None, "x").name == "arc_challenge"
    obqa = {"question_stem": "s", "choices": {"text": ["a"], "label": ["A"]}, "answerKey": "A"}
    assert recognise(obqa) == "openbookqa"


def test_docs_read_into_options_labels_and_the_key_index() -> None:
    arc = read_doc(load_mapping("arc_challenge"), ARC, "f:1")
    assert (arc.options, arc.labels, arc.answer_index, arc.id) == (("wood", "iron", "glass"), ("1", "2", "3"), 1, "q1")
    mmlu = read_doc(load_mapping("mmlu"), MMLU, "f:1")
    assert (mmlu.options, mmlu.answer_index, mmlu.group) == (("3", "4", "5", "6"), 1, "math")
    assert read_doc(load_mapping("sciq"), SCIQ, "f:1").answer_index == 3


def test_an_unknown_doc_names_the_line_and_the_fix() -> None:
    with pytest.raises(ImportLogError, match=r"f\.jsonl:7.*task 'my_task' has no shipped mapping.*mapping=FILE\.yaml"):
        mapping_for("my_task", {"prompt": "p", "gold": 1}, None, "f.jsonl:7")


def test_a_doc_without_options_is_refused() -> None:
    doc = {"question": "q", "choices": "not a list", "answer": 0}
    with pytest.raises(ImportLogError, match=r"f:3.*no multiple-choice question"):
        read_doc(load_mapping("mmlu"), doc, "f:3")
    with pytest.raises(ImportLogError, match=r"f:4.*no field 'choices\.text'"):
        read_doc(load_mapping("arc_challenge"), {"question": "q", "answerKey": "A"}, "f:4")


def test_a_custom_mapping_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("question: stem\noptions: [a, b]\nanswer: gold\nanswer_format: index\n", encoding="utf-8")
    item = read_doc(load_mapping(str(path)), {"stem": "s", "a": "x", "b": "y", "gold": 1}, "f:1")
    assert (item.options, item.answer_index) == (("x", "y"), 1)
    path.write_text("question: stem\noptions: [a, b]\nanswer: gold\nanswer_format: number\n", encoding="utf-8")
    with pytest.raises(ImportLogError, match="answer_format 'number'"):
        load_mapping(str(path))
    with pytest.raises(ImportLogError, match="neither a shipped mapping"):
        load_mapping("nonesuch")
