"""prism.importer.lm_eval on the real lm-eval logs of tests/data/imports/ (scripts/make_import_fixtures.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURE_DATA

from prism.importer.lm_eval import read_lm_eval
from prism.importer.mapping import ImportLogError

GEN = FIXTURE_DATA / "imports" / "samples_arc_local_gen.jsonl"
MC = FIXTURE_DATA / "imports" / "samples_arc_local.jsonl"


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_a_generative_log_gives_each_doc_s_response_prompt_and_lm_eval_s_answer() -> None:
    got = read_lm_eval(GEN)
    source = lines(GEN)
    assert (got.task, got.kind, got.filter, got.mapping, got.version) == (
        "arc_local_gen", "generate_until", "flexible-extract", "arc_challenge", "0.4.13")
    assert len(got.cells) == len(source)
    assert got.generation["temperature"] == 0.0 and got.generation["max_tokens"] == 64
    for cell, line in zip(got.cells, source, strict=True):
        assert cell.response == line["resps"][0][0]
        assert cell.question.question_id == line["doc"]["id"]
        assert cell.question.options == tuple(line["doc"]["choices"]["text"])
        # The prompt shows the doc's own labels (ARC's 1-4 included), and lm-eval's answer is mapped through them.
        assert cell.displayed_labels == tuple(line["doc"]["choices"]["label"])
        labels = line["doc"]["choices"]["label"]
        extracted = line["filtered_resps"][0]
        assert cell.source_answer == ("ABCDE"[labels.index(extracted)] if extracted in labels else None)
        assert cell.question.answer == "ABCDE"[labels.index(line["doc"]["answerKey"])]
        # The chat messages' user turn, unchanged.
        assert json.loads(line["arguments"]["gen_args_0"]["arg_0"][0]) == [{"role": "user", "content": cell.text}]


def test_a_log_likelihood_log_keeps_each_option_s_log_likelihood_unchanged() -> None:
    got = read_lm_eval(MC)
    assert got.kind == "loglikelihood"
    for cell, line in zip(got.cells, lines(MC), strict=True):
        assert cell.response is None
        assert cell.cloze_logprobs == {"ABCDE"[i]: float(r[0][0]) for i, r in enumerate(line["resps"])}
        assert cell.cloze_chars == {"ABCDE"[i]: len(t) for i, t in enumerate(line["doc"]["choices"]["text"])}


def test_a_truncated_log_names_the_file_and_line(tmp_path: Path) -> None:
    data = GEN.read_bytes()
    cut = tmp_path / "samples_arc_local_gen_2026-01-01T00-00-00.jsonl"
    cut.write_bytes(data[: len(data) - 200])
    count = data[: len(data) - 200].count(b"\n") + 1
    with pytest.raises(ImportLogError, match=rf"{cut}:{count} is not a JSON object \(the line has no end: the file "
                                             r"looks truncated\)"):
        read_lm_eval(cut)


def test_another_format_is_refused_with_the_fix(tmp_path: Path) -> None:
    other = tmp_path / "results.jsonl"
    other.write_text(json.dumps({"results": {"arc": {"acc": 0.5}}}) + "\n", encoding="utf-8")
    with pytest.raises(ImportLogError, match=r"results\.jsonl:1 is not an lm-evaluation-harness sample line.*"
                                             "format=inspect"):
        read_lm_eval(other)


def test_docs_without_options_and_unknown_tasks_are_refused(tmp_path: Path) -> None:
    first = lines(GEN)[0]
    no_options = dict(first, doc={k: v for k, v in first["doc"].items() if k != "choices"})
    path = tmp_path / "samples_arc_challenge.jsonl"
    path.write_text(json.dumps(no_options) + "\n", encoding="utf-8")
    with pytest.raises(ImportLogError, match=rf"{path}:1: the doc has no field 'choices\.text'"):
        read_lm_eval(path)
    strange = dict(first, doc={"prompt": "p", "gold": 0})
    path = tmp_path / "samples_mytask_2026-01-01T00-00-00.123.jsonl"
    path.write_text(json.dumps(strange) + "\n", encoding="utf-8")
    with pytest.raises(ImportLogError, match="task 'mytask' has no shipped mapping"):
        read_lm_eval(path)
