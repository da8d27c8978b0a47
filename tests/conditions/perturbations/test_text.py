from __future__ import annotations

from dataclasses import replace

from conditions.perturbations.helpers import base
from prism.conditions.perturbations.text import Instruct, Synonyms

DIRECT = "Answer the following question by selecting the correct option."
TABLE = {"Answer": ["Respond to"], "selecting": ["choosing", "picking"], "correct": ["right"]}


def instructed():
    return replace(base(), instruction=DIRECT)


def test_instruct_sets_one_paragraph_and_nothing_else() -> None:
    after = Instruct("direct", DIRECT).apply(base(), 0)
    assert after.instruction == DIRECT and base().changed_fields(after) == {"instruction"}
    assert Instruct("direct", DIRECT).verify(base(), after) is None
    two = Instruct("two", "One.\n\nTwo.")
    assert "one non-empty paragraph" in two.verify(base(), two.apply(base(), 0))


def test_synonyms_all_swaps_every_listed_word() -> None:
    step = Synonyms.from_mapping(TABLE, None)
    for seed in range(20):
        text = step.apply(instructed(), seed).instruction
        assert text.startswith("Respond to the following question by ")
        assert text.endswith(" the right option.")
        assert ("choosing" in text) != ("picking" in text)


def test_synonyms_one_swaps_exactly_one_word_and_is_seeded() -> None:
    step = Synonyms.from_mapping(TABLE, 1)
    outputs = {step.apply(instructed(), seed).instruction for seed in range(50)}
    assert outputs == {
        "Respond to the following question by selecting the correct option.",
        "Answer the following question by choosing the correct option.",
        "Answer the following question by picking the correct option.",
        "Answer the following question by selecting the right option.",
    }
    assert step.apply(instructed(), 7) == step.apply(instructed(), 7)


def test_synonyms_verify_refuses_a_no_op_and_unlisted_words() -> None:
    step = Synonyms.from_mapping(TABLE, 1)
    untouched = replace(base(), instruction="Pick one.")
    assert "no listed word" in step.verify(untouched, step.apply(untouched, 0))
    sneaky = replace(instructed(), instruction=DIRECT.replace("correct", "wrong"))
    assert "not listed synonyms" in step.verify(instructed(), sneaky)
