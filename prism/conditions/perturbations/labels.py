"""Label steps: other labels for the same options in the same order (attribute ``labels``).

The output requirement names what the labels are, so it changes with them: the closing template's
``{kind}`` becomes ``letter``, ``number``, ``Roman numeral`` or ``symbol``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from prism.conditions.perturbations.ops import Library, Op, named, register_op
from prism.conditions.perturbations.variant import Attribute, SpecError, Variant, fill
from prism.config import StepSpec

_ROMAN = re.compile(r"m{0,3}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})", re.IGNORECASE)


def label_kind(labels: Sequence[str]) -> str | None:
    """Name the kind of a label set, or None when the labels are of no single kind.

    Single letters are ``letter``; digit strings ``number``; Roman numerals (with at least one longer
    than a letter, so ``C D`` stay letters) ``Roman numeral``; labels without letters or digits ``symbol``.
    """
    if not labels or any(not label for label in labels):
        return None
    if all(len(label) == 1 and label.isascii() and label.isalpha() for label in labels):
        return "letter"
    if all(label.isdigit() for label in labels):
        return "number"
    if all(_ROMAN.fullmatch(label) for label in labels) and any(len(label) > 1 for label in labels):
        return "Roman numeral"
    if all(not any(ch.isalnum() for ch in label) for label in labels):
        return "symbol"
    return None


def closing_for(template: str, labels: Sequence[str]) -> str:
    """The output requirement for ``labels``: ``{kind}`` in ``template`` filled with their kind."""
    return fill(template, {"kind": label_kind(labels) or "label"})


@dataclass(frozen=True)
class Relabel:
    """Show the options under another label set, in the same order, and say so in the closing.

    A question with ``k`` options gets the first ``k`` labels of the set, so a set of ten covers every
    count from 2 to 10 and extending a set leaves every shorter rendering as it was.

    Attributes:
        set_name: Name of the label set (for messages).
        new_labels: The labels, in order; a question uses as many as it has options.
        closing_template: The set's closing, with ``{kind}``.
    """

    set_name: str
    new_labels: tuple[str, ...]
    closing_template: str
    changes: frozenset[Attribute] = frozenset({"labels"})

    @property
    def name(self) -> str:
        """``relabel(<set>)``."""
        return f"relabel({self.set_name})"

    def covers(self, count: int) -> bool:
        """Whether the set has a label for each of ``count`` options."""
        return count <= len(self.new_labels)

    def apply(self, variant: Variant, seed: int) -> Variant:
        """Replace the labels with the set's first ones and the closing (the seed is unused).

        A set too short for the question leaves fewer labels than options, which the variant check refuses
        (``prism.conditions.check_option_counts`` refuses such a run before anything is rendered).
        """
        labels = self.new_labels[: len(variant.options)]
        return replace(variant, labels=labels, closing=closing_for(self.closing_template, labels))

    def verify(self, before: Variant, after: Variant) -> str | None:
        """The new labels must be of one kind, so the closing can name it."""
        if label_kind(after.labels) is None:
            return f"the labels {list(after.labels)} are not all letters, numbers, Roman numerals or symbols"
        return None


def _relabel(spec: StepSpec, library: Library) -> Relabel:
    if "{kind}" not in library.closing:
        raise SpecError("step 'relabel' needs a closing with {kind}, so the output requirement names the labels")
    return Relabel(str(spec.to), named(library, "label_sets", spec.to), library.closing)


register_op(Op("relabel", _relabel, Relabel, takes="label_sets"))
