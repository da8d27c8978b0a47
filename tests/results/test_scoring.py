from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prism.records import RawRecord, ScoredRecord
from prism.results.scoring import FAILED_METHOD, SCORED_FIELDS, SCORER_VERSION, score_record
from prism.types import Parsed, Prompt

LABELS = ("A", "B", "C", "D")


def make_prompt(
    displayed: tuple[str, ...] = LABELS,
    canonical: tuple[str, ...] = LABELS,
    question_id: str = "q1",
    condition: str = "P0",
) -> Prompt:
    return Prompt(
        question_id=question_id,
        condition=condition,
        text="Which is a fruit?\nA. apple\nB. rock\nC. cloud\nD. iron\nReturn only the letter.",
        displayed_labels=displayed,
        canonical_labels=canonical,
        displayed_options=("apple", "rock", "cloud", "iron"),
        template_version="1",
    )


def make_raw(response: str | None = "B", error: str | None = None, **extra: Any) -> RawRecord:
    raw: dict[str, Any] = {
        "question_id": "q1",
        "dataset": "arc_challenge",
        "split": "test",
        "condition": "P0",
        "repetition": 0,
        "prompt": "Which is a fruit? ...",
        "prompt_sha256": "0" * 64,
        "response": response,
        "model": "smollm2",
        "model_digest": "f" * 64,
        "backend": "llamacpp",
        "generation": {"temperature": 0.0, "max_tokens": 16, "seed": 0, "top_p": None, "top_k": None},
        "backend_options": {},
        "latency_s": 0.1,
        "prompt_tokens": 40,
        "completion_tokens": 1,
        "timestamp": "2024-01-01T00:00:00+00:00",
        "template_version": "1",
        "protocol_version": "1",
        "cached": False,
        "error": error,
    }
    raw.update(extra)
    return RawRecord.from_json(raw)


def score(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """The scored record's JSON, as ``results/scored.jsonl`` holds it."""
    return score_record(*args, **kwargs).to_json()


def parsed(label: str | None, compliant: bool = True, method: str = "exact") -> Parsed:
    return Parsed(displayed=label, recovered=label is not None, compliant=compliant, method=method)


def test_correct_answer_is_scored_correct() -> None:
    scored = score(make_raw("B"), make_prompt(), parsed("B"), "B", parser_version="7")
    assert scored["displayed"] == "B"
    assert scored["answer"] == "B"
    assert scored["recovered"] is True
    assert scored["compliant"] is True
    assert scored["method"] == "exact"
    assert scored["correct_answer"] == "B"
    assert scored["correct"] is True
    assert scored["parser_version"] == "7"
    assert scored["scorer_version"] == SCORER_VERSION == "1"


def test_wrong_answer_is_scored_incorrect() -> None:
    scored = score(make_raw("A. apple"), make_prompt(), parsed("A", False, "leading"), "D", "1")
    assert scored["answer"] == "A"
    assert scored["correct"] is False
    assert scored["compliant"] is False
    assert scored["method"] == "leading"


def test_unknown_is_observed_but_never_correct() -> None:
    scored = score(make_raw("I am not sure"), make_prompt(), parsed(None, False, "none"), "A", "1")
    assert scored["displayed"] is None
    assert scored["answer"] is None
    assert scored["recovered"] is False
    assert scored["correct"] is False
    assert scored["method"] == "none"
    assert scored["error"] is None


def test_empty_completion_is_scored_like_any_observed_response() -> None:
    scored = score(make_raw(""), make_prompt(), parsed(None, False, "empty"), "A", "1")
    assert scored["method"] == "empty"
    assert scored["correct"] is False


def test_displayed_label_maps_to_the_canonical_option() -> None:
    # The options were reordered: displayed A shows canonical C, displayed B shows canonical A, ...
    prompt = make_prompt(canonical=("C", "A", "D", "B"))
    scored = score(make_raw("A"), prompt, parsed("A"), "C", "1")
    assert scored["displayed"] == "A"
    assert scored["answer"] == "C"
    assert scored["correct"] is True
    assert score(make_raw("C"), prompt, parsed("C"), "C", "1")["correct"] is False


def test_relabelled_options_map_back() -> None:
    prompt = make_prompt(displayed=("1", "2", "3", "4"))
    scored = score(make_raw("2"), prompt, parsed("2"), "B", "1")
    assert (scored["displayed"], scored["answer"], scored["correct"]) == ("2", "B", True)


def test_failed_request_is_not_an_observed_answer() -> None:
    raw = make_raw(None, error="timeout after 60 s")
    scored = score(raw, make_prompt(), None, "A", "1")
    assert scored["displayed"] is None
    assert scored["answer"] is None
    assert scored["recovered"] is False
    assert scored["compliant"] is False
    assert scored["correct"] is False
    assert scored["method"] == FAILED_METHOD == "failed"
    assert scored["correct_answer"] == "A"
    assert scored["error"] == "timeout after 60 s"
    assert scored["response"] is None


def test_scored_record_keeps_raw_keys_but_the_prompt_and_adds_the_scored_fields() -> None:
    raw = make_raw("B").to_json()
    scored = score(make_raw("B"), make_prompt(), parsed("B"), "B", "1")
    # The likelihood and cloze readings' fields are optional: absent, not null, when the run did not ask for them.
    optional = {f.name for f in dataclasses.fields(ScoredRecord) if f.metadata}
    assert optional == {"option_probs", "likelihood_answer", "likelihood_correct", "cloze_answer",
                        "cloze_norm_answer", "cloze_correct", "cloze_norm_correct"}
    assert set(scored) == (set(raw) - {"prompt"}) | (set(SCORED_FIELDS) - optional)
    for key, value in raw.items():
        assert key == "prompt" or scored[key] == value


def test_records_are_frozen_and_their_json_is_a_copy() -> None:
    raw = make_raw("B")
    scored = score_record(raw, make_prompt(), parsed("B"), "B", "1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        scored.answer = "C"  # type: ignore[misc]
    scored.to_json()["generation"]["temperature"] = 1.0
    assert raw.generation["temperature"] == 0.0 and scored.raw is raw


def test_rescoring_a_scored_record_replaces_the_scored_fields() -> None:
    first = score_record(make_raw("B"), make_prompt(), parsed("B"), "B", "1")
    again = score(first.raw, make_prompt(), parsed(None, False, "none"), "B", "2")
    assert (again["answer"], again["correct"], again["parser_version"]) == (None, False, "2")


@pytest.mark.parametrize(
    ("raw", "parse", "match"),
    [
        (make_raw(None, error="boom"), parsed("A"), "nothing to parse"),
        (make_raw("A"), None, "parse it"),
        (make_raw("A", error="boom"), parsed("A"), "either an error"),
        (make_raw(None), None, "either an error"),
        (make_raw("A", question_id="q2"), parsed("A"), "question_id"),
        (make_raw("A", condition="P3"), parsed("A"), "condition"),
        (make_raw("E"), parsed("E"), "displayed labels"),
        (make_raw("A"), Parsed(displayed=None, recovered=True, compliant=False, method="x"), "inconsistent"),
        (make_raw("A"), Parsed(displayed="A", recovered=False, compliant=False, method="x"), "inconsistent"),
    ],
)
def test_contradictory_inputs_are_refused(raw: RawRecord, parse: Parsed | None, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        score_record(raw, make_prompt(), parse, "A", "1")


def test_a_key_outside_the_options_is_refused() -> None:
    with pytest.raises(ValueError, match="correct_answer"):
        score_record(make_raw("A"), make_prompt(), parsed("A"), "E", "1")


@given(
    order=st.permutations(LABELS),
    chosen=st.one_of(st.none(), st.sampled_from(LABELS)),
    key=st.sampled_from(LABELS),
)
def test_correct_exactly_when_the_chosen_option_is_the_key(
    order: list[str], chosen: str | None, key: str
) -> None:
    prompt = make_prompt(canonical=tuple(order))
    scored = score(make_raw(chosen or "no idea"), prompt, parsed(chosen), key, "1")
    if chosen is None:
        assert scored["answer"] is None
        assert scored["correct"] is False
    else:
        assert scored["answer"] == order[LABELS.index(chosen)]
        assert scored["correct"] is (scored["answer"] == key)
    assert scored["correct_answer"] == key
