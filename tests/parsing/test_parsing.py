"""Tests of prism.parsing: a table of real and handwritten responses, plus properties over any input."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prism.parsing import METHODS, PARSER_VERSION, UNKNOWN_METHODS, parse_response
from prism.types import Parsed

CASES_PATH = Path(__file__).resolve().parents[1] / "data" / "parser_cases.jsonl"
CASES: list[dict[str, Any]] = [
    json.loads(line) for line in CASES_PATH.read_text(encoding="utf-8").splitlines() if line.strip()
]
ABCD = ("A", "B", "C", "D")


def _case_id(case: dict[str, Any]) -> str:
    return f"{case['source']}:{case['method']}:{case['response'][:40]!r}"


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_table(case: dict[str, Any]) -> None:
    parsed = parse_response(case["response"], case["labels"], case["options"], finish_reason=case.get("finish_reason"))
    expected = Parsed(case["displayed"], case["recovered"], case["compliant"], case["method"])
    assert parsed == expected, case.get("note", "")


def test_table_is_well_formed() -> None:
    sources = Counter(case["source"] for case in CASES)
    assert {"handwritten", "smollm2"} <= set(sources)
    assert sources["handwritten"] >= 40
    assert sources["smollm2"] >= 40
    # Every rule is exercised by at least one handwritten case.
    assert {c["method"] for c in CASES if c["source"] == "handwritten"} == set(METHODS)
    for case in CASES:
        assert case["recovered"] == (case["displayed"] is not None)
        assert case["displayed"] is None or case["displayed"] in case["labels"]
        assert case["compliant"] == (case["method"] == "exact")


def test_parser_version_is_a_string_constant() -> None:
    assert isinstance(PARSER_VERSION, str)
    assert PARSER_VERSION


def test_labels_are_not_assumed_to_be_letters() -> None:
    # The same response means different things under different displayed labels.
    assert parse_response("B", ("1", "2", "3", "4")).method == "none"
    assert parse_response("2", ABCD).method == "none"
    assert parse_response("2", ("1", "2", "3", "4")).displayed == "2"


def test_longer_labels_are_not_read_as_their_prefixes() -> None:
    roman = ("i", "ii", "iii", "iv")
    assert parse_response("The answer is ii.", roman).displayed == "ii"
    assert parse_response("iv) photosynthesis", roman).displayed == "iv"


def test_case_variants_of_one_label_prefer_the_exact_case() -> None:
    assert parse_response("A", ("a", "A")).displayed == "A"
    assert parse_response("a", ("a", "A")).displayed == "a"


def test_labels_needing_regex_escapes() -> None:
    labels = ("*", "+", "(x)", "[1]")
    assert parse_response("+", labels).displayed == "+"
    assert parse_response("(x)", labels).displayed == "(x)"
    assert parse_response("The answer is [1].", labels).displayed == "[1]"


def test_no_usable_labels() -> None:
    assert parse_response("A", ()) == Parsed(None, False, False, "none")
    assert parse_response("A", ("", "  ")) == Parsed(None, False, False, "none")
    assert parse_response("x", (), ("x",)).method == "none"  # option text without its label


def test_options_shorter_than_labels_are_ignored_past_their_end() -> None:
    assert parse_response("mitochondria", ABCD, ("nucleus", "mitochondria")).displayed == "B"


def _check_invariants(parsed: Parsed, labels: list[str]) -> None:
    assert parsed.method in METHODS
    assert parsed.displayed is None or parsed.displayed in labels
    assert parsed.recovered == (parsed.displayed is not None)
    if parsed.compliant:
        assert parsed.recovered
        assert parsed.method == "exact"
    if parsed.method == "exact":
        assert parsed.compliant


# Text that looks like model output: labels, delimiters, cue words and wrappers mixed with any characters.
_FRAGMENTS = st.sampled_from(
    [
        "A", "B", "c", "d", "E", "a", "I", "i", "ii", "1", "3", "3.5", ".", ")", "(", ":", " - ", "**", "[",
        "]", "'", "\n", " ", "\t", "answer", "answer is ", "Answer: ", "the correct option is ", "I choose ",
        "option ", " is correct", " is the correct answer", " or ", " and ", "plant", "The ", "\u200b", "★",
        "<think>", "</think>", "<|im_end|>", "<unused9>", '"answer": "', '"', "\\boxed{", "}", "$", "答案是",
        "【答案】", "Final answer: ", "Actually, ", "\nQuestion: ", "the closest is ", "(or ", ", ", "a) ", "b) ",
        "Ｂ", "is (", "### Answer\n", "I cannot determine", "<eoa>",
    ]
)
_TEXT = st.one_of(st.text(), st.lists(st.one_of(_FRAGMENTS, st.text(max_size=3)), max_size=30).map("".join))
_LABELS = st.one_of(
    st.lists(st.text(max_size=4), max_size=6),
    st.sampled_from([list(ABCD), ["1", "2", "3", "4"], ["a", "b", "c", "d"], ["i", "ii", "iii", "iv"]]),
)


@settings(max_examples=500, deadline=None)
@given(text=_TEXT, labels=_LABELS, options=st.one_of(st.none(), st.lists(st.text(max_size=8), max_size=6)),
       finish_reason=st.sampled_from([None, "stop", "length", "content_filter"]))
def test_never_raises_and_keeps_its_contract(
    text: str, labels: list[str], options: list[str] | None, finish_reason: str | None
) -> None:
    parsed = parse_response(text, labels, options, finish_reason=finish_reason)
    _check_invariants(parsed, labels)
    if parsed.method in UNKNOWN_METHODS:
        assert not parsed.recovered
    # The output limit only ever turns a reading into UNKNOWN, never into another label.
    plain = parse_response(text, labels, options)
    assert parsed.displayed in (None, plain.displayed)


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.characters(codec="utf-8"), max_size=200), labels=_LABELS)
def test_weird_unicode_never_raises(text: str, labels: list[str]) -> None:
    _check_invariants(parse_response(text, labels), labels)


# Distinct (case-insensitively) alphanumeric labels, as a condition might display them.
_WORD_LABELS = st.lists(
    st.text(alphabet="ABCDEFGHIJabcdefghij0123456789", min_size=1, max_size=3),
    min_size=1,
    max_size=6,
    unique_by=str.casefold,
)


@settings(max_examples=200, deadline=None)
@given(labels=_WORD_LABELS, data=st.data())
def test_any_label_is_recovered_from_the_plain_forms(labels: list[str], data: st.DataObject) -> None:
    label = data.draw(st.sampled_from(labels))
    assert parse_response(label, labels) == Parsed(label, True, True, "exact")
    assert parse_response(f" {label.swapcase()}\n", labels).displayed == label
    assert parse_response(f"**{label}**", labels) == Parsed(label, True, False, "bare")
    assert parse_response(f"The answer is {label}.", labels) == Parsed(label, True, False, "statement")
    assert parse_response(f"{label}. something else", labels) == Parsed(label, True, False, "leading")


@settings(max_examples=100, deadline=None)
@given(labels=_WORD_LABELS, junk=st.text(alphabet="KLMNOPQRSTUVWXYZ", min_size=1, max_size=3))
def test_a_label_outside_the_displayed_ones_is_never_recovered(labels: list[str], junk: str) -> None:
    if junk.casefold() in {label.casefold() for label in labels}:
        return
    for response in (junk, f"({junk})", f"The answer is {junk}.", f"{junk}. something"):
        assert not parse_response(response, labels).recovered


def test_unknown_methods_are_methods() -> None:
    assert set(METHODS) > UNKNOWN_METHODS


def test_long_adversarial_input_is_fast() -> None:
    # Runs of wrappers or punctuation must not make any pattern quadratic.
    for text in ("(" * 20000, "*" * 20000 + "x", "A" + "." * 20000 + "x", "answer is " + " " * 20000):
        assert parse_response(text, ABCD, ("x", "y", "z", "w")).method in METHODS
