"""Grids: every combination of the values of some axes, each cell a composition of checked steps.

``conditions.axes=[labels,option_order]`` turns a condition set into the grid of those axes: one condition
per combination of their values, the baselines included. A cell is named by its non-baseline values,
``<axis>.<value>`` joined by ``__`` in the order the axes are listed (``labels.numbers__option_order.reverse``,
``labels.roman``); the all-baseline cell keeps the baseline's name (``P0``). Its family names the axes it
changes (``labels__option_order``), so per-family consistency reads per combination of axes.

A cell applies the steps of each of its values, axis by axis, each step keyed to the seed of the
condition it comes from, so a cell shows exactly what each of its values shows alone. Rendering checks
that end to end (:func:`render_cell`): every step passes its own checks, each axis's attributes are
those of its value rendered alone, and nothing else moved, so the key maps through every step.

Only axes of step conditions that start from the set's baseline and change disjoint attributes can be
crossed; anything else, and a grid over ``conditions.max_conditions``, is refused before any request.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations, product

from prism.conditions.axes import Axis
from prism.conditions.condition import Condition, ConditionSet, Part
from prism.conditions.perturbations.build import build_variant
from prism.conditions.perturbations.checks import check_prompt, fail
from prism.conditions.perturbations.labels import closing_for
from prism.conditions.perturbations.variant import (
    ATTRIBUTE_FIELDS,
    Attribute,
    SpecError,
    Variant,
    base_variant,
    to_prompt,
)
from prism.types import Prompt, Question

SEPARATOR = "__"




def cell_name(levels: Sequence[tuple[str, str]], baseline: str) -> str:
    """``<axis>.<value>`` of each non-baseline value joined by ``__``; the baseline's name when there is none."""
    return SEPARATOR.join(f"{axis}.{value}" for axis, value in levels) or baseline


def grid_size(axes: Sequence[Axis]) -> int:
    """How many conditions the grid of ``axes`` has (the product of their numbers of values)."""
    return math.prod(len(axis.values) for axis in axes)


def choose_axes(available: Sequence[Axis], names: Sequence[str], baseline: str, max_conditions: int) -> list[Axis]:
    """The axes named by ``conditions.axes``, checked to be crossable, and the grid small enough.

    Raises:
        SpecError: For an unknown or repeated axis, an axis of templates or one not starting from the
            baseline, two axes changing the same attribute, or a grid over ``max_conditions``.
    """
    known = {axis.name: axis for axis in available}
    if len(set(names)) != len(names):
        raise SpecError(f"conditions.axes={list(names)} names an axis twice; name each axis once")
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SpecError(f"conditions.axes names {unknown}, which are not axes of this set; known axes: "
                        f"{sorted(known)} (each condition family is one)")
    chosen = [known[name] for name in names]
    for axis in chosen:
        if not axis.composable:
            raise SpecError(f"axis {axis.name!r} is made of template conditions, which cannot be composed; a grid "
                            "crosses families of step conditions (the perturbation sets)")
        if axis.values[0] != baseline:
            raise SpecError(f"axis {axis.name!r} starts from {axis.values[0]!r}, not the baseline {baseline!r}; a "
                            "grid crosses axes that start from the unperturbed rendering")
    for a, b in combinations(chosen, 2):
        # Fields, not attribute names: ``answer`` (remove the correct option) and ``order`` share the options.
        shared = sorted(_fields(a.attributes) & _fields(b.attributes))
        if shared:
            raise SpecError(f"axes {a.name!r} and {b.name!r} both change {shared}, so their cells could not say which "
                            "axis did what; cross axes that change different attributes")
    size = grid_size(chosen)
    if size > max_conditions:
        shape = " x ".join(str(len(axis.values)) for axis in chosen)
        raise SpecError(f"the grid of {list(names)} has {size} conditions ({shape}), more than "
                        f"conditions.max_conditions={max_conditions}; name fewer axes, or raise the limit with "
                        f"conditions.max_conditions={size} if you mean to ask every model {size} prompts per "
                        "question")
    return chosen


def _fields(attributes: frozenset[Attribute]) -> set[str]:
    return {name for attribute in attributes for name in ATTRIBUTE_FIELDS[attribute]}


def compose(conditions: Sequence[Condition], chosen: Sequence[Axis],
            baseline: str) -> tuple[list[Condition], tuple[Axis, ...]]:
    """Every cell of the grid of ``chosen`` over ``conditions`` (a sweep's), and the grid's axes.

    Args:
        conditions: The sweep's conditions, the baseline among them.
        chosen: The axes to cross.
        baseline: The all-baseline cell's name.

    Returns:
        (cells in row-major order of the axes, the first axis slowest; the axes with each value's
        single-axis cell in ``conditions``).
    """
    by_name = {c.name: c for c in conditions}
    cells = []
    for combination in product(*(axis.values for axis in chosen)):
        levels = tuple((axis.name, value) for axis, value in zip(chosen, combination, strict=True) if value != baseline)
        if not levels:
            cells.append(by_name[baseline])
            continue
        parts = tuple(Part(axis, value, by_name[value].steps or (), by_name[value].keys or (),
                           next(a.attributes for a in chosen if a.name == axis)) for axis, value in levels)
        cells.append(Condition(
            name=cell_name(levels, baseline),
            description="; ".join(by_name[value].description for _, value in levels),
            family=SEPARATOR.join(axis for axis, _ in levels),
            steps=tuple(step for part in parts for step in part.steps),
            keys=tuple(key for part in parts for key in part.keys),
            levels=levels,
            parts=parts,
        ))
    axes = tuple(Axis(axis.name, axis.scale, axis.values,
                      tuple(cell_name(((axis.name, v),) if v != baseline else (), baseline) for v in axis.values),
                      axis.attributes) for axis in chosen)
    return cells, axes


def _composition_problem(base: Variant, full: Variant, alone: dict[str, Variant], parts: Sequence[Part]) -> str | None:
    """Why ``full`` is not each part's own change on top of ``base``; None when it is."""
    declared = set()
    for part in parts:
        fields = {name for attribute in part.attributes for name in ATTRIBUTE_FIELDS[attribute]}
        declared |= fields
        for name in sorted(fields):
            if getattr(full, name) != getattr(alone[part.axis], name):
                return (f"axis {part.axis!r} ({part.value}) shows another {name} in the cell than alone: "
                        f"{getattr(full, name)!r} instead of {getattr(alone[part.axis], name)!r}")
    moved = sorted(base.changed_fields(full) - declared)
    if moved:
        return f"the cell changed {moved}, which none of its axes declares"
    return None


def render_cell(question: Question, condition: Condition, condition_set: ConditionSet) -> Prompt:
    """Build, check and render one grid cell (:func:`render_cell_keyed` without the key)."""
    return render_cell_keyed(question, condition, condition_set)[0]


def render_cell_keyed(question: Question, condition: Condition,
                      condition_set: ConditionSet) -> tuple[Prompt, str | None]:
    """Build and check one grid cell end to end, then render it.

    Every step passes its own checks in the composed order (:func:`prism.conditions.perturbations.build.build_variant`);
    then each axis's fields must equal those of its value rendered alone, the fields no axis declares must
    be the unperturbed ones, and the rendered text must pass :func:`prism.conditions.perturbations.checks.check_prompt`.
    Returns the prompt and the canonical label of its correct option (moved by a causal axis), for scoring.

    Raises:
        PerturbationError: Naming the question, the cell and what failed.
    """
    assert condition_set.base_format is not None and condition.steps is not None  # grids are built from step sets
    args = (condition_set.base_format, condition_set.closing, condition_set.seed)
    full = build_variant(question, condition.name, condition.steps, *args, condition.keys)
    alone = {part.axis: build_variant(question, part.value, part.steps, *args, part.keys) for part in condition.parts}
    base = base_variant(question, condition_set.base_format, closing_for(condition_set.closing, question.labels))
    problem = _composition_problem(base, full, alone, condition.parts)
    if problem is not None:
        raise fail(question.question_id, condition.name, "composition", problem)
    prompt = to_prompt(full, condition.name, condition_set.template_version)
    problem = check_prompt(full, prompt, question)
    if problem is not None:
        raise fail(question.question_id, condition.name, "render", problem)
    return prompt, full.key
