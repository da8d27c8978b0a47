"""remove_answer: the correct option out, "None of the other options" last, and the key moved to it, checked."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from conditions.perturbations.helpers import CLOSING, PLAIN, base, question
from prism.conditions.perturbations import PerturbationError
from prism.conditions.perturbations.build import build_keyed, build_variant
from prism.conditions.perturbations.missing import RemoveAnswer, next_label, speaks_of_other_options
from prism.conditions.perturbations.variant import Attribute, Variant
from prism.parsing import parse_response

NONE = "None of the other options"
STEP = RemoveAnswer("none_of_the_others", NONE)


def test_the_correct_option_goes_and_the_added_one_is_last_under_the_next_letter_and_is_the_key() -> None:
    q = question()  # mass, speed (B, correct), weight, volume
    after = STEP.apply(base(q), seed=0)
    assert after.options == ("mass", "weight", "volume", NONE)
    assert after.canonical == ("A", "C", "D", "E")
    assert after.labels == ("A", "B", "C", "D")  # four options still: the displayed labels and closing stay
    assert after.key == "E" and after.added == (("E", NONE),)
    assert STEP.verify(base(q), after) is None


def test_the_prompt_maps_the_added_option_back_to_e_and_scoring_gets_the_moved_key_the_parser_never() -> None:
    q = question()
    prompt, key = build_keyed(q, "missing", [STEP], PLAIN, CLOSING, 0, "1")
    assert key == "E" and "speed" not in prompt.text
    assert "A. mass\nB. weight\nC. volume\nD. None of the other options" in prompt.text
    assert prompt.canonical_for("D") == "E" and prompt.canonical_for("B") == "C"
    # The parser reads labels and option texts only; the prompt it is given carries no key.
    assert parse_response("D", prompt.displayed_labels, prompt.displayed_options).displayed == "D"
    assert not hasattr(prompt, "key")


@pytest.mark.parametrize("count", [2, 3, 5, 8])
def test_any_option_count_keeps_its_count_and_adds_the_next_letter(count: int) -> None:
    q = question(options=tuple(f"option {i}" for i in range(count)), answer="A")
    prompt, key = build_keyed(q, "missing", [STEP], PLAIN, CLOSING, 0, "1")
    assert key == next_label(q.labels) == "ABCDEFGHIJK"[count]
    assert len(prompt.displayed_labels) == count and prompt.displayed_options[-1] == NONE


def test_a_stem_that_names_its_own_answer_still_passes() -> None:
    q = question(stem="Which one, mass or speed, tells how fast a ball rolls?")
    prompt, key = build_keyed(q, "missing", [STEP], PLAIN, CLOSING, 0, "1")
    assert key == "E" and prompt.text.count("speed") == 1  # the stem's own word, not the option


@dataclass(frozen=True)
class Leaky:
    """Removes the answer but leaves its text in the instruction: the prompt check must catch it."""

    name: str = "leaky"
    changes: frozenset[Attribute] = frozenset({"answer", "instruction"})

    def apply(self, variant: Variant, seed: int) -> Variant:
        moved = STEP.apply(variant, seed)
        return replace(moved, instruction=f"Hint: {variant.options[variant.canonical.index('B')]}")

    def verify(self, before: Variant, after: Variant) -> str | None:
        return None


@dataclass(frozen=True)
class KeepsKey:
    """Removes the correct option without moving the key."""

    name: str = "keeps_key"
    changes: frozenset[Attribute] = frozenset({"answer"})

    def apply(self, variant: Variant, seed: int) -> Variant:
        return replace(STEP.apply(variant, seed), key=variant.key)

    def verify(self, before: Variant, after: Variant) -> str | None:
        return None


@dataclass(frozen=True)
class RemovesWrong:
    """Removes a wrong option (A) instead of the correct one."""

    name: str = "removes_wrong"
    changes: frozenset[Attribute] = frozenset({"answer"})

    def apply(self, variant: Variant, seed: int) -> Variant:
        return STEP.apply(replace(variant, key="A"), seed)

    def verify(self, before: Variant, after: Variant) -> str | None:
        return None


@pytest.mark.parametrize(("step", "message"), [
    (Leaky(), r"removed option B \('speed'\) appears 1 times in the prompt"),
    (KeepsKey(), "the correct option B was removed, so the key must be an added option"),
    (RemovesWrong(), r"the frozen option\(s\) \['A'\] were left out"),
])
def test_the_checks_catch_a_step_that_leaks_the_removed_text_or_moves_the_wrong_key(step, message) -> None:
    with pytest.raises(PerturbationError, match=message):
        build_keyed(question(), "missing", [step], PLAIN, CLOSING, 0, "1")


def test_a_key_moved_by_a_step_that_does_not_remove_the_correct_option_is_refused() -> None:
    @dataclass(frozen=True)
    class Sneaky:
        name: str = "sneaky"
        changes: frozenset[Attribute] = frozenset({"order"})

        def apply(self, variant: Variant, seed: int) -> Variant:
            return replace(variant, key="A")

        def verify(self, before: Variant, after: Variant) -> str | None:
            return None

    with pytest.raises(PerturbationError, match="the correct option B is still shown, but the key says 'A'"):
        build_variant(question(), "sneaky", [Sneaky()], PLAIN, CLOSING, 0)


def test_it_applies_once() -> None:
    with pytest.raises(PerturbationError, match="remove_answer applies once"):
        build_variant(question(), "twice", [STEP, STEP], PLAIN, CLOSING, 0)


@pytest.mark.parametrize("option", ["None of the above", "all of the above.", "All of these", "Neither", "both of them",
                                    "None of the other options", "none of above."])
def test_options_that_speak_of_the_others_are_recognised(option: str) -> None:
    assert speaks_of_other_options(option)


@pytest.mark.parametrize("option", ["nonexistent", "all animals", "Both heat and light", "a ball"])
def test_ordinary_options_are_not(option: str) -> None:
    assert not speaks_of_other_options(option)


def test_questions_it_cannot_ask_are_listed_at_once_with_the_fix() -> None:
    questions = [question(qid="ok"), question(options=("mass", "speed", "None of the above", "volume"), qid="m1"),
                 question(options=("All of the above", "speed", "weight", "volume"), answer="A", qid="m2")]
    with pytest.raises(PerturbationError, match=r"\['m1', 'm2'\].*dataset.exclude=\[m1,m2\]"):
        STEP.check_questions(questions, "condition set 'missing_answer', condition 'missing'")
    STEP.check_questions(questions[:1], "here")  # nothing to refuse


def test_an_item_without_a_key_is_refused() -> None:
    keyless = replace(question(qid="s1"), answer=None)
    with pytest.raises(PerturbationError, match="no answer key"):
        STEP.check_questions([keyless], "here")
