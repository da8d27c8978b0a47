"""Bad input through ``python -m prism``, as a person types it: one clear paragraph, never a traceback.

Extends the table in tests/test_cli.py (unknown model group, unknown key, ``dataset.n=abc``, ``n`` of 0 or
too large, replay without a file, a missing GGUF) with every other bad input RELIABILITY.md lists. PRISM's own errors
are one ``prism: error: ...`` line; Hydra's (unknown group option, wrong type) are Hydra's own short
message, which lists the valid options. The cases are independent subprocesses, so they run a few at a
time. Inputs that are only found once MLflow or llama.cpp is loaded (a damaged GGUF, a store path that is
a directory, an unknown tracking scheme, an answer key that is not a label) are checked in-process below:
they raise the same PrismError subclasses, which the CLI prints the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import compose_config, run_overrides

from prism.backends.base import BackendError, Request
from prism.backends.llamacpp import LlamaCppModelConfig
from prism.run.store import CompletionStore, StoreError
from prism.run.tracking import MlflowTracker, TrackingError
from prism.types import GenerationParams, Prompt


@dataclass(frozen=True)
class Case:
    """One command line and what its output must say.

    Attributes:
        args: Overrides after the common ones (a private store, MLflow store and frozen cache).
        says: Text the output must contain (every item).
        prism_error: The message is PRISM's own ``prism: error:`` line (else Hydra's own message).
        succeeds: The run finishes (a problem it reports without stopping).
        env: Extra environment variables.
    """

    args: tuple[str, ...]
    says: tuple[str, ...]
    prism_error: bool = True
    succeeds: bool = False
    env: dict[str, str] = field(default_factory=dict)


def arc_row(qid: str, key: str = "A", stem: str = "Which one?") -> str:
    return json.dumps({"id": qid, "question": stem, "choices": {"text": ["w", "x", "y", "z"],
                                                              "label": ["A", "B", "C", "D"]}, "answerKey": key})


def data_dir_with(root: Path, name: str, lines: list[str]) -> Path:
    """A data directory holding ``arc_challenge/test.jsonl`` with ``lines``."""
    path = root / name / "arc_challenge" / "test.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return root / name


def build_cases(root: Path, data_dir: Path) -> dict[str, Case]:
    """Every case, with the files it needs written under ``root``."""
    good = [arc_row(f"Q{i}") for i in range(4)]
    malformed = data_dir_with(root, "malformed", [*good[:2], '{"id": "Q9", "question": ', *good[2:]])
    missing_field = data_dir_with(root, "missing_field", [*good[:3], json.dumps({"id": "Q9", "question": "?"})])
    duplicates = data_dir_with(root, "duplicates", [*good, arc_row("Q1")])
    empty = data_dir_with(root, "empty", [])
    broken_replay = root / "broken_replay.jsonl"
    broken_replay.write_text('{"question_id": "Q1", "condition": "P0", "response": "A"}\n{"question_id": "Q2", \n')
    not_gguf = root / "weights.gguf"
    not_gguf.write_bytes(b"<html>404 Not Found</html>")
    ollama = ("model=llama3", "model.retry_budget_s=0.5", "model.retry_base_delay_s=0.05")
    in_the_way = root / "a-file"  # a file where a directory should be: unwritable even for root
    in_the_way.write_text("not a directory\n", encoding="utf-8")
    return {
        "unknown-condition-set": Case(("conditions=nope",), ("Could not find 'conditions/nope'",
                                      "Available options in 'conditions'", "prism"), prism_error=False),
        "unknown-dataset": Case(("dataset=nope",), ("Could not find 'dataset/nope'", "arc_challenge", "sciq"),
                                prism_error=False),
        "wrong-type-float": Case(("generation.temperature=hot",), ("'hot' of type 'str' could not be converted "
                                                                   "to Float",), prism_error=False),
        "wrong-type-bool": Case(("store.enabled=maybe",), ("Value 'maybe' is not a valid bool",),
                                prism_error=False),
        "negative-n": Case(("dataset.n=-2",), ("cannot draw n=-2 questions: n must be between 1 and the pool",)),
        "zero-repetitions": Case(("generation.repetitions=0",), ("generation.repetitions=0 cannot be used",
                                                                 "a whole number >= 1")),
        "negative-max-tokens": Case(("generation.max_tokens=-1",), ("generation.max_tokens=-1 cannot be used",)),
        "negative-temperature": Case(("generation.temperature=-0.5",), ("generation.temperature=-0.5 cannot",)),
        "top-p-above-one": Case(("generation.top_p=2",), ("generation.top_p=2.0 cannot be used", "(0, 1]")),
        "zero-concurrency": Case((*ollama, "model.concurrency=0"), ("model.concurrency must be a whole number >= 1",)),
        "data-dir-missing": Case((f"dataset.data_dir={root}/nowhere",), (f"data directory {root}/nowhere does not "
                                                                        "exist",)),
        "data-file-missing": Case((f"dataset.data_dir={data_dir}", "dataset.split=dev"),
                                  (f"expected the file {data_dir}/arc_challenge/dev.jsonl, which does not exist",
                                   "test.jsonl")),
        "malformed-row": Case((f"dataset.data_dir={malformed}",),
                              (f"malformed row at {malformed}/arc_challenge/test.jsonl:3: invalid JSON",)),
        "row-missing-field": Case((f"dataset.data_dir={missing_field}",),
                                  (f"{missing_field}/arc_challenge/test.jsonl:4: field 'answerKey' is missing",)),
        "duplicate-ids": Case((f"dataset.data_dir={duplicates}", "dataset.n=2"),
                              ("duplicate question id 'Q1' at", "test.jsonl:5 (first at", "test.jsonl:2)")),
        "empty-data-file": Case((f"dataset.data_dir={empty}",), ("test.jsonl holds no rows",)),
        "replay-file-missing": Case(("model=replay", f"model.path={root}/nope.jsonl"),
                                    (f"replay file '{root}/nope.jsonl' does not exist",)),
        "replay-malformed-line": Case(("model=replay", f"model.path={broken_replay}"),
                                      (f"{broken_replay}:2 is not valid JSON",)),
        "gguf-not-a-gguf": Case((f"model.path={not_gguf}",), ("is not a GGUF file (it starts with b'<htm'",)),
        "ollama-host-not-an-address": Case((*ollama, "model.host=ftp://models.example"),
                                           ("model.host='ftp://models.example' is not an Ollama server address",
                                            "http://localhost:11434")),
        "ollama-host-with-space": Case((*ollama, "model.host='localhost 11434'"), ("it contains whitespace",)),
        "ollama-host-not-listening": Case((*ollama, "model.host=http://127.0.0.1:9"), ("127.0.0.1:9",
                                                                                       "ollama serve")),
        "cache-dir-unwritable": Case((f"dataset.cache_dir={in_the_way}/frozen",),
                                     (f"cannot write to {in_the_way}/frozen (dataset.cache_dir)",
                                      f"{in_the_way} is a file, not a directory", "dataset.cache_dir=DIR")),
        "model-name-dot-dot": Case(("model.name=..",), ("model.name='..' cannot name a model",
                                                        "model.name=NAME")),
        "model-name-path-segment": Case(("model=replay", f"model.path={broken_replay}", "model.name=lab/../x"),
                                        ("model.name='lab/../x' cannot name a model",)),
        "store-dir-unwritable": Case((f"store.path={in_the_way}/store/store.sqlite",),
                                     (f"cannot write to {in_the_way}/store (store.path)", "store.path=DIR")),
    }


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory,
             data_dir: Path) -> dict[str, tuple[Case, subprocess.CompletedProcess[str]]]:
    """Run every case once, three at a time (each stops before MLflow is touched)."""
    root = tmp_path_factory.mktemp("bad_input")
    cases = build_cases(root, data_dir)

    def launch(item: tuple[str, Case]) -> tuple[str, tuple[Case, subprocess.CompletedProcess[str]]]:
        name, case = item
        args = [sys.executable, "-m", "prism", *run_overrides(root, data_dir), "dataset.n=2", *case.args,
                f"hydra.run.dir={root}/runs/{name}"]
        done = subprocess.run(args, cwd=root, env={**os.environ, **case.env}, capture_output=True, text=True,
                              timeout=300)
        return name, (case, done)

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(pool.map(launch, cases.items()))


CASE_NAMES = [
    "unknown-condition-set", "unknown-dataset", "wrong-type-float", "wrong-type-bool", "negative-n",
    "zero-repetitions", "negative-max-tokens", "negative-temperature", "top-p-above-one", "zero-concurrency",
    "data-dir-missing", "data-file-missing", "malformed-row", "row-missing-field", "duplicate-ids",
    "empty-data-file", "replay-file-missing", "replay-malformed-line", "gguf-not-a-gguf",
    "ollama-host-not-an-address", "ollama-host-with-space", "ollama-host-not-listening", "cache-dir-unwritable",
    "store-dir-unwritable", "model-name-dot-dot", "model-name-path-segment",
]


def test_the_table_names_every_case(tmp_path: Path, data_dir: Path) -> None:
    assert sorted(build_cases(tmp_path, data_dir)) == sorted(CASE_NAMES)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_bad_input_is_one_clear_paragraph_without_a_traceback(
        outcomes: dict[str, tuple[Case, subprocess.CompletedProcess[str]]], name: str,
        record_property: Callable[[str, object], None]) -> None:
    case, done = outcomes[name]
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output[-3000:]
    for text in case.says:
        assert text in output, output[-3000:]
    if case.succeeds:
        assert done.returncode == 0, output[-3000:]
        return
    assert done.returncode == 1, output[-3000:]
    if case.prism_error:
        (line,) = [line for line in done.stderr.splitlines() if line.startswith("prism: error:")]
        assert all(text in line for text in case.says)  # the whole message is that one line
    record_property("injected", 1)


def test_a_gguf_with_the_magic_that_llama_cpp_cannot_load_is_a_backend_error(tmp_path: Path) -> None:
    from prism.backends.llamacpp import LlamaCppBackend

    damaged = tmp_path / "damaged.gguf"
    damaged.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 64)  # passes the magic check, then nothing loads
    backend = LlamaCppBackend(LlamaCppModelConfig(name="damaged", path=str(damaged)))
    prompt = Prompt("q1", "P0", "Which? A. w\nReturn only the letter.", ("A",), ("A",), ("w",), "1")
    with pytest.raises(BackendError, match=rf"llama.cpp could not load model.path '{damaged}'.*truncated"):
        backend.generate(Request(prompt, GenerationParams(temperature=0.0, max_tokens=4), 0))


def test_a_store_path_that_is_a_directory_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=rf"the completion store '{tmp_path}' cannot be opened"):
        CompletionStore(tmp_path)


def test_a_tracking_uri_with_an_unknown_scheme_is_a_tracking_error() -> None:
    with pytest.raises(TrackingError, match="cannot use the MLflow tracking store 'nosuch://x'"):
        MlflowTracker("nosuch://x", "prism")


def test_a_question_whose_answer_key_is_not_a_label_stops_the_run_before_any_model_call(workdir: Path) -> None:
    bad_key = data_dir_with(workdir, "bad_key", [*(arc_row(f"Q{i}") for i in range(4)), arc_row("Q8", key="E")])
    from prism.questions import DataError
    from prism.run.pipeline import run

    replay = workdir / "replay.jsonl"  # the model: answers for the good questions, never asked
    replay.write_text("".join(json.dumps({"question_id": f"Q{i}", "condition": c, "response": "A"}) + "\n"
                              for i in range(4) for c in ("P0", "P1", "P2", "P3", "P4")))
    overrides = [*run_overrides(workdir, bad_key), "dataset.n=4", "model=replay", f"model.path={replay}"]
    with pytest.raises(DataError, match=rf"{bad_key}/arc_challenge/test.jsonl:5: field 'answerKey' .*'E'"):
        run(compose_config(overrides), output_dir=workdir / "out")
    assert not (workdir / "out" / "responses").exists()


@pytest.mark.parametrize(("args", "says"), [
    (("model=llama3", "model.retry_budget_s=0.5", "generation.cloze=true"),
     "Ollama returns no log-probabilities of the prompt's tokens"),
    (("conditions=turns", "model.chat=false"), "have turns other than one user turn"),
    (("generation.cloze=true", "generation.cloze_target=word"), "generation.cloze_target='word' cannot be used"),
])
def test_the_cloze_reading_and_plain_prompts_refuse_what_they_cannot_read_before_inference(
        tmp_path: Path, data_dir: Path, args: tuple[str, ...], says: str) -> None:
    done = subprocess.run([sys.executable, "-m", "prism", *run_overrides(tmp_path, data_dir), "dataset.n=2", *args],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("prism: error:")]
    assert says in line
