"""Reading the first reply token's distribution as option labels (prism.label_probs), without a model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from prism.label_probs import (
    FULL,
    TOP_K,
    LabelProbsError,
    check_label_sets,
    label_token_ids,
    likelihood_fields,
    log_softmax,
    reading_from_full,
    reading_from_top,
)
from prism.types import LabelReading, Prompt


def prompt(labels=("A", "B", "C", "D"), canonical=("A", "B", "C", "D")) -> Prompt:
    return Prompt("q1", "P0", "text", tuple(labels), tuple(canonical), ("w", "x", "y", "z"), "1")


def test_top_k_reading_sums_the_tokens_that_strip_to_a_label_and_renormalizes() -> None:
    top = [("A", math.log(0.4)), (" A", math.log(0.1)), ("The", math.log(0.2)), ("\nB", math.log(0.1)),
           ("C.", math.log(0.05))]  # "C." is not the label C
    reading = reading_from_top(top, ("A", "B", "C", "D"))
    assert reading.source == TOP_K
    assert reading.label_mass == pytest.approx(0.6)
    assert reading.label_probs == pytest.approx({"A": 0.5 / 0.6, "B": 0.1 / 0.6, "C": 0.0, "D": 0.0})
    assert reading.top_logprobs == tuple(top)  # as returned


def test_top_k_reading_without_any_label_has_no_label_probs() -> None:
    reading = reading_from_top([("The", -0.1), ("I", -2.0)], ("A", "B"))
    assert reading.label_probs is None and reading.label_mass == 0.0
    fields = reading.record_fields()
    assert "label_probs" not in fields and fields["label_mass"] == 0.0 and fields["label_probs_source"] == TOP_K


def test_full_reading_uses_every_token_of_each_label_and_records_the_top_of_the_distribution() -> None:
    texts = ["A", " A", "B", " B", "the", "C", "D", "\n"]
    logits = np.array([2.0, 1.0, 0.5, 0.0, 3.0, -1.0, -2.0, 0.2], dtype=np.float32)
    logprobs = log_softmax(logits)
    p = np.exp(logprobs)
    ids = label_token_ids(texts, ["A", "B", "C", "D"])
    assert ids == {"A": [0, 1], "B": [2, 3], "C": [5], "D": [6]}
    reading = reading_from_full(logprobs, ids, texts.__getitem__, top_n=3)
    mass = p[0] + p[1] + p[2] + p[3] + p[5] + p[6]
    assert reading.source == FULL
    assert reading.label_mass == pytest.approx(mass)
    assert reading.label_probs == pytest.approx({"A": (p[0] + p[1]) / mass, "B": (p[2] + p[3]) / mass,
                                                 "C": p[5] / mass, "D": p[6] / mass})
    assert [token for token, _ in reading.top_logprobs] == ["the", "A", " A"]
    assert reading.top_logprobs[0][1] == pytest.approx(math.log(p[4]))


def test_log_softmax_is_exact_in_float64_for_large_logits() -> None:
    logprobs = log_softmax(np.array([1000.0, 1000.0, 0.0], dtype=np.float32))
    assert np.exp(logprobs).sum() == pytest.approx(1.0)
    assert logprobs[0] == pytest.approx(math.log(0.5))


def test_full_source_refuses_a_label_that_is_not_one_token_of_the_vocabulary() -> None:
    ids = label_token_ids(["1", "2", "i", "ii"], ["1", "10", "i", "ii"])
    check_label_sets({"roman": ("i", "ii")}, "llamacpp", FULL, ids)  # both single tokens: fine
    with pytest.raises(LabelProbsError, match=r"'10' of condition 'numbers'.*several tokens"):
        check_label_sets({"numbers": ("1", "10")}, "llamacpp", FULL, ids)


def test_top_k_source_refuses_labels_longer_than_one_character() -> None:
    check_label_sets({"P0": ("A", "B"), "symbols": ("@", "#")}, "openai", TOP_K)
    with pytest.raises(LabelProbsError, match=r"'ii' of condition 'roman' from the openai backend.*llamacpp"):
        check_label_sets({"roman": ("i", "ii", "iii", "iv")}, "openai", TOP_K)


def test_likelihood_answer_maps_displayed_labels_to_canonical_options() -> None:
    reversed_prompt = prompt(canonical=("D", "C", "B", "A"))
    record = {"label_probs": {"A": 0.1, "B": 0.6, "C": 0.2, "D": 0.1}}
    fields = likelihood_fields(record, reversed_prompt, correct_answer="C")
    assert fields["option_probs"] == {"D": 0.1, "C": 0.6, "B": 0.2, "A": 0.1}
    assert fields["likelihood_answer"] == "C" and fields["likelihood_correct"] is True


def test_a_tie_goes_to_the_first_option_in_display_order() -> None:
    shown = prompt(labels=("1", "2", "3", "4"), canonical=("C", "A", "B", "D"))
    fields = likelihood_fields({"label_probs": {"1": 0.2, "2": 0.4, "3": 0.4, "4": 0.0}}, shown, "B")
    assert fields["likelihood_answer"] == "A" and fields["likelihood_correct"] is False


def test_no_label_probs_gives_no_fields_and_a_stranger_label_is_an_error() -> None:
    assert likelihood_fields({"response": "A"}, prompt(), "A") == {}
    with pytest.raises(ValueError, match="did not display"):
        likelihood_fields({"label_probs": {"E": 1.0}}, prompt(), "A")


def test_record_fields_leave_unknown_mass_absent_not_null() -> None:
    fields = LabelReading({"A": 1.0}, None, (), "replay").record_fields()
    assert fields == {"label_probs": {"A": 1.0}, "top_logprobs": [], "label_probs_source": "replay"}
