"""Frozen sets of mapped datasets: the cache name's digest, groups in the record only when present."""

from __future__ import annotations

import json
from pathlib import Path

from prism.questions import dataset_config, freeze_dataset, freeze_question_set, read_frozen
from prism.types import Question
from questions.helpers import write_csv

HEADER = ["stem", "a", "b", "c", "d", "key"]


def _items(tag: str) -> list[list[str]]:
    return [[f"{tag} question {i}?", "w", "x", "y", "z", "ABCD"[i % 4]] for i in range(6)]


def test_two_custom_files_with_the_same_n_and_seed_never_share_a_cache_file(tmp_path: Path, custom) -> None:
    one = write_csv(tmp_path / "one" / "items.csv", HEADER, _items("one"))
    two = write_csv(tmp_path / "two" / "items.csv", HEADER, _items("two"))
    cache = tmp_path / "cache"
    first = freeze_dataset({**custom(one), "n": 4, "sample_seed": 0, "cache_dir": str(cache)})
    second = freeze_dataset({**custom(two), "n": 4, "sample_seed": 0, "cache_dir": str(cache)})
    assert first.path != second.path and first.path.parent == second.path.parent == cache
    assert first.path.name.startswith("custom-test-n4-seed0-") and first.mapping_digest != second.mapping_digest
    # The same file mapped another way is another set too.
    other = freeze_dataset({**custom(one, fields={"options": ["d", "c", "b", "a"]}), "n": 4, "sample_seed": 0,
                            "cache_dir": str(cache)})
    assert other.path != first.path
    # Using a set again verifies and returns it.
    assert freeze_dataset({**custom(one), "n": 4, "sample_seed": 0, "cache_dir": str(cache)}) == first
    meta = json.loads(first.path.with_suffix(".meta.json").read_text(encoding="utf-8"))
    assert meta["sha256"] == first.sha256 and meta["mapping_digest"] == first.mapping_digest


def test_group_is_written_only_when_the_dataset_has_one(tmp_path: Path, custom) -> None:
    path = write_csv(tmp_path / "items.csv", [*HEADER, "topic"], [[*row, "t"] for row in _items("g")])
    grouped = freeze_dataset({**custom(path, fields={"group": "topic"}), "n": 3, "sample_seed": 0,
                              "cache_dir": str(tmp_path / "c")})
    plain = freeze_dataset({**custom(path), "n": 3, "sample_seed": 0, "cache_dir": str(tmp_path / "c")})
    assert all(json.loads(line)["group"] == "t" for line in grouped.path.read_text(encoding="utf-8").splitlines())
    assert all("group" not in json.loads(line) for line in plain.path.read_text(encoding="utf-8").splitlines())
    assert tuple(read_frozen(grouped.path)) == grouped.questions and grouped.questions[0].group == "t"
    assert tuple(read_frozen(plain.path)) == plain.questions and plain.questions[0].group is None


def test_question_records_without_group_are_unchanged() -> None:
    question = Question("q1", "s", ("a", "b"), ("A", "B"), "B", "d", "test")
    assert set(question.to_dict()) == {"question_id", "question", "options", "labels", "answer", "dataset", "split"}
    assert Question.from_dict(question.to_dict()) == question


def test_a_spec_and_a_builtin_name_freeze_the_same_set(tmp_path: Path) -> None:
    from prism.logged_config import with_builtin_dataset
    from prism.questions import builtin_dataset
    from questions.conftest import FIXTURES

    by_name = freeze_question_set("openbookqa", "test", 5, 1, FIXTURES, tmp_path)
    by_spec = freeze_question_set(builtin_dataset("openbookqa", data_dir=str(FIXTURES)), "test", 5, 1,
                                  cache_dir=tmp_path)
    assert by_name == by_spec
    logged_before_mappings = {"name": "openbookqa", "split": "test", "n": 5, "sample_seed": 1,
                              "data_dir": str(FIXTURES), "cache_dir": str(tmp_path)}
    read_back = with_builtin_dataset({"dataset": logged_before_mappings})["dataset"]
    assert freeze_dataset(read_back) == by_name
    assert dataset_config(read_back).fields.question == "question_stem"
