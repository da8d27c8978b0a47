"""Axes: what a condition set varies, one axis per condition family.

An axis is a family seen as a variable: its ``values`` (condition names; the first is its baseline), the
attributes its steps change (``order``, ``labels``, ``instruction`` ...) and its ``scale``, declared with
the family in the condition-set YAML (``families: {typo_dose: {scale: ordinal, values: [...]}}``):

- ``nominal`` (the default): values without an order. A shift is tested from the baseline to each value.
- ``ordinal`` and ``numeric``: ordered values (a dose). A shift is tested from each value to the next one,
  so the profile of the axis shows the first value where the answer moves.

Without ``values:``, a family's values are the set's baseline followed by its conditions in the order
they are listed. A grid (:mod:`prism.conditions.grid`) crosses axes; its axes keep their values, and each value is
shown by the cell where only that axis is off its baseline (``Axis.conditions``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from prism.conditions.perturbations.variant import Attribute, SpecError
from prism.config import FamilySpec

SCALES = ("nominal", "ordinal", "numeric")


@dataclass(frozen=True)
class Axis:
    """One thing a condition set varies.

    Attributes:
        name: The family's name.
        scale: ``nominal``, ``ordinal`` or ``numeric``.
        values: The axis's values, the first its baseline: condition names in a sweep, value names (the
            conditions of the family the grid was built from) in a grid.
        conditions: For each value, the condition that shows it with every other axis at its baseline.
        attributes: The variant attributes the family's steps change (empty for template conditions).
        composable: Whether every value is a step condition (template conditions cannot be composed).
    """

    name: str
    scale: str
    values: tuple[str, ...]
    conditions: tuple[str, ...]
    attributes: frozenset[Attribute]
    composable: bool = True

    @property
    def ordered(self) -> bool:
        """Whether the values have an order (ordinal or numeric): shifts then go from each to the next."""
        return self.scale != "nominal"

    def steps(self) -> list[tuple[str, str]]:
        """The (from, to) conditions of every step tested along the axis, in value order."""
        first = self.conditions[0]
        return [(self.conditions[i - 1] if self.ordered else first, self.conditions[i])
                for i in range(1, len(self.conditions))]


@dataclass(frozen=True)
class Member:
    """What :func:`axes_of` needs to know of one condition."""

    name: str
    family: str
    attributes: frozenset[Attribute] | None  # None: a template condition


def axes_of(members: Sequence[Member], baseline: str, declared: Mapping[str, FamilySpec]) -> tuple[Axis, ...]:
    """One axis per family of the non-baseline conditions, in the order the families first appear.

    Args:
        members: The set's conditions.
        baseline: The set's baseline condition.
        declared: The set's ``families:`` (family -> its ``scale`` and optional ``values``).

    Raises:
        SpecError: For an unknown scale or key, a declared family without conditions, or ``values`` that
            do not list the family's conditions after a baseline condition from outside the family.
    """
    names = [m.name for m in members]
    families = list(dict.fromkeys(m.family for m in members if m.name != baseline))
    # The baseline's own family may be declared (shared/p1.yaml declares P1's, and conditions=turns has P1
    # as its baseline); it is no axis, since nothing of the set moves off the baseline along it.
    unused = sorted(set(declared) - {m.family for m in members})
    if unused:
        raise SpecError(f"families: declares {unused}, but no condition of the set is of that family; known "
                        f"families: {families}")
    axes = []
    for family in families:
        spec = declared.get(family) or FamilySpec()
        scale = spec.scale or "nominal"
        if scale not in SCALES:
            raise SpecError(f"family {family!r}: scale {scale!r} is not one of {', '.join(SCALES)}")
        own = [m for m in members if m.family == family and m.name != baseline]
        values = [str(v) for v in spec.values or [baseline, *(m.name for m in own)]]
        _check_values(family, values, [m.name for m in own], names)
        composable = all(m.attributes is not None for m in own)
        attributes: frozenset[Attribute] = frozenset().union(*(m.attributes or frozenset() for m in own))
        axes.append(Axis(family, scale, tuple(values), tuple(values), attributes, composable))
    return tuple(axes)


def _check_values(family: str, values: list[str], own: list[str], names: list[str]) -> None:
    where = f"family {family!r}: values {values}"
    if len(set(values)) != len(values):
        raise SpecError(f"{where} repeat a value")
    if values[0] not in names or values[0] in own:
        raise SpecError(f"{where} must start with its baseline, a condition of the set outside the family "
                        f"(e.g. the set's baseline), not {values[0]!r}")
    if sorted(values[1:]) != sorted(own):
        raise SpecError(f"{where} must list, after the baseline, exactly the family's conditions {own}")
