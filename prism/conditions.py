"""Prompt conditions and their rendering.

A condition set is data (``conf/conditions/*.yaml``): a version, a closing line and one template per
condition. Rendering fills exactly three fields, ``{question}``, ``{options}`` and ``{closing}``, by
literal substitution, so dataset text containing braces, ``${...}`` or Jinja markers is shown as-is and
never interpreted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prism.errors import PrismError
from prism.types import Prompt, Question

FIELDS = ("question", "options", "closing")
_FIELD_PATTERN = re.compile(r"\{(question|options|closing)\}")


class ConditionError(PrismError, ValueError):
    """A condition set that cannot be rendered as written."""


@dataclass(frozen=True)
class Condition:
    """One instruction formulation.

    Attributes:
        name: Name used in records, metrics (``accuracy/<name>``) and replay keys.
        description: One line saying what the condition varies.
        template: Text with the fields ``{question}``, ``{options}`` and ``{closing}``.
    """

    name: str
    description: str
    template: str


@dataclass(frozen=True)
class ConditionSet:
    """A named, versioned set of conditions sharing one closing line and one baseline.

    Attributes:
        name: Set name, e.g. ``prism``.
        template_version: Bumped on any change that could alter a rendered prompt.
        closing: The output requirement every prompt ends with.
        baseline: Name of the condition other conditions are compared with.
        conditions: The conditions, in the order they are run and reported.
    """

    name: str
    template_version: str
    closing: str
    baseline: str
    conditions: tuple[Condition, ...]

    @property
    def names(self) -> list[str]:
        """Condition names in order."""
        return [c.name for c in self.conditions]


def condition_set_from_config(cfg: Mapping[str, Any]) -> ConditionSet:
    """Build and validate a condition set from its config mapping (``cfg.conditions``).

    Args:
        cfg: Mapping with ``name``, ``template_version``, ``closing``, ``baseline`` and ``conditions``
            (a list of mappings with ``name``, ``description`` and ``template``).

    Returns:
        The validated condition set.

    Raises:
        ConditionError: If a name repeats, the baseline is not a condition, or a template lacks a field,
            repeats one, or does not end with the closing line.
    """
    conditions = tuple(
        Condition(name=str(c["name"]), description=str(c.get("description", "")), template=str(c["template"]))
        for c in cfg["conditions"]
    )
    condition_set = ConditionSet(
        name=str(cfg["name"]),
        template_version=str(cfg["template_version"]),
        closing=str(cfg["closing"]),
        baseline=str(cfg.get("baseline", "P0")),
        conditions=conditions,
    )
    validate(condition_set)
    return condition_set


def validate(condition_set: ConditionSet) -> None:
    """Check that every template can be rendered and ends with the closing line.

    Raises:
        ConditionError: Naming the condition set, the condition and what is wrong with it.
    """
    where = f"condition set {condition_set.name!r}"
    if not condition_set.conditions:
        raise ConditionError(f"{where} has no conditions; list at least one under 'conditions:'.")
    names = condition_set.names
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConditionError(f"{where} repeats condition names {repeated}; every name must be unique.")
    if condition_set.baseline not in names:
        raise ConditionError(f"{where}: baseline {condition_set.baseline!r} is not one of its conditions {names}.")
    for condition in condition_set.conditions:
        found = _FIELD_PATTERN.findall(condition.template)
        for name in FIELDS:
            if found.count(name) != 1:
                raise ConditionError(
                    f"{where}, condition {condition.name!r}: the template must contain {{{name}}} exactly once "
                    f"(found {found.count(name)})."
                )
        if not condition.template.rstrip().endswith("{closing}"):
            raise ConditionError(
                f"{where}, condition {condition.name!r}: the template must end with {{closing}} so every "
                "prompt ends with the same output requirement."
            )


def format_options(labels: Sequence[str], options: Sequence[str]) -> str:
    """Render options as ``<label>. <text>`` lines, the one layout every PRISM condition uses."""
    return "\n".join(f"{label}. {text}" for label, text in zip(labels, options, strict=True))


def fill(template: str, values: Mapping[str, str]) -> str:
    """Substitute the known fields literally; the values are never themselves scanned for fields."""
    return _FIELD_PATTERN.sub(lambda match: values[match.group(1)], template)


def render(question: Question, condition: Condition, condition_set: ConditionSet) -> Prompt:
    """Render one question under one condition, options in frozen order with canonical labels.

    Args:
        question: The frozen question.
        condition: The condition to render under.
        condition_set: The set the condition belongs to (for the closing line and version).

    Returns:
        The prompt, with the labels and option texts as displayed and their canonical labels.
    """
    text = fill(
        condition.template,
        {
            "question": question.question.strip(),
            "options": format_options(question.labels, question.options),
            "closing": condition_set.closing,
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
    )


def render_all(questions: Sequence[Question], condition_set: ConditionSet) -> list[Prompt]:
    """Render every question under every condition, condition-major.

    Condition-major order puts prompts that share their instruction prefix next to each other, which
    lets llama.cpp reuse its KV cache between consecutive requests; responses do not depend on order.
    """
    return [render(q, c, condition_set) for c in condition_set.conditions for q in questions]
