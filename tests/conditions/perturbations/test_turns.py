"""prism.conditions.perturbations.turns and conditions=turns: the turn an instruction sits in, and nothing else,
changes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from conftest import CONF_DIR, compose_plain

from conditions.perturbations.helpers import base, question
from prism.conditions import condition_set_from_config, render, render_all
from prism.conditions.perturbations import PerturbationError
from prism.conditions.perturbations.build import build_prompt
from prism.conditions.perturbations.checks import check_prompt
from prism.conditions.perturbations.text import Instruct
from prism.conditions.perturbations.turns import InstructionToSystem, SystemPrompt
from prism.conditions.perturbations.variant import system_text, to_prompt
from prism.questions import freeze_question_set
from prism.types import Turn

DIRECT = "Answer the following question by selecting the correct option."
GENERIC = "You are a helpful assistant."
ROLE = "You are a knowledgeable subject-matter expert."
CLOSING = "Return only the {kind} of the correct option."


def instructed():
    return Instruct("direct", DIRECT).apply(base(), 0)


def test_a_system_prompt_step_adds_a_system_turn_and_changes_only_the_turn() -> None:
    step = SystemPrompt("generic", GENERIC)
    after = step.apply(instructed(), 0)
    assert instructed().changed_fields(after) == {"system"} and step.changes == {"turn"}
    assert step.verify(instructed(), after) is None
    prompt = to_prompt(after, "system_generic", "1")
    assert prompt.earlier_turns == (Turn("system", GENERIC),)
    assert prompt.text == to_prompt(instructed(), "P1", "1").text  # the user turn is P1's, word for word
    assert "already has the system prompt" in step.verify(after, step.apply(after, 0))
    assert "one non-empty paragraph" in SystemPrompt("two", "One.\n\nTwo.").verify(base(), replace(base(),
                                                                                                  system="One.\n\nTwo."))


def test_moving_the_instruction_puts_it_alone_in_the_system_turn_word_for_word() -> None:
    step = InstructionToSystem()
    after = step.apply(instructed(), 0)
    assert instructed().changed_fields(after) == {"instruction_turn"} and step.verify(instructed(), after) is None
    prompt = to_prompt(after, "system_instruction", "1")
    assert prompt.earlier_turns == (Turn("system", DIRECT),)
    assert prompt.text == to_prompt(base(), "P0", "1").text  # the rest: P0's rendering
    assert check_prompt(after, prompt) is None
    assert "no instruction to move" in step.verify(base(), step.apply(base(), 0))
    assert "already sits in the system turn" in step.verify(after, after)
    # A system prompt and the moved instruction share the one system turn, the system prompt first.
    both = SystemPrompt("generic", GENERIC).apply(after, 0)
    assert system_text(both) == f"{GENERIC}\n\n{DIRECT}"


def test_a_rendering_whose_turns_are_not_the_variants_is_caught() -> None:
    after = InstructionToSystem().apply(instructed(), 0)
    honest = to_prompt(after, "system_instruction", "1")
    assert "not the variant's" in check_prompt(after, replace(honest, earlier_turns=()))
    leaked = replace(honest, text=f"{DIRECT}\n\n{honest.text}")
    assert "must sit in the system turn only" in check_prompt(after, leaked)


def test_a_step_that_rewrites_the_instruction_while_moving_it_fails_its_check() -> None:
    class Rewording(InstructionToSystem):
        def apply(self, variant, seed):  # type: ignore[no-untyped-def]
            return replace(variant, instruction_turn="system", instruction="Pick one.")

    with pytest.raises(PerturbationError, match=r"changed \['instruction'\], outside its declared attributes"):
        build_prompt(question(), "system_instruction", [Instruct("direct", DIRECT), Rewording()],
                     base().format, CLOSING, 0, "1")


@pytest.fixture(scope="module")
def questions(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list:
    return list(freeze_question_set("arc_challenge", "test", 20, 0, data_dir, tmp_path_factory.mktemp("f")).questions)


def test_conditions_turns_is_p1_and_three_ways_of_placing_an_instruction_in_turns(questions: list) -> None:
    cs = condition_set_from_config(compose_plain(["conditions=turns"])["conditions"])
    assert cs.names == ["P1", "system_instruction", "system_generic", "system_role"] and cs.baseline == "P1"
    [axis] = cs.axes
    assert (axis.name, axis.scale, axis.values) == ("turns", "nominal", tuple(cs.names))
    assert axis.attributes == {"instruction", "turn"}
    spelling = condition_set_from_config(compose_plain(["conditions=spelling"])["conditions"])
    for q in questions:
        p1, moved, generic, role = (render(q, c, cs) for c in cs.conditions)
        assert p1.text == render(q, next(c for c in spelling.conditions if c.name == "P1"), spelling).text
        assert p1.earlier_turns == ()
        assert moved.earlier_turns == (Turn("system", DIRECT),) and DIRECT not in moved.text
        assert moved.text == p1.text.removeprefix(f"{DIRECT}\n\n")
        assert generic.earlier_turns == (Turn("system", GENERIC),) and generic.text == p1.text
        assert role.earlier_turns == (Turn("system", ROLE),) and role.text == p1.text
        for prompt in (moved, generic, role):  # question, options, labels and key unchanged
            assert (prompt.displayed_labels, prompt.canonical_labels, prompt.displayed_options) == (
                p1.displayed_labels, p1.canonical_labels, p1.displayed_options)
    assert len(render_all(questions, cs)) == 4 * len(questions)


def test_the_turns_set_repeats_p0s_closing_and_layout_exactly() -> None:
    shared = yaml.safe_load((CONF_DIR / "conditions" / "shared" / "p0.yaml").read_text())
    turns = compose_plain(["conditions=turns"])["conditions"]
    assert turns["closing"] == shared["closing"] and turns["base_format"] == shared["base_format"]
    assert turns["subjective"]["closing"] == shared["subjective"]["closing"]


def test_a_subjective_run_asks_the_turns_in_their_subjective_wording(questions: list) -> None:
    cs = condition_set_from_config(compose_plain(["conditions=turns"])["conditions"], subjective=True)
    role = render(questions[0], next(c for c in cs.conditions if c.name == "system_role"), cs)
    assert role.earlier_turns == (Turn("system", "You are a thoughtful survey respondent."),)
    assert "the option you choose" in role.text and "correct" not in role.text


def test_turns_composes_with_labels_in_a_grid_and_each_cell_is_both_of_its_values(questions: list) -> None:
    cfg = compose_plain(["conditions=grid", "conditions.axes=[turns,labels]"])["conditions"]
    cs = condition_set_from_config(cfg)
    assert cs.baseline == "P0" and len(cs.conditions) == 4 * 5
    turns_axis = next(a for a in cs.axes if a.name == "turns")
    assert turns_axis.values == ("P0", "system_instruction", "system_generic", "system_role")
    sweep = condition_set_from_config(compose_plain(["conditions=turns"])["conditions"])
    alone = {c.name: c for c in sweep.conditions}
    for q in questions[:5]:
        cell = render(q, next(c for c in cs.conditions if c.name == "turns.system_generic__labels.numbers"), cs)
        generic = render(q, alone["system_generic"], sweep)
        assert cell.earlier_turns == generic.earlier_turns and cell.displayed_labels[:2] == ("1", "2")
        assert cell.canonical_labels == generic.canonical_labels
        moved = render(q, next(c for c in cs.conditions if c.name == "turns.system_instruction__labels.roman"), cs)
        assert moved.earlier_turns == (Turn("system", DIRECT),) and DIRECT not in moved.text
    with pytest.raises(Exception, match=r"both change \['instruction'\]"):
        condition_set_from_config(compose_plain(["conditions=grid", "conditions.axes=[turns,spelling]"])["conditions"])
