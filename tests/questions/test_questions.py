from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
import subprocess
import sys
import time
import types
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from prism.questions import DataError, freeze, freeze_question_set, load_questions, read_frozen
from prism.questions import sources as q
from prism.types import Question

# The published n=100, seed 0 samples of the test splits. Pinned so that "byte-identical on any machine"
# is checked against other machines too; a change here changes every frozen set and must be deliberate.
# The committed fixtures hold every question of these samples (tests/data/README.md), so both the fixtures
# and the full splits must give them.
PINNED_SHA256 = {
    "arc_challenge": "89dfafe1d03afadebb676c5ff785b928ffcca782f0c5a8b85611627124de2ce2",
    "sciq": "06c5aa4052c83c509ec00f181fae942359ee4e9feb00e56d2196ff881dc4aa07",
}


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Loading local data sets the HF offline flags process-wide; monkeypatch restores them after each test.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.delenv("PRISM_DATA_DIR", raising=False)


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _arc_row(qid: str, key: str = "A", texts: tuple[str, ...] = ("w", "x", "y", "z")) -> dict[str, Any]:
    labels = [chr(ord("A") + i) for i in range(len(texts))]
    return {
        "id": qid,
        "question": f"stem {qid}?",
        "choices": {"text": list(texts), "label": labels},
        "answerKey": key,
    }


def _write_jsonl(root: Path, dataset: str, lines: list[str]) -> Path:
    path = root / dataset / "test.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_import_does_not_load_datasets() -> None:
    code = "import sys, prism.questions; sys.exit(bool({'datasets', 'huggingface_hub'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


@pytest.mark.parametrize("dataset", ["arc_challenge", "sciq"])
def test_frozen_set_is_byte_identical_across_builds(dataset: str, data_dir: Path, tmp_path: Path) -> None:
    first = freeze_question_set(dataset, "test", 100, 0, data_dir, tmp_path / "a")
    second = freeze_question_set(dataset, "test", 100, 0, data_dir, tmp_path / "b")
    assert first.path.read_bytes() == second.path.read_bytes()
    assert first.sha256 == second.sha256 == hashlib.sha256(first.path.read_bytes()).hexdigest()
    assert first.sha256 == PINNED_SHA256[dataset]
    assert re.fullmatch(rf"{dataset}-test-n100-seed0-[0-9a-f]{{12}}\.jsonl", first.path.name)
    assert tuple(read_frozen(first.path)) == first.questions
    assert len(first.questions) == 100 and len({x.question_id for x in first.questions}) == 100
    source = data_dir / dataset / "test.jsonl"
    assert first.dataset_version == "sha256:" + hashlib.sha256(source.read_bytes()).hexdigest()
    # A second use of the same cache verifies the file and returns the same set.
    assert freeze_question_set(dataset, "test", 100, 0, data_dir, tmp_path / "a") == first


@pytest.mark.parametrize("dataset", ["arc_challenge", "sciq"])
def test_full_split_gives_the_published_frozen_set(dataset: str, full_data_dir: Path, tmp_path: Path) -> None:
    frozen = freeze_question_set(dataset, "test", 100, 0, full_data_dir, tmp_path)
    assert frozen.sha256 == PINNED_SHA256[dataset]
    source = full_data_dir / dataset / "test.jsonl"
    assert frozen.dataset_version == "sha256:" + hashlib.sha256(source.read_bytes()).hexdigest()


@pytest.mark.parametrize("dataset", ["arc_challenge", "sciq"])
def test_larger_n_extends_the_smaller_sample(dataset: str, data_dir: Path, tmp_cache: Path) -> None:
    small = freeze_question_set(dataset, "test", 50, 7, data_dir, tmp_cache)
    large = freeze_question_set(dataset, "test", 100, 7, data_dir, tmp_cache)
    assert large.questions[:50] == small.questions
    other = freeze_question_set(dataset, "test", 50, 8, data_dir, tmp_cache)
    assert {x.question_id for x in other.questions} != {x.question_id for x in small.questions}


def test_freeze_ignores_pool_order() -> None:
    pool = [Question(f"q{i}", "s", ("a", "b", "c", "d"), tuple("ABCD"), "A", "d", "test") for i in range(30)]
    shuffled = pool[:]
    random.Random(1).shuffle(shuffled)
    assert freeze(pool, 10, 3) == freeze(shuffled, 10, 3)


def _numeric_rows(data: Path) -> list[dict[str, Any]]:
    return [r for r in _rows(data / "arc_challenge" / "test.jsonl") if r["choices"]["label"] == ["1", "2", "3", "4"]]


def test_dropped_counts_of_the_full_splits(full_data_dir: Path) -> None:
    arc = load_questions("arc_challenge", "test", data_dir=full_data_dir)
    assert arc.dropped == {"option_count": 7, "too_many_options": 0, "repeated_options": 1, "duplicate": 0,
                           "reordered_duplicate": 0}
    assert len(arc.questions) == 1172 - 8
    assert len(_numeric_rows(full_data_dir)) == 21
    sciq = load_questions("sciq", "test", data_dir=full_data_dir)
    assert sciq.dropped == {"option_count": 0, "too_many_options": 0, "repeated_options": 9, "duplicate": 0,
                            "reordered_duplicate": 0}
    assert len(sciq.questions) == 1000 - 9


def test_dropped_counts_of_the_fixtures(data_dir: Path) -> None:
    # The counts tests/data/README.md states for the committed subsets.
    arc = load_questions("arc_challenge", "test", data_dir=data_dir)
    assert arc.dropped == {"option_count": 1, "too_many_options": 0, "repeated_options": 0, "duplicate": 0,
                           "reordered_duplicate": 0}
    assert len(arc.questions) == 200 - 1
    sciq = load_questions("sciq", "test", data_dir=data_dir)
    assert sciq.dropped == {"option_count": 0, "too_many_options": 0, "repeated_options": 3, "duplicate": 0,
                            "reordered_duplicate": 0}
    assert len(sciq.questions) == 200 - 3


def test_arc_numeric_labels_map_to_letters_by_position(data_dir: Path) -> None:
    by_id = {x.question_id: x for x in load_questions("arc_challenge", "test", data_dir=data_dir).questions}
    numeric = _numeric_rows(data_dir)
    assert len(numeric) == 5
    for row in numeric:
        question = by_id[row["id"]]
        assert question.labels == ("A", "B", "C", "D")
        assert question.options == tuple(row["choices"]["text"])
        assert question.answer == "ABCD"[int(row["answerKey"]) - 1]


def test_sciq_options_are_shuffled_stably_and_keep_the_answer(data_dir: Path) -> None:
    first = load_questions("sciq", "test", seed=0, data_dir=data_dir).questions
    assert first == load_questions("sciq", "test", seed=0, data_dir=data_dir).questions
    correct = {r["question"]: r["correct_answer"] for r in _rows(data_dir / "sciq" / "test.jsonl")}
    for question in first:
        assert question.options[question.labels.index(question.answer)] == correct[question.question]
        assert question.question_id.startswith("sciq-") and len(question.question_id) == 21
    positions = Counter(x.answer for x in first)
    assert set(positions) == {"A", "B", "C", "D"} and max(positions.values()) < 0.4 * len(first)
    reseeded = load_questions("sciq", "test", seed=1, data_dir=data_dir).questions
    assert [x.question_id for x in reseeded] == [x.question_id for x in first]  # ids do not use the seed
    assert [x.options for x in reseeded] != [x.options for x in first]
    assert all(sorted(a.options) == sorted(b.options) for a, b in zip(first, reseeded, strict=True))


def test_answer_key_outside_labels_is_an_error_naming_row_and_field(tmp_path: Path) -> None:
    lines = [json.dumps(_arc_row("ok")), json.dumps(_arc_row("bad", key="E"))]
    path = _write_jsonl(tmp_path, "arc_challenge", lines)
    with pytest.raises(DataError, match=rf"{path}:2: field 'answerKey' .* 'E', which is not one of the option "
                                        r"labels \['A', 'B', 'C', 'D'\]"):
        load_questions("arc_challenge", "test", data_dir=tmp_path)


def test_duplicate_ids_are_an_error(tmp_path: Path) -> None:
    _write_jsonl(tmp_path, "arc_challenge", [json.dumps(_arc_row("Q1")), "", json.dumps(_arc_row("Q1"))])
    with pytest.raises(DataError, match=r"duplicate question id 'Q1' at .*test.jsonl:3 \(first at .*:1\)"):
        load_questions("arc_challenge", "test", data_dir=tmp_path)


def test_unknown_dataset_lists_the_known_ones(data_dir: Path) -> None:
    with pytest.raises(DataError, match="unknown dataset 'nope'; known datasets: arc_challenge, commonsense_qa, "
                                        "mmlu, mmlu_pro, openbookqa, opinions_qa, political_compass, sciq, wvs7"):
        load_questions("nope", "test", data_dir=data_dir)


def test_missing_file_names_the_expected_path(data_dir: Path) -> None:
    expected = data_dir / "sciq" / "train.jsonl"
    with pytest.raises(DataError, match=f"expected the file {expected}.*found: .*test.jsonl"):
        load_questions("sciq", "train", data_dir=data_dir)


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [("{not json", "invalid JSON"), (json.dumps({"question": "no answers"}), "'correct_answer' is missing")],
)
def test_malformed_row_names_file_and_line(tmp_path: Path, bad_line: str, message: str) -> None:
    good = {
        "question": "Q?",
        "correct_answer": "a",
        "distractor1": "b",
        "distractor2": "c",
        "distractor3": "d",
        "support": "",
    }
    path = _write_jsonl(tmp_path, "sciq", [json.dumps(good), bad_line])
    with pytest.raises(DataError, match=f"malformed row at {path}:2: .*{message}"):
        load_questions("sciq", "test", data_dir=tmp_path)


@pytest.mark.parametrize("n", [0, -1, 198])
def test_n_out_of_range_states_the_pool_size(n: int, data_dir: Path, tmp_cache: Path) -> None:
    # The SciQ fixture has 197 eligible questions (200 less 3 with a repeated option).
    with pytest.raises(DataError, match=f"n={n} .*pool of 197 eligible"):
        freeze_question_set("sciq", "test", n, 0, data_dir, tmp_cache)
    assert freeze_question_set("sciq", "test", 197, 0, data_dir, tmp_cache).pool_size == 197


def test_tampered_cache_file_is_an_error_not_a_rebuild(data_dir: Path, tmp_cache: Path) -> None:
    frozen = freeze_question_set("arc_challenge", "test", 20, 0, data_dir, tmp_cache)
    tampered = frozen.path.read_bytes().replace(b'"answer":"', b'"answer":"X', 1)
    frozen.path.write_bytes(tampered)
    with pytest.raises(DataError, match=rf"{frozen.path} has sha256 .* changed.*Delete {frozen.path}"):
        freeze_question_set("arc_challenge", "test", 20, 0, data_dir, tmp_cache)
    assert frozen.path.read_bytes() == tampered
    frozen.path.unlink()  # deleting only the data file: it is rebuilt, and must match its record
    assert freeze_question_set("arc_challenge", "test", 20, 0, data_dir, tmp_cache).sha256 == frozen.sha256


def test_changed_source_data_is_an_error(data_dir: Path, tmp_path: Path, tmp_cache: Path) -> None:
    local = tmp_path / "data"
    shutil.copytree(data_dir / "sciq", local / "sciq")
    freeze_question_set("sciq", "test", 10, 0, local, tmp_cache)
    source = local / "sciq" / "test.jsonl"
    source.write_text(
        source.read_text(encoding="utf-8").replace("oxidants", "oxidizers", 1), encoding="utf-8"
    )
    with pytest.raises(
        DataError, match=r"source of frozen file .* changed: recorded dataset version sha256:"
    ):
        freeze_question_set("sciq", "test", 10, 0, local, tmp_cache)


def test_line_separators_inside_strings_survive(tmp_path: Path, tmp_cache: Path) -> None:
    row = {
        "question": "Q\u2028with\x85breaks?",
        "correct_answer": "a\u2029",
        "distractor1": "b",
        "distractor2": "c",
        "distractor3": "d",
        "support": "",
    }
    _write_jsonl(tmp_path, "sciq", [json.dumps(row, ensure_ascii=False)])
    frozen = freeze_question_set("sciq", "test", 1, 0, tmp_path, tmp_cache)
    assert frozen.questions[0].question == row["question"]
    assert tuple(read_frozen(frozen.path)) == frozen.questions


def test_non_utf8_source_names_the_line(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path, "arc_challenge", [json.dumps(_arc_row("Q1"))])
    path.write_bytes(path.read_bytes() + b'{"id": "\xff"}\n')
    with pytest.raises(DataError, match=f"malformed row at {path}:2: not valid UTF-8"):
        load_questions("arc_challenge", "test", data_dir=tmp_path)


def test_read_frozen_names_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "frozen.jsonl"
    path.write_text('{"question_id": "x"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=f"malformed frozen question at {path}:1"):
        read_frozen(path)


def test_offline_without_data_dir_fails_fast_with_the_fix() -> None:
    start = time.monotonic()
    with pytest.raises(DataError) as info:
        load_questions("arc_challenge", "test")
    assert time.monotonic() - start < 3
    message = str(info.value)
    assert "offline" in message and "dataset.data_dir=DIR" in message and "PRISM_DATA_DIR" in message
    assert "\n" not in message


def test_unreachable_hub_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HF_DATASETS_OFFLINE")
    monkeypatch.setattr(q, "_hub_reachable", lambda timeout=2.0: False)
    with pytest.raises(DataError, match=r"Hub is unreachable and no data directory.*PRISM_DATA_DIR"):
        load_questions("sciq", "test")


def test_reachability_probe_is_bounded() -> None:
    start = time.monotonic()
    assert isinstance(q._hub_reachable(timeout=0.5), bool)
    assert time.monotonic() - start < 1.5


def test_hub_load_pins_the_revision(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []

    class FakeDataset:
        _fingerprint = "f00d"

        def to_list(self) -> list[dict[str, Any]]:
            return [_arc_row("Mercury_1", key="B")]

    def load_dataset(*args: Any, **kwargs: Any) -> FakeDataset:
        calls.append((args, kwargs))
        return FakeDataset()

    class FakeApi:
        def dataset_info(self, repo: str) -> Any:
            return types.SimpleNamespace(sha="abc123")

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HF_DATASETS_OFFLINE")
    monkeypatch.setattr(q, "_hub_reachable", lambda timeout=2.0: True)
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    monkeypatch.setitem(sys.modules, "huggingface_hub", types.SimpleNamespace(HfApi=FakeApi))
    loaded = load_questions("arc_challenge", "validation")
    assert calls == [(("allenai/ai2_arc", "ARC-Challenge"), {"split": "validation", "revision": "abc123"})]
    assert loaded.dataset_version == "allenai/ai2_arc@abc123" and loaded.source == "allenai/ai2_arc"
    assert loaded.questions[0].answer == "B" and loaded.questions[0].split == "validation"
