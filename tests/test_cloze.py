"""The cloze reading's pure parts: continuations, lm-eval's split, the answers, the echo sum (prism.cloze)."""

from __future__ import annotations

import pytest

from prism.cloze import ClozeError, cloze_answers, cloze_fields, continuations, echo_logprob, split_pair
from prism.types import Prompt

PROMPT = Prompt("q", "P0", "Which?\n\n1. coal\n2. wind\n\nAnswer: ", ("1", "2"), ("B", "A"), ("coal", "wind"), "1")


def test_continuations_are_the_delimiter_and_the_displayed_label_or_text_keyed_by_canonical_label() -> None:
    labels = continuations(PROMPT, "label")
    assert [(c.label, c.text, c.chars) for c in labels] == [("B", " 1", 1), ("A", " 2", 1)]
    texts = continuations(PROMPT, "text")
    assert [(c.label, c.text, c.chars) for c in texts] == [("B", " coal", 4), ("A", " wind", 4)]
    fixed = Prompt("q", "C0", "Question: Which?\nAnswer:", ("A",), ("A",), ("coal",), "1", cloze_target="text")
    assert continuations(fixed, "label")[0].text == " coal"  # the condition's own target wins
    with pytest.raises(ClozeError, match=r"label or generation\.cloze_target=text"):
        continuations(PROMPT, "word")


def test_trailing_white_space_moves_from_the_context_to_the_continuation() -> None:
    assert split_pair("Answer: ", " coal") == ("Answer:", "  coal")
    assert split_pair("Answer:", " coal") == ("Answer:", " coal")


def test_acc_takes_the_largest_sum_and_acc_norm_the_largest_per_character_ties_to_the_first_shown() -> None:
    assert cloze_answers({"A": -4.0, "B": -6.0}, {"A": 1, "B": 6}, ("A", "B")) == ("A", "B")
    assert cloze_answers({"A": -2.0, "B": -2.0}, {"A": 2, "B": 2}, ("B", "A")) == ("B", "B")
    fields = cloze_fields({"cloze_logprobs": {"A": -1.0, "B": -3.0}, "cloze_chars": {"A": 4, "B": 4}}, PROMPT, "A")
    assert fields == {"cloze_answer": "A", "cloze_norm_answer": "A", "cloze_correct": True, "cloze_norm_correct": True}
    assert "cloze_correct" not in cloze_fields({"cloze_logprobs": {"A": -1.0, "B": -3.0},
                                                "cloze_chars": {"A": 4, "B": 4}}, PROMPT, None)
    assert cloze_fields({"cloze_logprobs": {"A": -1.0}, "error": "down"}, PROMPT, "A") == {}


def test_the_echo_sum_runs_from_the_context_end_to_the_prompt_end() -> None:
    assert echo_logprob([None, -1.0, -2.0, -3.0, -0.1], [0, 3, 5, 8, 12], 5, 12) == (-5.0, 2)
    with pytest.raises(ClozeError, match="no token after the context"):
        echo_logprob([None, -1.0], [0, 3], 5, 5)
