"""Every built-in dataset config on its committed fixture, and dataset-wide facts on the full data when present."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import compose_plain

from prism.questions import builtin_dataset, dataset_config, freeze_dataset, load_questions
from questions.conftest import FIXTURES
from questions.helpers import write_jsonl

BUILTINS = ["arc_challenge", "commonsense_qa", "custom", "mmlu", "mmlu_pro", "openbookqa", "sciq"]
HUB = {"arc_challenge": ("allenai/ai2_arc", "ARC-Challenge"), "sciq": ("allenai/sciq", None),
       "mmlu": ("cais/mmlu", "all"), "mmlu_pro": ("TIGER-Lab/MMLU-Pro", None),
       "openbookqa": ("allenai/openbookqa", "main"), "commonsense_qa": ("tau/commonsense_qa", None)}


@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_config_composes_into_a_checked_spec(name: str, tmp_path: Path) -> None:
    extra = [f"dataset.path={tmp_path / 'items.csv'}"] if name == "custom" else []
    cfg = compose_plain([f"dataset={name}", *extra])["dataset"]
    spec = dataset_config(cfg)
    assert spec.name == name and spec.type == "objective"
    if name != "custom":
        assert (spec.hub, spec.hub_config) == HUB[name]
        assert spec == builtin_dataset(name, split=spec.split)
    assert spec.split == ("validation" if name == "commonsense_qa" else "test")


def test_mmlu_fixture_drops_exact_and_reordered_duplicates_and_keeps_u0085() -> None:
    loaded = load_questions("mmlu", "test", data_dir=FIXTURES)
    assert loaded.dropped == {"option_count": 0, "too_many_options": 0, "repeated_options": 1, "duplicate": 12,
                              "reordered_duplicate": 1}
    assert len(loaded.questions) == 169 - 14
    groups = Counter(q.group for q in loaded.questions)
    assert groups["college_physics"] == 102 - 11 and groups["anatomy"] == 20 and groups["prehistory"] == 1
    nel = [q for q in loaded.questions if "\x85" in q.question or any("\x85" in o for o in q.options)]
    assert {q.group for q in nel} == {"management", "sociology"}
    assert all(q.question_id.startswith("mmlu-") and len(q.options) == 4 for q in loaded.questions)


def test_mmlu_subjects_and_stratify_draw_evenly(tmp_path: Path) -> None:
    cfg = compose_plain(["dataset=mmlu", f"dataset.data_dir={FIXTURES}", f"dataset.cache_dir={tmp_path}",
                          "dataset.subjects=[anatomy,astronomy,virology,college_physics,prehistory]",
                          "dataset.stratify=subject", "dataset.n=13"])["dataset"]
    frozen = freeze_dataset(cfg)
    counts = Counter(q.group for q in frozen.questions)
    # prehistory has one question; the other four share the remaining 12 evenly.
    assert counts == {"prehistory": 1, "anatomy": 3, "astronomy": 3, "virology": 3, "college_physics": 3}
    assert frozen.pool_size == 20 + 20 + 20 + 91 + 1
    assert all('"group":' in line for line in frozen.path.read_text(encoding="utf-8").split("\n") if line)


def test_mmlu_pro_keeps_three_to_ten_options_its_own_ids_and_the_id_gaps() -> None:
    loaded = load_questions("mmlu_pro", "test", data_dir=FIXTURES)
    counts = Counter(len(q.options) for q in loaded.questions)
    assert set(counts) == set(range(3, 11)) and counts[10] == 14
    ten = next(q for q in loaded.questions if len(q.options) == 10)
    assert ten.labels == tuple("ABCDEFGHIJ")
    ids = {q.question_id for q in loaded.questions}
    assert {"1503", "1505", "8304", "8306", "5215"} <= ids and not {"1504", "8305"} & ids
    rows = {str(r["question_id"]): r for r in map(json.loads, (FIXTURES / "mmlu_pro" / "test.jsonl").open())}
    for question in loaded.questions:
        assert question.answer == rows[question.question_id]["answer"]  # the letter at answer_index
        assert question.group == rows[question.question_id]["category"]
    only_ten = dataset_config({**_cfg("mmlu_pro"), "options": 10})
    assert {len(q.options) for q in load_questions(only_ten).questions} == {10}


def test_commonsense_qa_is_five_options_from_validation_by_default() -> None:
    loaded = load_questions(builtin_dataset("commonsense_qa", split="validation", data_dir=str(FIXTURES)))
    assert len(loaded.questions) == 47 and loaded.dropped["repeated_options"] == 7
    assert {q.labels for q in loaded.questions} == {tuple("ABCDE")}
    assert {q.split for q in loaded.questions} == {"validation"}


def test_openbookqa_reads_question_stem_and_labelled_choices() -> None:
    loaded = load_questions("openbookqa", "test", data_dir=FIXTURES)
    rows = [json.loads(line) for line in (FIXTURES / "openbookqa" / "test.jsonl").open(encoding="utf-8")]
    assert [q.question_id for q in loaded.questions] == [r["id"] for r in rows]
    assert [q.question for q in loaded.questions] == [r["question_stem"] for r in rows]
    assert [q.answer for q in loaded.questions] == [r["answerKey"] for r in rows]


def test_arc_numeric_labels_and_option_count_rule(tmp_path: Path) -> None:
    def row(qid: str, labels: list[str], key: str) -> dict:
        return {"id": qid, "question": f"{qid}?", "choices": {"text": [f"t{i}" for i in range(len(labels))],
                                                              "label": labels}, "answerKey": key}

    write_jsonl(tmp_path / "arc_challenge" / "test.jsonl", [
        row("n4", ["1", "2", "3", "4"], "3"), row("l4", list("ABCD"), "D"), row("l5", list("ABCDE"), "E"),
        row("n3", ["1", "2", "3"], "1"),
    ])
    loaded = load_questions("arc_challenge", "test", data_dir=tmp_path)
    assert [(q.question_id, q.answer) for q in loaded.questions] == [("n4", "C"), ("l4", "D")]
    assert loaded.dropped["option_count"] == 2
    every_count = load_questions(dataset_config({**_cfg("arc_challenge", tmp_path), "options": None}))
    assert [(q.question_id, q.labels[-1], q.answer) for q in every_count.questions] == [
        ("n4", "D", "C"), ("l4", "D", "D"), ("l5", "E", "E"), ("n3", "C", "A")]


def test_sciq_seeded_order_keeps_the_correct_answer_and_ignores_source_order(tmp_path: Path) -> None:
    rows = [{"question": f"Q{i}?", "correct_answer": f"right{i}", "distractor1": f"w{i}a", "distractor2": f"w{i}b",
             "distractor3": f"w{i}c", "support": ""} for i in range(40)]
    write_jsonl(tmp_path / "a" / "sciq" / "test.jsonl", rows)
    write_jsonl(tmp_path / "b" / "sciq" / "test.jsonl", rows[::-1])
    first = load_questions("sciq", "test", seed=3, data_dir=tmp_path / "a").questions
    again = {q.question_id: q for q in load_questions("sciq", "test", seed=3, data_dir=tmp_path / "b").questions}
    for question in first:
        assert question.options[question.labels.index(question.answer)].startswith("right")
        assert again[question.question_id] == question
    assert len({q.answer for q in first}) == 4


def test_the_published_arc_and_sciq_sets_hold_on_the_full_data(full_data_dir: Path, tmp_path: Path) -> None:
    from prism.questions import freeze_question_set

    published = {"arc_challenge": "89dfafe1d03afadebb676c5ff785b928ffcca782f0c5a8b85611627124de2ce2",
                 "sciq": "06c5aa4052c83c509ec00f181fae942359ee4e9feb00e56d2196ff881dc4aa07"}
    for name, sha256 in published.items():
        frozen = freeze_question_set(name, "test", 100, 0, full_data_dir, tmp_path)
        assert frozen.sha256 == sha256
        assert '"group"' not in frozen.path.read_text(encoding="utf-8")


def test_full_mmlu_has_27_exact_duplicates_and_full_mmlu_pro_12030_rows(full_data_dir: Path) -> None:
    mmlu = load_questions("mmlu", "test", data_dir=full_data_dir)
    assert mmlu.dropped["duplicate"] == 27 and mmlu.dropped["reordered_duplicate"] == 1
    assert len(mmlu.questions) + sum(mmlu.dropped.values()) == 14042
    pro = load_questions("mmlu_pro", "test", data_dir=full_data_dir)
    assert len(pro.questions) + sum(pro.dropped.values()) == 12030
    assert sum(len(q.options) == 10 for q in pro.questions) > 9000


def _cfg(name: str, data_dir: Path = FIXTURES) -> dict:
    cfg = compose_plain([f"dataset={name}", f"dataset.data_dir={data_dir}"])["dataset"]
    assert isinstance(cfg, dict)
    return cfg
