"""What a condition is: the bottom of the conditions package, imported by every other module in it.

A :class:`Condition` is one way of asking a question (a template, or seeded steps applied to the unperturbed
rendering); a :class:`ConditionSet` is a named, versioned set of them sharing a closing line and a baseline;
a grid cell's :class:`Part` is one axis's value inside it. Building sets from config is
:mod:`prism.conditions.sets`; rendering prompts is :mod:`prism.conditions.prompts`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from prism.conditions.axes import Axis
from prism.conditions.perturbations import Format, Step
from prism.conditions.perturbations.build import SeedKey
from prism.conditions.perturbations.variant import Attribute
from prism.errors import PrismError

FIELDS = ("question", "options", "closing")
_FIELD_PATTERN = re.compile(r"\{(question|options|closing|subject_line)\}")
# Condition and family names become record fields, replay keys and MLflow metric names (``accuracy/<name>``,
# ``consistency/<family>/<name>``), so they stay within characters every one of those accepts.
_NAME = re.compile(r"[A-Za-z0-9_.-]+")


class ConditionError(PrismError, ValueError):
    """A condition set that cannot be rendered as written."""


@dataclass(frozen=True)
class Part:
    """One axis's value inside a grid cell: the steps of the condition that shows it alone.

    Attributes:
        axis: The axis.
        value: Its value in this cell (a condition of the set the grid was built from).
        steps: That condition's steps.
        keys: Their seed keys (:func:`prism.conditions.perturbations.build.seed_keys`), as in that condition.
        attributes: The attributes the axis may change.
    """

    axis: str
    value: str
    steps: tuple[Step, ...]
    keys: tuple[SeedKey, ...]
    attributes: frozenset[Attribute]


@dataclass(frozen=True)
class Condition:
    """One way of asking: a template, or steps applied to the unperturbed rendering.

    Attributes:
        name: Name used in records, metrics (``accuracy/<name>``) and replay keys.
        description: One line saying what the condition varies.
        template: Text with the fields ``{question}``, ``{options}`` and ``{closing}`` (template conditions;
            empty for step conditions).
        family: What kind of change it is (``instruction``, ``option_order``, ...); consistency is reported
            per family. The baseline's family is ``baseline``.
        steps: The perturbation steps of a step condition (``()`` for the unperturbed rendering itself),
            or None for a template condition.
        keys: Per step, what its seed is keyed by (:func:`prism.conditions.perturbations.build.seed_keys`); None:
            ``(name, position)``.
        levels: (axis, value) of every axis this condition moves off its baseline: ``((family, name),)``
            in a sweep, one pair per non-baseline axis in a grid cell, ``()`` for the baseline.
        parts: A grid cell's values with their own steps (:class:`prism.conditions.grid.Part`); ``()`` otherwise.
        cloze_target: The cloze continuation this condition fixes (``text`` or ``label``: lm-eval's own forms,
            ``conditions=cloze``); such a template needs no ``{closing}`` and may leave the options out.
    """

    name: str
    description: str
    template: str = ""
    family: str = "instruction"
    steps: tuple[Step, ...] | None = None
    keys: tuple[SeedKey, ...] | None = None
    levels: tuple[tuple[str, str], ...] = ()
    parts: tuple[Part, ...] = ()
    cloze_target: str | None = None


@dataclass(frozen=True)
class ConditionSet:
    """A named, versioned set of conditions sharing one closing line and one baseline.

    Attributes:
        name: Set name, e.g. ``prism``.
        template_version: Bumped on any change that could alter a rendered prompt.
        closing: The output requirement every prompt ends with.
        baseline: Name of the condition other conditions are compared with.
        conditions: The conditions, in the order they are run and reported.
        seed: Seed every step seed is derived from (the run's ``seed`` unless set).
        base_format: Format of the unperturbed rendering step conditions start from (None without them).
        axes: The axes the set varies (:mod:`prism.conditions.axes`): one per family in a sweep, the crossed
            ones in a grid.
        grid: The names of the crossed axes of a grid, ``()`` for a sweep.
    """

    name: str
    template_version: str
    closing: str
    baseline: str
    conditions: tuple[Condition, ...]
    seed: int = 0
    base_format: Format | None = None
    axes: tuple[Axis, ...] = ()
    grid: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        """Condition names in order."""
        return [c.name for c in self.conditions]

    @property
    def families(self) -> dict[str, str]:
        """Condition name -> family, in condition order."""
        return {c.name: c.family for c in self.conditions}

    @property
    def levels(self) -> dict[str, dict[str, str]]:
        """Condition name -> the value of every axis (its baseline value where the condition leaves it)."""
        return {c.name: {axis.name: dict(c.levels).get(axis.name, axis.values[0]) for axis in self.axes}
                for c in self.conditions}
