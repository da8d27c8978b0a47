"""Isolation and safety: the parser never sees the key, dataset text is data, file names stay in their place.

- The parser is blind to the answer key by construction (what the prism.parsing modules import, what its functions take
  and read) and in effect (scrambling the key changes correctness only, never what a response parses to).
- Question and option text holding template syntax (``{question}``, ``${seed}``, Jinja) or control
  characters reaches the model literally under every condition set in prism/conf/conditions/.
- Names from config or model tags (``llama3:8b``, ``org/model``, ``../x``) never become paths that
  leave the output directory.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import os
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from backends.ollama_server import OllamaStub
from conftest import CONF_DIR, REPO_ROOT, compose_config, fresh_mlflow, run_overrides
from hypothesis import given, settings
from hypothesis import strategies as st

import prism.parsing
from prism.backends.base import Request
from prism.conditions import condition_set_from_config, render_all
from prism.questions import freeze_question_set, read_frozen
from prism.results.summary import score_all
from prism.run.inference import Cell, raw_record
from prism.types import GenerationParams, ModelIdentity, safe_filename

PARSING = sorted((REPO_ROOT / "prism" / "parsing").glob("*.py"))
# What a parser that could see the key would have to name.
KEY_FIELDS = {"answer", "correct_answer", "correct", "answerKey", "answer_key"}
QUESTION_TYPES = {"Question", "FrozenSet", "LoadedQuestions"}


# -- The parser cannot see the answer key ----------------------------------------------------------------


def test_parsing_imports_nothing_that_carries_questions_or_keys() -> None:
    assert PARSING, "prism/parsing/ holds no modules"
    imported: dict[str, set[str]] = {}
    for module in PARSING:
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    imported.setdefault(alias.name, set())
            elif isinstance(node, ast.ImportFrom):
                imported.setdefault(node.module or "", set()).update(alias.name for alias in node.names)
    prism_modules = {name for name in imported if name == "prism" or name.startswith("prism.")}
    # Only the parser's own modules, and the one result type.
    assert {name for name in prism_modules if not name.startswith("prism.parsing")} == {"prism.types"}
    assert imported["prism.types"] == {"Parsed"}
    assert not {name for names in imported.values() for name in names} & QUESTION_TYPES
    # Nor does it reach them at run time: its namespace holds no question type.
    assert not QUESTION_TYPES & set(vars(prism.parsing))


@pytest.mark.parametrize("module", PARSING, ids=lambda path: path.name)
def test_parsing_never_reads_an_answer_field(module: Path) -> None:
    tree = ast.parse(module.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            assert node.attr not in KEY_FIELDS | {"question", "questions"}, ast.unparse(node)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            assert node.slice.value not in KEY_FIELDS, ast.unparse(node)
        if isinstance(node, ast.Name):
            assert node.id not in QUESTION_TYPES, node.id
        if isinstance(node, ast.arg):
            assert node.arg not in KEY_FIELDS | {"question", "questions", "frozen", "record"}, node.arg


def test_parse_response_takes_only_the_text_and_what_was_displayed() -> None:
    signature = inspect.signature(prism.parsing.parse_response)
    positional = [p for p in signature.parameters.values() if p.kind is not p.KEYWORD_ONLY]
    assert [p.name for p in positional] == ["text", "labels", "options"]
    assert [str(p.annotation) for p in positional] == ["str", "Sequence[str]", "Sequence[str] | None"]
    # Besides them only why generation stopped, by keyword: nothing about the question.
    keyword = [p for p in signature.parameters.values() if p.kind is p.KEYWORD_ONLY]
    assert [(p.name, str(p.annotation)) for p in keyword] == [("finish_reason", "str | None")]


def _responses(options: Sequence[str], labels: Sequence[str], rng: random.Random) -> str:
    """A response of one of the shapes models give, naming a random displayed label or option."""
    label, text = rng.choice(list(zip(labels, options, strict=True)))
    return rng.choice([label, f"({label})", f"The answer is {label}.", f"{label}. {text}", text, "",
                       "I am not sure.", f"{labels[0]} or {labels[-1]}", f"**{label}**\nBecause {text}."])


@pytest.fixture(scope="module")
def frozen(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return freeze_question_set("arc_challenge", "test", 30, 0, data_dir, tmp_path_factory.mktemp("frozen"))


PARSED_FIELDS = ("displayed", "answer", "recovered", "compliant", "method", "parser_version")


@pytest.mark.parametrize("conditions", ["prism", "labels", "option_order"])
@pytest.mark.parametrize("seed", [0, 1])
def test_scrambling_the_answer_key_changes_correctness_only(frozen: Any, conditions: str, seed: int) -> None:
    # labels and option_order relabel and reorder the options, so the parsed label is mapped back to a
    # canonical one through the prompt; that mapping must not depend on the key either.
    condition_set = condition_set_from_config(compose_config([f"conditions={conditions}"]).conditions)
    rng = random.Random(seed)
    identity = ModelIdentity("m", "replay", "d", {})
    params = GenerationParams(temperature=0.0, max_tokens=8)
    records = []
    for prompt in render_all(frozen.questions, condition_set):
        cell = Cell(Request(prompt, params, 0), "arc_challenge", "test", key=prompt.sha256)
        response = _responses(prompt.displayed_options, prompt.displayed_labels, rng)
        records.append(raw_record(cell, identity, {"response": response}, cached=False, error=None))
    scrambled = dataclasses.replace(frozen, questions=tuple(
        dataclasses.replace(q, answer=rng.choice([label for label in q.labels if label != q.answer]))
        for q in frozen.questions))

    true_key = [s.to_json() for s in score_all(records, frozen, condition_set)]
    wrong_key = [s.to_json() for s in score_all(records, scrambled, condition_set)]
    assert len(true_key) == len(records) > 0
    for a, b in zip(true_key, wrong_key, strict=True):
        assert {k: a[k] for k in PARSED_FIELDS} == {k: b[k] for k in PARSED_FIELDS}
        assert a["correct_answer"] != b["correct_answer"]
        assert a["correct"] == (a["answer"] is not None and a["answer"] == a["correct_answer"])
        assert b["correct"] == (b["answer"] is not None and b["answer"] == b["correct_answer"])
    assert {r["method"] for r in true_key} >= {"exact", "bare", "statement", "empty", "none"}
    assert [r["correct"] for r in true_key] != [r["correct"] for r in wrong_key]


def test_the_parser_is_handed_only_strings_by_the_pipeline(frozen: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import prism.results.summary

    seen: list[tuple[Any, ...]] = []
    real = prism.results.summary.parse_response

    def spy(*args: Any, **kwargs: Any) -> Any:
        assert set(kwargs) <= {"finish_reason"}  # besides the three, only why generation stopped
        assert kwargs.get("finish_reason") is None or isinstance(kwargs["finish_reason"], str)
        seen.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(prism.results.summary, "parse_response", spy)
    condition_set = condition_set_from_config(compose_config([]).conditions)
    prompts = render_all(frozen.questions[:3], condition_set)
    identity = ModelIdentity("m", "replay", "d", {})
    records = [raw_record(Cell(Request(p, GenerationParams(0.0, 8), 0), "arc_challenge", "test", p.sha256), identity,
                          {"response": "B"}, cached=False, error=None) for p in prompts]
    score_all(records, dataclasses.replace(frozen, questions=frozen.questions[:3]), condition_set)
    assert len(seen) == len(records)
    for text, labels, options in seen:
        assert isinstance(text, str)
        assert all(isinstance(x, str) for x in (*labels, *options))


# -- Dataset text is data ---------------------------------------------------------------------------------

# Template syntax of every kind PRISM or its libraries know (str.format, OmegaConf, Jinja, %-format), and
# control characters, inside the text (render() strips the stem's outer white space).
STEM = ("Does {question} or {options} or {closing} or {0} or ${seed} or ${oc.env:HOME} change? "
        "{{ 7*7 }} {% for x in y %}loop{% endfor %} %(name)s \x00nul \x1b[31mred\x1b[0m tab\tcr\rline\u2028end")
OPTIONS = ["{question} and {closing}", "${oc.env:HOME} ${seed}", "{{ 7*7 }} {# c #}", "%(name)s {0} \x1b\x00\u0085"]
INTERPOLATED = ["49", os.environ.get("HOME", "/root") + " ", "loop loop"]


def _crafted_data(root: Path) -> Path:
    rows = [{"id": f"T{i}", "question": f"{STEM} #{i}", "choices": {"text": [f"{o} #{i}" for o in OPTIONS],
                                                                    "label": ["A", "B", "C", "D"]},
             "answerKey": "ABCD"[i]} for i in range(3)]
    path = root / "arc_challenge" / "test.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return root


# Every set but those showing few-shot demonstrations, which need a demonstration pool the crafted data does not
# have (their prompts are checked end to end in tests/run/test_pipeline_fewshot.py).
CONDITION_SETS = sorted(p.stem for p in (CONF_DIR / "conditions").glob("*.yaml") if p.stem not in ("fewshot",
                                                                                                   "fewshot_grid"))


@pytest.fixture(scope="module")
def crafted(tmp_path_factory: pytest.TempPathFactory, mlflow_template: Path) -> Path:
    root = tmp_path_factory.mktemp("crafted")
    fresh_mlflow(mlflow_template, root)
    _crafted_data(root / "data")
    return root


@pytest.mark.parametrize("conditions", CONDITION_SETS)
def test_dataset_text_reaches_the_model_literally_under_every_condition_set(crafted: Path, conditions: str) -> None:
    from prism.run.pipeline import run

    with OllamaStub() as stub:
        cfg = compose_config([*run_overrides(crafted, crafted / "data"), "model=llama3", f"model.host={stub.url}",
                              "dataset.n=3", f"conditions={conditions}", f"store.path={crafted}/{conditions}.sqlite"])
        result = run(cfg, output_dir=crafted / conditions)
    assert result.metrics["n_responses"] == len(stub.chats)
    frozen = read_frozen(crafted / conditions / "questions" / "frozen.jsonl")
    assert {q.question.split(" #")[0] for q in frozen} == {STEM}  # control characters kept through the cache
    # Steps that edit the stem on purpose (typos) are exempt for the stem; option texts are never edited.
    typo_conditions = {name for name, spec in cfg.conditions.variants.items()
                       if any(step.op in ("typos", "nested_typos") for step in spec.steps)}
    unlisted = {c.name for c in cfg.conditions.conditions if "{options}" not in c.template}
    sent = [(c["messages"][-1]["content"]) for c in stub.chats]
    logged = {json.loads(line)["prompt"] for line in (crafted / conditions / "responses/responses.jsonl").open()}
    assert set(sent) == logged  # the log holds exactly what the model was sent, control characters and all
    # A causal condition removes the correct option on purpose (its role comes from the keys: results/roles.csv).
    roles = pd.read_csv(crafted / conditions / "results" / "roles.csv")
    causal = set(roles.loc[roles["role"] == "causal", "condition"])
    answers = {q.question_id: q.options[q.labels.index(q.answer)] for q in frozen}
    for record in map(json.loads, (crafted / conditions / "responses/responses.jsonl").open()):
        qid = int(record["question_id"][1:])
        prompt = record["prompt"]
        for option in OPTIONS:
            if record["condition"] in causal and f"{option} #{qid}" == answers[record["question_id"]]:
                continue
            if record["condition"] in unlisted:  # lm-eval's ARC form (C0) shows no options, by design
                continue
            assert f"{option} #{qid}" in prompt, (record["condition"], option)
        if record["condition"] not in typo_conditions:
            assert f"{STEM} #{qid}" in prompt, record["condition"]
        for evaluated in INTERPOLATED:
            assert evaluated not in prompt, (record["condition"], evaluated)


# -- Names from config and model tags never escape the output directory -------------------------------------


@settings(max_examples=300, deadline=None)
@given(name=st.one_of(st.text(max_size=300), st.text(alphabet="0a_.-:/", min_size=100, max_size=130)))
def test_safe_filename_is_one_plain_file_name_for_any_name(name: str) -> None:
    safe = safe_filename(name)
    assert safe and safe not in (".", "..") and not safe.startswith(".")
    assert re.fullmatch(r"[A-Za-z0-9_.-]+", safe) and len(safe) <= 120
    assert "/" not in safe and "\\" not in safe and os.sep not in safe
    assert Path("/out", safe).parent == Path("/out")  # one component, inside the directory
    assert safe_filename(safe) == safe  # stable: a safe name is kept as it is


@settings(max_examples=200, deadline=None)
@given(a=st.text(max_size=40), b=st.text(max_size=40))
def test_distinct_names_get_distinct_file_names(a: str, b: str) -> None:
    if a != b and not re.fullmatch(r"[A-Za-z0-9_.-]+-[0-9a-f]{8}", a + b):
        assert safe_filename(a) != safe_filename(b)


@pytest.mark.parametrize(
    ("name", "expected"),
    [("prism", "prism"), ("option_order", "option_order"), ("llama3:8b", r"llama3_8b-[0-9a-f]{8}"),
     ("org/model", r"org_model-[0-9a-f]{8}"), ("../x", r"_x-[0-9a-f]{8}"), ("..", r"_-[0-9a-f]{8}"),
     ("", r"_-[0-9a-f]{8}"), ("C:\\evil", r"C__evil-[0-9a-f]{8}")],
)
def test_safe_filename_examples(name: str, expected: str) -> None:
    assert re.fullmatch(expected, safe_filename(name))


def test_config_and_model_names_with_path_syntax_stay_inside_the_run_directory(workdir: Path, data_dir: Path,
                                                                                mlflow_template: Path) -> None:
    from prism.run.pipeline import run

    fresh_mlflow(mlflow_template, workdir)
    frozen = freeze_question_set("arc_challenge", "test", 2, 0, data_dir, workdir / "frozen")
    replay = workdir / "replay.jsonl"
    replay.write_text("".join(json.dumps({"question_id": q.question_id, "condition": c, "response": "A"}) + "\n"
                              for q in frozen.questions for c in ("P0", "P1", "P2", "P3", "P4")))
    out = workdir / "deep" / "run" / "out"
    run(compose_config([*run_overrides(workdir, data_dir), "dataset.n=2", "model=replay", f"model.path={replay}",
                        "model.name=org/llama3:8b", "conditions.name=../../../escaped"]), output_dir=out)
    (prompts,) = (out / "prompts").iterdir()
    assert re.fullmatch(r"_\.\._\.\._escaped-[0-9a-f]{8}\.yaml", prompts.name)
    for where in (out, out.parent, out.parent.parent, workdir):
        assert not list(where.glob("escaped*")) and not list(where.glob("org*"))
    written = [p for p in workdir.rglob("*") if p.is_file()]
    assert all(p.resolve().is_relative_to(workdir.resolve()) for p in written)
