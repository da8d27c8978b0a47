"""Rendering: a frozen question under one condition of a set, as the prompt a model is asked.

Template conditions fill ``{question}``, ``{options}`` and ``{closing}``; step conditions build a checked
variant of the unperturbed rendering; grid cells are composed and checked end to end
(:func:`prism.conditions.grid.render_cell_keyed`). The key a causal step moves goes to scoring only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prism.conditions import grid
from prism.conditions.condition import _FIELD_PATTERN, Condition, ConditionSet
from prism.conditions.perturbations.build import build_keyed
from prism.conditions.perturbations.labels import closing_for
from prism.types import Prompt, Question

#: lm-eval's MMLU description line (its default template), filled where the dataset has a subject (its group);
#: the subject's underscores are written as spaces, as lm-eval writes them.
SUBJECT_LINE = "The following are multiple choice questions (with answers) about {subject}.\n\n"


def subject_line(question: Question) -> str:
    """The ``{subject_line}`` field: lm-eval's MMLU description for a question with a group, else empty."""
    return SUBJECT_LINE.format(subject=question.group.replace("_", " ")) if question.group else ""


def format_options(labels: Sequence[str], options: Sequence[str]) -> str:
    """Render options as ``<label>. <text>`` lines, the one layout every PRISM condition uses."""
    return "\n".join(f"{label}. {text}" for label, text in zip(labels, options, strict=True))


def fill(template: str, values: Mapping[str, str]) -> str:
    """Substitute the known fields literally; the values are never themselves scanned for fields."""
    return _FIELD_PATTERN.sub(lambda match: values[match.group(1)], template)


def render(question: Question, condition: Condition, condition_set: ConditionSet) -> Prompt:
    """Render one question under one condition (:func:`render_keyed` without the key)."""
    return render_keyed(question, condition, condition_set)[0]


def render_keyed(question: Question, condition: Condition, condition_set: ConditionSet) -> tuple[Prompt, str | None]:
    """Render one question under one condition, with the canonical label of its correct option.

    The key is the question's own unless a step of attribute ``answer`` moved it (a causal condition,
    :mod:`prism.conditions.perturbations.missing`); only scoring reads it: the prompt handed to a backend, and to the
    parser, does not carry it.

    A template condition shows the options in frozen order with canonical labels. A step condition applies
    its steps to the unperturbed rendering, checking every step and the final text.

    Args:
        question: The frozen question.
        condition: The condition to render under.
        condition_set: The set the condition belongs to (for the closing line, version, seed and base format).

    Returns:
        The prompt, with the labels and option texts as displayed and their canonical labels, and the key.

    Raises:
        PerturbationError: If a step's check fails (naming the question, the condition and the step).
    """
    if condition.parts:
        return grid.render_cell_keyed(question, condition, condition_set)
    if condition.steps is not None:
        assert condition_set.base_format is not None  # validate() refuses step conditions without one
        return build_keyed(question, condition.name, condition.steps, condition_set.base_format,
                           condition_set.closing, condition_set.seed, condition_set.template_version,
                           condition.keys)
    text = fill(
        condition.template,
        {
            "question": question.question.strip(),
            "options": format_options(question.labels, question.options),
            "closing": closing_for(condition_set.closing, question.labels),
            "subject_line": subject_line(question),
        },
    )
    return Prompt(
        question_id=question.question_id,
        condition=condition.name,
        text=text,
        displayed_labels=question.labels,
        canonical_labels=question.labels,
        displayed_options=question.options,
        template_version=condition_set.template_version,
        cloze_target=condition.cloze_target,
    ), question.answer


def render_all(questions: Sequence[Question], condition_set: ConditionSet) -> list[Prompt]:
    """Render every question under every condition, condition-major.

    Condition-major order puts prompts that share their instruction prefix next to each other, which
    lets llama.cpp reuse its KV cache between consecutive requests; responses do not depend on order.
    """
    return [render(q, c, condition_set) for c in condition_set.conditions for q in questions]
