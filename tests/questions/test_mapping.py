"""The field mapping, and every bad-data case named before any model call with file, row, field and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from prism.questions import DataError, dataset_config, load_questions
from questions.helpers import write_csv, write_jsonl

HEADER = ["stem", "a", "b", "c", "d", "key"]
GOOD = ["What is 2+2?", "3", "4", "5", "6", "B"]


def _load(cfg: dict) -> list:
    return list(load_questions(dataset_config(cfg)).questions)


@pytest.mark.parametrize(
    ("row", "overrides", "message"),
    [
        # An answer outside the options, in each answer format.
        (["Q?", "w", "x", "y", "z", "E"], {}, r"data row 2: field 'key' .* 'E', which is not one of the option labels "
                                               r"\['A', 'B', 'C', 'D'\]\. Fix the answer"),
        (["Q?", "w", "x", "y", "z", "4"], {"answer_format": "index"},
         r"data row 2: field 'key' .* '4', outside the 4 options: answer_format=index counts from 0"),
        (["Q?", "w", "x", "y", "z", "v"], {"answer_format": "text"},
         r"data row 2: field 'key' .* 'v', which matches no option"),
        # An empty option (a gap before a filled one; trailing empty cells only mean fewer options).
        (["Q?", "w", "", "y", "z", "A"], {}, r"data row 2: option 'b' is empty\. Fill it in, or remove it"),
        # Fewer than two options.
        (["Q?", "w", "", "", "", "A"], {}, r"data row 2: 1 option\(s\) in \['a'\]; a question needs at least 2"),
        # A letter answer on a numbered question: answers that count options.
        (["Q?", "w", "x", "y", "z", "2"], {}, r"data row 2: field 'key' .* '2', a number, but answer_format=letter "
                                               r"reads the letters \['A', 'B', 'C', 'D'\]\. Set "
                                               r"dataset.answer_format=index"),
        # A missing question text.
        (["", "w", "x", "y", "z", "A"], {},
         r"data row 2: field 'stem' is empty or not text \(dataset.fields.question\)"),
    ],
    ids=["answer-letter", "answer-index", "answer-text", "empty-option", "one-option", "letter-on-number",
         "empty-question"],
)
def test_bad_rows_are_named_with_file_row_field_and_fix(tmp_path: Path, custom, row, overrides, message) -> None:
    good = [*GOOD[:5], {"index": "1", "text": "4"}.get(overrides.get("answer_format", ""), "B")]
    path = write_csv(tmp_path / "items.csv", HEADER, [good, row])
    with pytest.raises(DataError, match=rf"malformed row at {path}, {message}"):
        _load(custom(path, **overrides))


def test_a_mapping_naming_a_missing_column_lists_the_columns_there_are(tmp_path: Path, custom) -> None:
    path = write_csv(tmp_path / "items.csv", HEADER, [GOOD])
    with pytest.raises(DataError, match=r"dataset.fields.options.3 names the column 'e', which .*items.csv does not "
                                        r"have; its columns are \['stem', 'a', 'b', 'c', 'd', 'key'\]"):
        _load(custom(path, fields={"options": ["a", "b", "c", "e"]}))
    with pytest.raises(DataError, match=r"dataset.fields.question names the column 'question'"):
        _load(custom(path, fields={"question": "question"}))


def test_a_letter_answer_on_a_numbered_question_names_the_rule(tmp_path: Path) -> None:
    rows = [{"id": "q1", "question": "Q?", "choices": {"text": ["w", "x", "y", "z"], "label": ["1", "2", "3", "4"]},
             "answerKey": "2"}]
    path = write_jsonl(tmp_path / "arc.jsonl", rows)
    cfg = {"name": "numbered", "path": str(path), "answer_format": "letter",
           "fields": {"id": "id", "question": "question", "options": "choices", "answer": "answerKey"}}
    with pytest.raises(DataError, match=rf"{path}:1: field 'answerKey' .*labelled with numbers \['1', '2', '3', "
                                        r"'4'\]\. Select the rule 'dataset.rules=\[numeric_labels\]'"):
        _load(cfg)
    (question,) = _load({**cfg, "rules": ["numeric_labels"]})
    assert question.labels == ("A", "B", "C", "D") and question.answer == "B"


def test_duplicate_own_ids_are_an_error_even_for_identical_rows(tmp_path: Path, custom) -> None:
    path = write_csv(tmp_path / "items.csv", ["qid", *HEADER], [["x1", *GOOD], ["x2", *GOOD], ["x1", *GOOD]])
    with pytest.raises(DataError, match=rf"duplicate question id 'x1' at {path}, data row 3 \(first at .*data row 1\)"
                                        r": ids in dataset.fields.id \('qid'\) must be unique"):
        _load(custom(path, fields={"id": "qid"}))


def test_rows_with_the_same_text_but_different_answers_are_an_error(tmp_path: Path, custom) -> None:
    path = write_csv(tmp_path / "items.csv", HEADER, [GOOD, [*GOOD[:5], "C"]])
    with pytest.raises(DataError, match=r"duplicate question id 'custom-[0-9a-f]{16}' at .*data row 2 .*different "
                                        "correct answers"):
        _load(custom(path))


def test_a_row_missing_a_mapped_field_names_it(tmp_path: Path) -> None:
    rows = [{"q": "Q?", "opts": ["a", "b"], "ans": 0}, {"q": "R?", "opts": ["a", "b"]}]
    path = write_jsonl(tmp_path / "items.jsonl", rows)
    cfg = {"name": "custom", "path": str(path), "answer_format": "index",
           "fields": {"question": "q", "options": "opts", "answer": "ans"}}
    with pytest.raises(DataError, match=rf"malformed row at {path}:2: field 'ans' is missing "
                                        r"\(dataset.fields.answer\)"):
        _load(cfg)


@pytest.mark.parametrize(("value", "message"), [
    ("abc", "must be a list of option texts or {'text'"),
    ({"txt": ["a", "b"]}, "it has no 'text' list"),
    ({"text": ["a", "b"], "label": ["A"]}, "'opts.text' and 'opts.label' differ in length"),
    (["a", 3.5], r"option 'opts\[1\]' is not text"),
])
def test_an_options_column_of_the_wrong_shape_is_named(tmp_path: Path, value, message: str) -> None:
    path = write_jsonl(tmp_path / "items.jsonl", [{"q": "Q?", "opts": value, "ans": 0}])
    cfg = {"name": "custom", "path": str(path), "answer_format": "index",
           "fields": {"question": "q", "options": "opts", "answer": "ans"}}
    with pytest.raises(DataError, match=rf"malformed row at {path}:1: .*{message}"):
        _load(cfg)


def test_options_come_from_a_list_column_a_labelled_column_or_columns(tmp_path: Path, custom) -> None:
    as_list = write_jsonl(tmp_path / "list.jsonl", [{"q": "Q?", "opts": ["w", "x", "y"], "ans": 2}])
    labelled = write_jsonl(tmp_path / "labelled.jsonl",
                           [{"q": "Q?", "opts": {"text": ["w", "x", "y"], "label": ["A", "B", "C"]}, "ans": "C"}])
    columns = write_csv(tmp_path / "columns.csv", HEADER, [["Q?", "w", "x", "y", "", "C"]])
    fields = {"question": "q", "options": "opts", "answer": "ans"}
    got = [
        _load({"name": "custom", "path": str(as_list), "answer_format": "index", "fields": fields}),
        _load({"name": "custom", "path": str(labelled), "answer_format": "letter", "fields": fields}),
        _load(custom(columns)),
    ]
    for (question,) in got:
        assert question.question == "Q?" and question.options == ("w", "x", "y")
        assert question.labels == ("A", "B", "C") and question.answer == "C"


def test_a_text_answer_matches_one_option_exactly_or_loosely(tmp_path: Path, custom) -> None:
    path = write_csv(tmp_path / "items.csv", HEADER, [["Q?", "Paris", "Rome", "Oslo", "Bern", " rome "]])
    (question,) = _load(custom(path, answer_format="text"))
    assert question.answer == "B"


def test_answer_format_none_loads_items_without_a_key(tmp_path: Path, custom) -> None:
    path = write_csv(tmp_path / "items.csv", HEADER, [GOOD])
    (question,) = _load(custom(path, answer_format="none"))
    assert question.answer is None and len(question.options) == 4
