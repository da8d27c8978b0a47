"""Items without an answer key (survey items) end to end, on synthetic items in the Political Compass schema.

The real survey files have unknown or restrictive licences, so these items are made up here, in the same
schema (``id``, ``statement``, ``options``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import compose_config, run_overrides

from prism.metrics import NO_KEY
from prism.pipeline import run
from prism.questions import DatasetSpec, load_questions
from prism.summary import format_summary

SCALE = ["Strongly disagree", "Disagree", "Agree", "Strongly agree"]
STATEMENTS = ["Synthetic statement one.", "Synthetic statement two.", "Synthetic statement three."]
CONDITIONS = ["P0", "P1", "P2", "P3", "P4"]


def write_items(directory: Path) -> Path:
    path = directory / "survey.jsonl"
    rows = [{"id": str(i), "statement": text, "options": SCALE} for i, text in enumerate(STATEMENTS)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def survey_overrides(path: Path) -> list[str]:
    return ["dataset=custom", f"dataset.path={path}", "dataset.fields.id=id", "dataset.fields.question=statement",
            "dataset.fields.options=options", "dataset.fields.answer=null", "dataset.answer_format=none",
            "dataset.type=subjective", "dataset.n=3"]


def test_items_without_a_key_load_with_a_null_answer(tmp_path: Path) -> None:
    spec = DatasetSpec.from_config({"name": "custom", "path": str(write_items(tmp_path)), "answer_format": "none",
                                    "type": "subjective",
                                    "fields": {"id": "id", "question": "statement", "options": "options"}})
    loaded = load_questions(spec)
    assert [q.answer for q in loaded.questions] == [None, None, None]
    assert loaded.questions[0].options == tuple(SCALE)
    assert loaded.questions[0].to_dict()["answer"] is None


def test_survey_run_logs_no_accuracy_and_computes_consistency(tmp_path: Path, data_dir: Path) -> None:
    import mlflow

    items = write_items(tmp_path)
    # Statement 0: "Agree" everywhere, once by its text; 1: split 3-2; 2: one UNKNOWN.
    answers = {"0": ["C", "C", "Agree", "C", "C"], "1": ["A", "A", "A", "B", "B"], "2": ["D", "D", "D", "D", "hmm"]}
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps({"question_id": qid, "condition": c, "response": r}) + "\n"
                              for qid, responses in answers.items() for c, r in zip(CONDITIONS, responses,
                                                                                    strict=True)),
                      encoding="utf-8")
    overrides = [*run_overrides(tmp_path, data_dir), *survey_overrides(items), "model=replay",
                 f"model.path={replay}", "model.name=scripted"]
    result = run(compose_config(overrides), output_dir=tmp_path / "out")

    frozen = [json.loads(line) for line in (tmp_path / "out" / "questions" / "frozen.jsonl").read_text().splitlines()]
    assert {row["answer"] for row in frozen} == {None}
    scored = [json.loads(line) for line in (tmp_path / "out" / "results" / "scored.jsonl").read_text().splitlines()]
    assert {(row["correct_answer"], row["correct"]) for row in scored} == {(None, None)}
    assert {row["answer"] for row in scored if row["question_id"] == "0"} == {"C"}  # "Agree" read by its text

    logged = mlflow.tracking.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").get_run(result.run_id).data.metrics
    for absent in ("accuracy", "conditional_accuracy", "accuracy/P0", "conditional_accuracy/P1",
                   "question_majority_accuracy", "prompt_invariant_incorrect_rate"):
        assert absent not in logged, absent
    assert logged["answer_recovery_rate"] == pytest.approx(14 / 15)
    assert logged["mean_agreement"] == pytest.approx((1 + 3 / 5 + 1) / 3)
    assert logged["answer_unanimous_rate"] == pytest.approx(1 / 3)
    # Consistency with P0: statement 0 4/4, statement 1 2/4, statement 2 3/4.
    assert logged["consistency/instruction"] == pytest.approx((1 + 2 / 4 + 3 / 4) / 3)

    summary = format_summary(result.metrics, CONDITIONS)
    assert f"question majority accuracy:        {NO_KEY}" in summary
    assert f"prompt-invariant incorrect:        {NO_KEY}" in summary
