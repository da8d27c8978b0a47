"""Deliberately broken steps: every one is stopped by a check that names the question and the step."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace

import pytest

from conditions.perturbations.helpers import CLOSING, PLAIN, question
from prism.conditions.perturbations.build import build_prompt, build_variant
from prism.conditions.perturbations.labels import Relabel
from prism.conditions.perturbations.order import Reverse, Shuffle
from prism.conditions.perturbations.spelling import Typos
from prism.conditions.perturbations.variant import Attribute, PerturbationError, Variant

_counter = itertools.count()


@dataclass(frozen=True)
class Broken:
    """A step whose ``apply`` is whatever the test says, declaring ``changes``."""

    name: str
    changes: frozenset[Attribute]
    edit: Callable[[Variant], Variant]

    def apply(self, variant: Variant, seed: int) -> Variant:
        return self.edit(variant)

    def verify(self, before: Variant, after: Variant) -> str | None:
        return None


def lossy_shuffle(v: Variant) -> Variant:
    # Reverses, but the last option is replaced by a copy of the first: one option is lost.
    order = [3, 2, 1, 3]
    return replace(v, options=tuple(v.options[i] for i in order), canonical=tuple(v.canonical[i] for i in (3, 2, 1, 0)))


def key_pointing_relabel(v: Variant) -> Variant:
    # Numbers instead of letters, but the canonical map is shifted by one: the key points at the wrong option.
    return replace(v, labels=("1", "2", "3", "4"), closing="Return only the number of the correct option.",
                   canonical=v.canonical[1:] + v.canonical[:1])


def option_typo(v: Variant) -> Variant:
    return replace(v, stem=v.stem.replace("quantity", "quantiy"), options=(v.options[0], "sped", *v.options[2:]))


def stem_number_typo(v: Variant) -> Variant:
    return replace(v, stem=v.stem.replace("20", "2O"))


def reorder_declared_as_labels(v: Variant) -> Variant:
    return Reverse().apply(v, 0)


def relabel_without_closing(v: Variant) -> Variant:
    return replace(v, labels=("1", "2", "3", "4"))


def labels_that_repeat_in_another_case(v: Variant) -> Variant:
    return replace(v, labels=("a", "A", "b", "B"))


def nondeterministic(v: Variant) -> Variant:
    # Depends on hidden state instead of the seed.
    return Shuffle().apply(v, next(_counter))


class UnitTypos(Typos):
    """A typo step that also misspells the unit after a number."""

    def apply(self, variant: Variant, seed: int) -> Variant:
        return replace(variant, stem=variant.stem.replace("20 meters", "20 metres"))


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (Broken("lossy_shuffle", frozenset({"order"}), lossy_shuffle), "same multiset"),
        (Broken("bad_relabel", frozenset({"labels", "order"}), key_pointing_relabel),
         "the key B maps to position 2, which shows 'weight' instead of the correct option 'speed'"),
        (Broken("option_typo", frozenset({"stem"}), option_typo), "same multiset"),
        (Broken("number_typo", frozenset({"stem"}), stem_number_typo), "numbers in the stem changed"),
        (Broken("sneaky_reverse", frozenset({"labels"}), reorder_declared_as_labels),
         "changed ['canonical', 'options'], outside its declared attributes ['labels']"),
        (Broken("lazy_relabel", frozenset({"labels"}), relabel_without_closing), "does not name these labels"),
        (Broken("case_relabel", frozenset({"labels"}), labels_that_repeat_in_another_case), "repeat (ignoring case)"),
        (Broken("moody_shuffle", frozenset({"order"}), nondeterministic), "same seed, same variant"),
        (UnitTypos(1, frozenset()), "may not be edited"),
        (Relabel("three", ("1", "2", "3"), CLOSING), "4 options but 3 labels"),
    ],
)
def test_broken_step_stops_with_question_condition_and_step_named(step, message: str) -> None:
    with pytest.raises(PerturbationError) as caught:
        build_variant(question(qid="Mercury_7175875"), "broken", [Reverse(), step], PLAIN, CLOSING, seed=0)
    text = str(caught.value)
    assert "question 'Mercury_7175875'" in text and "condition 'broken'" in text
    assert f"step 2 ({step.name})" in text
    assert message in text


def test_the_same_steps_without_the_bug_pass() -> None:
    prompt = build_prompt(question(), "fine", [Reverse(), Relabel("numbers", ("1", "2", "3", "4"), CLOSING)],
                          PLAIN, CLOSING, 0, "1")
    assert prompt.text.endswith("Return only the number of the correct option.")
    assert prompt.canonical_for("3") == "B"  # reversed: position 3 shows speed, canonical B


def test_a_question_that_cannot_take_the_labels_is_named() -> None:
    five = question(options=("a1", "b1", "c1", "d1", "e1"), qid="five")
    with pytest.raises(PerturbationError, match=r"question 'five', condition 'numbers', step 1 \(relabel\(numbers\)\)"):
        build_variant(five, "numbers", [Relabel("numbers", ("1", "2", "3", "4"), CLOSING)], PLAIN, CLOSING, 0)


def test_a_format_that_drops_the_closing_is_caught_before_it_renders() -> None:
    from prism.conditions.perturbations.ops import format_from
    from prism.conditions.perturbations.variant import SpecError
    from prism.config import FormatSpec

    with pytest.raises(SpecError, match=r"\{closing\} must appear exactly once"):
        format_from(FormatSpec(layout="{question}\n{options}"), "format 'bad'")
