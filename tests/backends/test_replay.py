from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from prism.backends.base import BackendError, Request
from prism.backends.registry import create_backend
from prism.backends.replay import ReplayModelConfig
from prism.config import ModelConfig
from prism.types import GenerationParams, Prompt

PARAMS = GenerationParams(temperature=0.0, max_tokens=8)


def request(qid: str, condition: str, repetition: int = 0) -> Request:
    prompt = Prompt(qid, condition, "text", ("A", "B"), ("A", "B"), ("x", "y"), "1")
    return Request(prompt, PARAMS, repetition)


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_replay_answers_identity_and_scripted_failures(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", [
        json.dumps({"question_id": "q1", "condition": "P0", "response": "B"}),
        json.dumps({"question_id": "q1", "condition": "P0", "repetition": 1, "response": "A"}),
        json.dumps({"question_id": "q2", "condition": "P0", "error": "timeout"}),
    ])
    backend = create_backend(ReplayModelConfig(path=str(path), name="scripted"))
    identity = backend.identity()
    assert (identity.name, identity.backend) == ("scripted", "replay")
    assert identity.digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert backend.generate(request("q1", "P0")).text == "B"
    assert backend.generate(request("q1", "P0", 1)).text == "A"
    failed = backend.generate(request("q2", "P0"))
    assert failed.text is None and failed.error == "timeout"
    with pytest.raises(BackendError, match="no response for question_id='q3'"):
        backend.generate(request("q3", "P0"))


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["{not json"], r"r.jsonl:1 is not valid JSON"),
        (['["a list"]'], r"r.jsonl:1 must be a JSON object"),
        (['{"question_id": "q", "condition": "P0"}'], r"r.jsonl:1 lacks response"),
        (['{"condition": "P0", "response": "A"}'], r"r.jsonl:1 lacks question_id"),
        (['{"question_id": "q", "condition": "P0", "response": 3}'], r"response must be a string"),
        (['{"question_id": "q", "condition": "P0", "response": "A", "repetition": -1}'], r"repetition must be"),
        (['{"question_id": "q", "condition": "P0", "response": "A"}'] * 2, r"r.jsonl:2 repeats the cell"),
    ],
)
def test_malformed_replay_files_name_file_and_line(tmp_path: Path, lines: list[str], message: str) -> None:
    path = write(tmp_path / "r.jsonl", lines)
    with pytest.raises(BackendError, match=message):
        create_backend(ReplayModelConfig(path=str(path), name="x"))


def test_missing_replay_file_and_unknown_backend_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="does not exist"):
        create_backend(ReplayModelConfig(path=str(tmp_path / "nope.jsonl"), name="x"))
    with pytest.raises(BackendError, match="known backends: anthropic, llamacpp, ollama, openai, replay"):
        create_backend(ModelConfig(name="x", backend="vllm-magic"))


def test_replay_lines_may_say_why_generation_stopped(tmp_path: Path) -> None:
    from prism.backends.replay import ReplayModelConfig

    path = write(tmp_path / "r.jsonl", [
        json.dumps({"question_id": "q1", "condition": "P0", "response": "B"}),
        json.dumps({"question_id": "q1", "condition": "P0", "repetition": 1, "response": "A",
                    "finish_reason": "length"}),
    ])
    backend = create_backend(ReplayModelConfig(name="scripted", path=str(path)))
    # Optional per line: null where the file does not say.
    assert [backend.generate(request("q1", "P0", r)).finish_reason for r in (0, 1)] == [None, "length"]
    from prism.backends.replay import read_replay_file

    line = '{"question_id": "q", "condition": "P0", "response": "A", "finish_reason": 1}'
    bad = write(tmp_path / "bad.jsonl", [line])
    with pytest.raises(BackendError, match=r"bad.jsonl:1: finish_reason must be a string"):
        read_replay_file(bad)


def test_the_index_finds_every_cell_even_when_cell_hashes_collide(tmp_path: Path, monkeypatch) -> None:
    from prism.backends import replay

    lines = [json.dumps({"question_id": f"q{i}", "condition": c, "repetition": r, "response": f"{i}{c}{r}"})
             for i in range(5) for c in ("P0", "P1") for r in (0, 1)]
    path = write(tmp_path / "r.jsonl", ["", *lines, ""])  # blank lines are skipped, as before
    monkeypatch.setattr(replay, "_cell_hash", lambda key: 7)  # every cell on one hash: lookups must compare keys
    backend = create_backend(ReplayModelConfig(path=str(path), name="x"))
    for i in range(5):
        for c in ("P0", "P1"):
            assert [backend.generate(request(f"q{i}", c, r)).text for r in (0, 1)] == [f"{i}{c}0", f"{i}{c}1"]
    with pytest.raises(BackendError, match="no response for question_id='q9'"):
        backend.generate(request("q9", "P0"))
    backend.close()
    assert backend.identity().digest == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_repeated_cell_is_named_by_its_first_repeat_in_file_order(tmp_path: Path, monkeypatch) -> None:
    from prism.backends import replay

    cell = {"question_id": "q", "condition": "P0", "response": "A"}
    other = {"question_id": "r", "condition": "P0", "response": "A"}
    path = write(tmp_path / "r.jsonl", [json.dumps(other), json.dumps(cell), json.dumps(cell), json.dumps(other)])
    monkeypatch.setattr(replay, "_cell_hash", lambda key: 1)  # and a collision between the two cells
    with pytest.raises(BackendError, match=r"r.jsonl:3 repeats the cell \('q', 'P0', 0\)"):
        create_backend(ReplayModelConfig(path=str(path), name="x"))


def test_read_replay_file_gives_every_line_by_cell(tmp_path: Path) -> None:
    from prism.backends.replay import read_replay_file
    from prism.records import CellKey

    path = write(tmp_path / "r.jsonl", [json.dumps({"question_id": "q", "condition": "P0", "response": "A"}),
                                        json.dumps({"question_id": "q", "condition": "P1", "error": "x"})])
    table = read_replay_file(path)
    assert list(table) == [CellKey("q", "P0", 0), CellKey("q", "P1", 0)]
    assert table[CellKey("q", "P1", 0)]["error"] == "x"
