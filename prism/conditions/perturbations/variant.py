"""A variant: one frozen question as it will be shown, field by field, and its rendering to a prompt.

A :class:`Variant` holds everything a perturbation step may change, split into the attributes a step
declares (:data:`ATTRIBUTE_FIELDS`): the instruction, the stem's spelling, the option order, the label
set (with the output requirement that names it) and the surface format. Rendering is literal: dataset
text is substituted as-is and never scanned for fields, exactly as in ``prism.conditions``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from prism.errors import PrismError
from prism.types import Prompt, Question, Turn

Attribute = Literal["instruction", "stem", "order", "labels", "format", "answer", "turn", "shots", "shot_turn"]

# Which Variant fields each attribute covers. A step may change only the fields of the attributes it
# declares; ``question_id`` belongs to none, so no step may ever change it.
ATTRIBUTE_FIELDS: dict[Attribute, tuple[str, ...]] = {
    "instruction": ("instruction",),
    "stem": ("stem",),
    "order": ("options", "canonical"),
    "labels": ("labels", "closing"),
    "format": ("format",),
    # The option set itself and the key that follows it: a step that removes the correct option and adds
    # another (prism.conditions.perturbations.missing) changes which option is correct, so it declares this one.
    "answer": ("options", "canonical", "key", "added"),
    # Which turn an instruction sits in (prism.conditions.perturbations.turns): a system turn of its own, and
    # whether the instruction paragraph is in the user turn or the system turn. The instruction's words are not
    # part of it.
    "turn": ("system", "instruction_turn"),
    # Which few-shot demonstrations are shown before the question, and in which order
    # (prism.conditions.perturbations.shots); never the pool they come from, which no step may change.
    "shots": ("demonstrations",),
    # Whether the demonstrations sit inline in the user turn or as earlier user/assistant turns.
    "shot_turn": ("shot_turns",),
}

#: What separates a demonstration from its answer (the answer as the closing asks for it: its label).
ANSWER_SEPARATOR = "\n"

#: Where an instruction paragraph can sit.
INSTRUCTION_TURNS = ("user", "system")

LAYOUT_FIELDS = ("question", "options", "closing")
OPTION_FIELDS = ("label", "text")


class PerturbationError(PrismError, ValueError):
    """A variant failed its check; the run stops before any model sees it."""


class SpecError(PrismError, ValueError):
    """A perturbation step or format cannot be built as configured."""


def fill(template: str, values: Mapping[str, str]) -> str:
    """Substitute ``{name}`` fields of ``values`` literally; substituted text is never rescanned."""
    pattern = re.compile(r"\{(" + "|".join(re.escape(name) for name in values) + r")\}")
    return pattern.sub(lambda match: values[match.group(1)], template)


@dataclass(frozen=True)
class Format:
    """The surface format of a prompt: where the fields go and how an option line looks.

    Attributes:
        layout: Body text with ``{question}``, ``{options}`` and ``{closing}`` exactly once each, ending
            with ``{closing}``.
        option: One option line with ``{label}`` and ``{text}`` exactly once each.
        option_separator: What joins the option lines.
        paragraph: What separates an instruction, when there is one, from the body.
    """

    layout: str
    option: str = "{label}. {text}"
    option_separator: str = "\n"
    paragraph: str = "\n\n"

    def problems(self) -> list[str]:
        """Say what makes this format unusable (empty when it is fine)."""
        found = []
        for template, names in ((self.layout, LAYOUT_FIELDS), (self.option, OPTION_FIELDS)):
            for name in names:
                count = template.count("{" + name + "}")
                if count != 1:
                    found.append(f"{{{name}}} must appear exactly once in {template!r} (found {count})")
        if not self.layout.rstrip().endswith("{closing}"):
            found.append(f"the layout {self.layout!r} must end with {{closing}}")
        return found


@dataclass(frozen=True)
class Variant:
    """One question as it will be displayed.

    Attributes:
        question_id: Id of the frozen question (no step may change it).
        instruction: Instruction paragraph before the body; empty for none.
        stem: The question stem as displayed.
        options: Option texts in display order.
        canonical: For each display position, the canonical label of the option a step claims is there.
        labels: Labels as displayed, one per position.
        closing: The output requirement the prompt ends with, naming the kind of label.
        format: The surface format.
        key: The canonical label of the correct option as this variant shows it (the question's own key
            unless a step of attribute ``answer`` moved it), or None for an item without a key. Steps read it
            to build the prompt; it never reaches the prompt or the parser, only scoring.
        added: (canonical label, text) of every option a step added; their labels come after the question's.
        system: A system prompt of its own (``You are a helpful assistant.``); empty for none.
        instruction_turn: The turn the instruction paragraph sits in: ``user`` (before the question, as in P1)
            or ``system`` (the system turn, after ``system`` when there is one).
        pool: The question's frozen draw of demonstrations (:attr:`prism.types.Question.demonstrations`), the
            only items a step may show; no step may change it.
        demonstrations: The demonstrations shown before the question, in order (each one of ``pool``).
        shot_turns: The demonstrations sit in earlier user/assistant turns (the question alone in the last
            user turn), not inline in the one user turn.
    """

    question_id: str
    instruction: str
    stem: str
    options: tuple[str, ...]
    canonical: tuple[str, ...]
    labels: tuple[str, ...]
    closing: str
    format: Format
    key: str | None = None
    added: tuple[tuple[str, str], ...] = ()
    system: str = ""
    instruction_turn: str = "user"
    pool: tuple[Question, ...] = ()
    demonstrations: tuple[Question, ...] = ()
    shot_turns: bool = False

    def changed_fields(self, other: Variant) -> set[str]:
        """Names of the fields whose values differ between this variant and ``other``."""
        names = ("question_id", "instruction", "stem", "options", "canonical", "labels", "closing", "format", "key",
                 "added", "system", "instruction_turn", "pool", "demonstrations", "shot_turns")
        return {name for name in names if getattr(self, name) != getattr(other, name)}


def base_variant(question: Question, layout: Format, closing: str) -> Variant:
    """The unperturbed rendering: frozen order, canonical labels, no instruction."""
    return Variant(
        question_id=question.question_id,
        instruction="",
        stem=question.question.strip(),
        options=question.options,
        canonical=question.labels,
        labels=question.labels,
        closing=closing,
        format=layout,
        key=question.answer,
        pool=question.demonstrations,
    )


def option_lines(variant: Variant) -> list[str]:
    """The option lines in display order, exactly as rendered."""
    return [
        fill(variant.format.option, {"label": label, "text": text})
        for label, text in zip(variant.labels, variant.options, strict=True)
    ]


def system_text(variant: Variant) -> str:
    """The system turn's text: the system prompt, then the instruction when it sits there; empty for no turn."""
    moved = variant.instruction if variant.instruction_turn == "system" else ""
    return variant.format.paragraph.join(part for part in (variant.system, moved) if part)


def body_text(variant: Variant) -> str:
    """The question itself: the filled layout (stem, option lines, closing), without instruction or demonstrations."""
    return fill(
        variant.format.layout,
        {
            "question": variant.stem,
            "options": variant.format.option_separator.join(option_lines(variant)),
            "closing": variant.closing,
        },
    )


def demonstration_labels(variant: Variant, demonstration: Question) -> tuple[str, ...]:
    """The labels a demonstration's options are shown under: the question's own, position by position."""
    return variant.labels[: len(demonstration.options)]


def demonstration_text(variant: Variant, demonstration: Question) -> str:
    """One demonstration as the question is shown: the same layout, option format, labels and closing."""
    lines = [fill(variant.format.option, {"label": label, "text": text})
             for label, text in zip(demonstration_labels(variant, demonstration), demonstration.options, strict=True)]
    return fill(variant.format.layout, {"question": demonstration.question.strip(),
                                        "options": variant.format.option_separator.join(lines),
                                        "closing": variant.closing})


def demonstration_answer(variant: Variant, demonstration: Question) -> str:
    """A demonstration's answer as the closing asks for it: the label its key is shown under (``B``)."""
    assert demonstration.answer is not None  # the pool refuses items without a key
    return demonstration_labels(variant, demonstration)[demonstration.labels.index(demonstration.answer)]


def user_turns(variant: Variant) -> tuple[tuple[Turn, ...], str]:
    """The conversation after the system turn: the demonstrations' turns (if they sit in turns), and the last user turn.

    Inline, the one user turn is the instruction paragraph (if it sits there), each demonstration followed by its
    answer, and the question, a ``paragraph`` apart. In turns, each demonstration is a user turn (the first one
    after the instruction, when it sits in the user turn) answered by an assistant turn holding its answer, and
    the last user turn is the question alone.
    """
    paragraph = variant.format.paragraph
    instruction = variant.instruction if variant.instruction_turn == "user" else ""
    shots = [(demonstration_text(variant, d), demonstration_answer(variant, d)) for d in variant.demonstrations]
    if variant.shot_turns and shots:
        earlier: list[Turn] = []
        for index, (text, answer) in enumerate(shots):
            opening = f"{instruction}{paragraph}{text}" if instruction and index == 0 else text
            earlier += [Turn("user", opening), Turn("assistant", answer)]
        return tuple(earlier), body_text(variant)
    parts = [instruction] if instruction else []
    parts += [f"{text}{ANSWER_SEPARATOR}{answer}" for text, answer in shots]
    return (), paragraph.join([*parts, body_text(variant)])


def render_text(variant: Variant) -> str:
    """The last user turn's text: the instruction (if it sits there), inline demonstrations, the filled layout."""
    return user_turns(variant)[1]


def to_prompt(variant: Variant, condition: str, template_version: str) -> Prompt:
    """The prompt a model sees for ``variant`` (a system turn when it has one), with the displayed -> canonical map."""
    system = system_text(variant)
    earlier, text = user_turns(variant)
    return Prompt(
        question_id=variant.question_id,
        condition=condition,
        text=text,
        displayed_labels=variant.labels,
        canonical_labels=variant.canonical,
        displayed_options=variant.options,
        template_version=template_version,
        earlier_turns=((Turn("system", system),) if system else ()) + earlier,
    )
