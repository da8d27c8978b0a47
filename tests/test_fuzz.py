"""Fuzzing the readers of files PRISM does not write itself, and the config check, with hypothesis.

Every reader either parses its input or raises its module's PrismError subclass naming the file and
line; nothing else may escape (no UnicodeDecodeError, KeyError, RecursionError or a pyarrow error).
Composition with random override values either composes or fails with Hydra's or OmegaConf's own
errors, which the CLI prints as one paragraph; a composed generation group then passes PRISM's own range
check or fails it with a ConfigError. Each test has a fixed example budget and no deadline,
so the whole file takes well under 30 s on a loaded 2-core machine; the parser is fuzzed in
tests/parsing/test_parsing.py with the same kind of budget.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import CONF_DIR
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from prism.backends.base import BackendError
from prism.backends.replay import read_replay_file
from prism.errors import ConfigError
from prism.questions import DataError, load_questions, read_frozen
from prism.run.store import StoreError, read_jsonl
from prism.types import Question

# Examples per fuzz test; the counts RELIABILITY.md reports. Raise locally to fuzz longer.
BYTES_EXAMPLES = 200
STRUCTURED_EXAMPLES = 150
DATASET_EXAMPLES = 40  # each valid file goes through `datasets`, about 0.1 s per example
CONFIG_EXAMPLES = 40



def fuzz(examples: int) -> settings:
    """A bounded budget: ``examples`` inputs, no per-example deadline (the box may be loaded)."""
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

_QUESTION = Question("q1", "Stem?", ("w", "x", "y", "z"), ("A", "B", "C", "D"), "B", "arc_challenge", "test").to_dict()
_JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=12))
_JSON = st.recursive(_JSON_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                           st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                     max_leaves=12)


def _mutations(valid: dict) -> st.SearchStrategy[bytes]:
    """A line near a valid record: itself, cut short, a field dropped or retyped, or hostile bytes."""
    text = json.dumps(valid, ensure_ascii=False)
    return st.one_of(
        st.just(text.encode()),
        st.integers(0, len(text)).map(lambda cut: text[:cut].encode()),
        st.sampled_from(sorted(valid)).map(
            lambda key: json.dumps({k: v for k, v in valid.items() if k != key}).encode()),
        st.tuples(st.sampled_from(sorted(valid)), _JSON).map(
            lambda kv: json.dumps({**valid, kv[0]: kv[1]}).encode()),
        _JSON.map(lambda value: json.dumps(value).encode()),
        st.sampled_from([b"", b"   ", b"\xff\xfe", b"[" * 100_000, b'{"a": ' * 50_000, b"\x00", "é".encode()[:1],
                         b"\xe2\x80\xa8", b"null", b"NaN", b"{}", b"[]"]),
        st.binary(max_size=40),
    )


def _file(valid: dict) -> st.SearchStrategy[bytes]:
    """Whole files: lines from ``_mutations`` joined by newlines, with or without a final one."""
    return st.tuples(st.lists(_mutations(valid), max_size=6), st.booleans()).map(
        lambda parts: b"\n".join(parts[0]) + (b"\n" if parts[1] else b""))


_ANY_FILE = st.one_of(st.binary(max_size=400), _file(_QUESTION))


@fuzz(BYTES_EXAMPLES)
@given(data=_ANY_FILE)
def test_read_jsonl_parses_or_raises_store_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "responses.jsonl"
    path.write_bytes(data)
    try:
        records = list(read_jsonl(path))
    except StoreError as exc:
        assert str(path) in str(exc)
        return
    assert all(isinstance(r, dict) for r in records)
    # Only the line after the last newline may be skipped, and only a torn one.
    complete = [line for line in data.split(b"\n")[:-1] if line.strip()]
    assert len(records) == len(complete)


_REPLAY = {"question_id": "q1", "condition": "P0", "repetition": 0, "response": "B"}


@fuzz(STRUCTURED_EXAMPLES)
@given(data=st.one_of(st.binary(max_size=400), _file(_REPLAY)))
def test_replay_reader_parses_or_raises_backend_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "replay.jsonl"
    path.write_bytes(data)
    try:
        table = read_replay_file(path)
    except BackendError as exc:
        assert str(path) in str(exc)
        return
    for (qid, condition, repetition), record in table.items():
        assert isinstance(qid, str) and isinstance(condition, str) and repetition >= 0
        assert record.get("response") is None or isinstance(record["response"], str)


@fuzz(STRUCTURED_EXAMPLES)
@given(data=_ANY_FILE)
def test_read_frozen_parses_or_raises_data_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "frozen.jsonl"
    path.write_bytes(data)
    try:
        questions = read_frozen(path)
    except DataError as exc:
        assert str(path) in str(exc)
        return
    assert all(isinstance(q, Question) for q in questions)


_ARC = {"id": "Q1", "question": "Stem?", "choices": {"text": ["w", "x", "y", "z"], "label": ["A", "B", "C", "D"]},
        "answerKey": "A"}
_SCIQ = {"question": "Stem?", "correct_answer": "a", "distractor1": "b", "distractor2": "c", "distractor3": "d",
         "support": ""}


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    # The local reader sets the HF offline flags process-wide; restore them after each test.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


@fuzz(DATASET_EXAMPLES)
@given(dataset=st.sampled_from(["arc_challenge", "sciq"]), data=st.data())
def test_local_dataset_reader_parses_or_raises_data_error(tmp_path_factory: pytest.TempPathFactory, dataset: str,
                                                          data: st.DataObject) -> None:
    # Valid rows are likely enough here that `datasets` (pyarrow's JSON reader) sees many files too.
    valid = _ARC if dataset == "arc_challenge" else _SCIQ
    lines = data.draw(st.lists(st.one_of(st.just(json.dumps(valid).encode()), _mutations(valid)), min_size=1,
                               max_size=5))
    root = tmp_path_factory.mktemp("data")
    path = root / dataset / "test.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"\n".join(lines) + b"\n")
    try:
        loaded = load_questions(dataset, "test", data_dir=root)
    except DataError as exc:
        assert str(path) in str(exc)
        event("refused")
        return
    event(f"read ({len(loaded.questions)} eligible)")
    assert all(len(q.options) == 4 and q.answer in q.labels for q in loaded.questions)


# Typed keys of the config schema, and values of every kind a person (or a script) might type after `=`.
_TYPED_KEYS = ["dataset.n", "dataset.sample_seed", "generation.temperature", "generation.max_tokens",
               "generation.top_p", "generation.top_k", "generation.repetitions", "model.concurrency",
               "model.request_timeout_s", "store.enabled", "seed", "dataset.split", "tracking.uri", "model.n_ctx"]
_VALUES = st.one_of(
    st.integers(-10**12, 10**12).map(str), st.floats().map(str), st.sampled_from(
        ["", "null", "true", "False", "1e400", "nan", "-inf", "0x10", "[1,2]", "{a: 1}", "${seed}", "${nope}",
         "${oc.env:NOPE}", "'quoted'", "a b", "=", "\\", "${", "}", "[", "1_000", "０", "٣"]),
    st.text(max_size=10),
)


@fuzz(CONFIG_EXAMPLES)
@given(key=st.sampled_from(_TYPED_KEYS), value=_VALUES)
def test_config_composes_or_fails_with_hydras_own_errors(key: str, value: str) -> None:
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from prism.conf import register_configs
    from prism.config import PrismConfig, to_schema

    register_configs()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="config", overrides=[f"{key}={value}"])
        container = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except (HydraException, OmegaConfBaseException):
        return  # what the CLI reports as one paragraph ("Error merging override ...", "Could not ...")
    assert isinstance(container, dict)
    section, _, name = key.rpartition(".")
    node = container[section] if section else container
    assert isinstance(node, dict) and name in node
    try:  # what Hydra's types let through, PRISM's own checks take or refuse, naming the group's key
        to_schema(cfg, PrismConfig)  # checks every group once, as it is built
    except (ConfigError, DataError) as exc:
        # A group's key is named with its group; a top-level one (seed) by itself.
        named = f"{section.split('.')[0]}." if section else f"{name}="
        assert str(exc).startswith(named), (key, str(exc))
