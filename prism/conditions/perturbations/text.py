"""Instruction steps: a hand-written instruction, and near-synonym swaps inside it (attribute ``instruction``).

The instruction is a paragraph before the question; the output requirement at the end of the prompt is
not part of it and never changes here. Texts and the word list are data in the condition set.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from prism.conditions.perturbations.ops import Library, Op, count_of, named, register_op
from prism.conditions.perturbations.variant import Attribute, SpecError, Variant
from prism.config import StepSpec

_INSTRUCTION: frozenset[Attribute] = frozenset({"instruction"})
_WORD = re.compile(r"[A-Za-z]+")


@dataclass(frozen=True)
class Instruct:
    """Put the instruction ``text`` (named ``text_name`` in the set) before the question.

    Attributes:
        text_name: Name of the instruction (for messages).
        text: The instruction.
    """

    text_name: str
    text: str
    changes: frozenset[Attribute] = _INSTRUCTION

    @property
    def name(self) -> str:
        """``instruct(<name>)``."""
        return f"instruct({self.text_name})"

    def apply(self, variant: Variant, seed: int) -> Variant:
        """Set the instruction (the seed is unused)."""
        return replace(variant, instruction=self.text.strip())

    def verify(self, before: Variant, after: Variant) -> str | None:
        """The instruction must be one non-empty paragraph."""
        if not after.instruction or "\n\n" in after.instruction:
            return f"the instruction {self.text_name!r} must be one non-empty paragraph"
        return None


@dataclass(frozen=True)
class Synonyms:
    """Replace listed words of the instruction with one of their listed near-synonyms (seeded).

    Attributes:
        table: Word -> its reviewed near-synonyms; words match whole and case-sensitively.
        count: How many occurrences to replace (seeded choice); None replaces every occurrence.
    """

    table: tuple[tuple[str, tuple[str, ...]], ...]
    count: int | None = None
    changes: frozenset[Attribute] = _INSTRUCTION

    @classmethod
    def from_mapping(cls, table: Mapping[str, Sequence[str]], count: int | None) -> Synonyms:
        """Build from a word -> synonyms mapping (order kept, so seeded choices are stable)."""
        return cls(tuple((word, tuple(alternatives)) for word, alternatives in table.items()), count)

    @property
    def name(self) -> str:
        """``synonyms(<count>|all)``."""
        return f"synonyms({'all' if self.count is None else self.count})"

    def apply(self, variant: Variant, seed: int) -> Variant:
        """Swap ``count`` seeded occurrences (or all) for seeded synonyms."""
        rng = random.Random(seed)
        alternatives = dict(self.table)
        found = [m for m in _WORD.finditer(variant.instruction) if alternatives.get(m.group())]
        chosen = range(len(found)) if self.count is None else sorted(rng.sample(range(len(found)),
                                                                                 min(self.count, len(found))))
        text = variant.instruction
        for index in reversed(list(chosen)):  # right to left, so earlier offsets stay valid
            match = found[index]
            text = text[: match.start()] + rng.choice(alternatives[match.group()]) + text[match.end():]
        return replace(variant, instruction=text)

    def verify(self, before: Variant, after: Variant) -> str | None:
        """Something must have been swapped, and only for listed synonyms."""
        if after.instruction == before.instruction:
            return f"no listed word occurs in the instruction {before.instruction!r}"
        allowed = {w for _, alternatives in self.table for phrase in alternatives for w in _WORD.findall(phrase)}
        added = set(_WORD.findall(after.instruction)) - set(_WORD.findall(before.instruction))
        if not added <= allowed:
            return f"words {sorted(added - allowed)} are not listed synonyms"
        return None


def _instruct(spec: StepSpec, library: Library) -> Instruct:
    return Instruct(str(spec.to), named(library, "instructions", spec.to))


def _synonyms(spec: StepSpec, library: Library) -> Synonyms:
    if not library.synonyms:
        raise SpecError("step 'synonyms' needs a 'synonyms:' word list in the condition set")
    return Synonyms.from_mapping(library.synonyms, count_of(spec, "synonyms", None, allow_all=True))


register_op(Op("instruct", _instruct, Instruct, takes="instructions"))
register_op(Op("synonyms", _synonyms, Synonyms))
