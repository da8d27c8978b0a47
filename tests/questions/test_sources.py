"""Reading sources through ``datasets``: the custom adapter on CSV, JSONL and Parquet, and what each keeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prism.config import DatasetConfig
from prism.questions import DataError, dataset_config, load_questions
from questions.helpers import write_csv, write_jsonl

ITEMS = [
    {"qid": "s1", "stem": "Which is a prime number?", "a": "4", "b": "7", "c": "9", "d": "", "key": "B",
     "topic": "maths"},
    {"qid": "s2", "stem": "Pick the text 'None'", "a": "NA", "b": "None", "c": "007", "d": "multi\nline",
     "key": "B", "topic": "text"},
    {"qid": "s3", "stem": "Line\u0085break and \u2028separator?", "a": "yes", "b": "no", "c": "", "d": "",
     "key": "A", "topic": "text"},
]
COLUMNS = list(ITEMS[0])
FIELDS = {"id": "qid", "question": "stem", "options": ["a", "b", "c", "d"], "answer": "key", "group": "topic"}


def _spec(path: Path, **extra: object) -> DatasetConfig:
    return dataset_config({"name": "custom", "path": str(path), "fields": FIELDS, "answer_format": "letter",
                                    **extra})


def _write_all(tmp_path: Path) -> dict[str, Path]:
    import pandas as pd

    parquet = tmp_path / "items.parquet"
    pd.DataFrame(ITEMS, columns=COLUMNS).to_parquet(parquet)
    return {
        "csv": write_csv(tmp_path / "items.csv", COLUMNS, [[item[c] for c in COLUMNS] for item in ITEMS]),
        "jsonl": write_jsonl(tmp_path / "items.jsonl", ITEMS),
        "parquet": parquet,
    }


def test_the_same_items_in_csv_jsonl_and_parquet_give_the_same_questions(tmp_path: Path) -> None:
    loaded = {kind: load_questions(_spec(path)) for kind, path in _write_all(tmp_path).items()}
    questions = {kind: got.questions for kind, got in loaded.items()}
    assert questions["csv"] == questions["jsonl"] == questions["parquet"]
    first, second, third = questions["csv"]
    assert first.options == ("4", "7", "9") and first.answer == "B" and first.group == "maths"
    # CSV cells are text as written: no "NA"/"None" -> missing, no "007" -> 7, a quoted newline kept.
    assert second.options == ("NA", "None", "007", "multi\nline")
    assert third.question == ITEMS[2]["stem"] and third.options == ("yes", "no")
    assert [q.question_id for q in (first, second, third)] == ["s1", "s2", "s3"]
    for kind, got in loaded.items():
        assert got.dataset_version.startswith("sha256:") and got.source.endswith(f"items.{kind}")


def test_the_format_comes_from_the_suffix_or_dataset_format(tmp_path: Path) -> None:
    path = _write_all(tmp_path)["jsonl"]
    renamed = path.rename(tmp_path / "items.txt")
    with pytest.raises(DataError, match=r"cannot tell the format of dataset.path=.*items.txt.*dataset.format=jsonl"):
        load_questions(_spec(renamed))
    assert len(load_questions(_spec(renamed, format="jsonl")).questions) == 3


def test_jsonl_lines_are_split_on_newline_only(tmp_path: Path) -> None:
    # U+0085 and U+2028 inside a string: splitlines() would cut the row in two.
    path = write_jsonl(tmp_path / "items.jsonl", [ITEMS[2], ITEMS[0]])
    assert "\u0085" in path.read_text(encoding="utf-8")
    got = load_questions(_spec(path)).questions
    assert [q.question_id for q in got] == ["s3", "s1"] and got[0].question == ITEMS[2]["stem"]


def test_a_malformed_jsonl_line_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps(ITEMS[0]) + "\n\n[1, 2]\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"malformed row at {path}:3: expected a JSON object, got list"):
        load_questions(_spec(path))


@pytest.mark.parametrize(("text", "message"), [
    ("stem,a,a,key\nQ,x,y,A\n", "needs a header row of unique, non-empty column names"),
    ("", "needs a header row"),
    ("stem,a,b,c,d,key,qid,topic\n", "holds no rows"),
    ("stem,a,b,c,d,key,qid,topic\nQ,w,x,y,z,A,q1,t,EXTRA\n", "data row 1: 9 cells, but the header has 8"),
])
def test_an_unusable_csv_is_refused_with_the_reason(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "items.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        load_questions(_spec(path))


def test_a_missing_file_lists_what_is_there(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "other.jsonl", ITEMS)
    with pytest.raises(DataError, match=r"expected the file .*nope.csv, which does not exist "
                                        r"\(found: \['other.jsonl'\]"):
        load_questions(_spec(tmp_path / "nope.csv"))


def test_a_builtin_loads_from_the_hub_at_a_pinned_revision(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    from prism.questions import builtin_dataset, sources

    calls: list[tuple[object, ...]] = []
    rows = [{"question": "Q?", "subject": "anatomy", "choices": ["a", "b", "c", "d"], "answer": 2}]

    class FakeDataset:
        _fingerprint = "f00d"
        column_names = ("question", "subject", "choices", "answer")

        def to_list(self) -> list[dict]:
            return rows

    def load_dataset(*args: object, **kwargs: object) -> FakeDataset:
        calls.append((args, kwargs))
        return FakeDataset()

    class FakeApi:
        def dataset_info(self, repo: str) -> object:
            return types.SimpleNamespace(sha="rev1")

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HF_DATASETS_OFFLINE")
    monkeypatch.setattr(sources, "_hub_reachable", lambda timeout=2.0: True)
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    monkeypatch.setitem(sys.modules, "huggingface_hub", types.SimpleNamespace(HfApi=FakeApi))
    loaded = load_questions(builtin_dataset("mmlu", split="validation"))
    assert calls == [(("cais/mmlu", "all"), {"split": "validation", "revision": "rev1"})]
    assert loaded.dataset_version == "cais/mmlu@rev1" and loaded.source_id == "hub:cais/mmlu:all"
    (question,) = loaded.questions
    assert question.answer == "C" and question.group == "anatomy" and question.split == "validation"
