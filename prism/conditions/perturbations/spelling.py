"""Spelling steps: seeded, readable typos in the instruction and the stem (attributes ``instruction``, ``stem``).

``Typos`` puts up to ``count`` typos in each field. ``NestedTypos`` puts exactly ``count`` in the two fields
together, and its levels nest: one seeded order of the editable words (and one seeded typo for each) is
drawn per question, and a level of ``count`` typos takes the first ``count`` of them, so every level keeps
the typos of the levels below it. The levels of one family share that draw (see
:func:`prism.conditions.perturbations.build.seed_keys`).

A typo keeps a word's first and last letters and makes one edit a reader undoes without noticing: two
neighbouring letters swapped, one letter dropped or one doubled. Only plain words of four letters or more
are touched. Never touched: anything with a digit, the word right after a number (its unit), listed
protected words (units such as ``meters``), words with capitals after the first letter (``DNA``,
``NaCl``), option texts, labels and the output requirement, which this step cannot reach.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import ClassVar

from prism.conditions.perturbations.ops import Op, count_of, register_op
from prism.conditions.perturbations.variant import Attribute, Variant
from prism.config import StepSpec

# A whitespace-separated chunk: punctuation, a plain word, punctuation.
_CHUNK = re.compile(r"\S+")
_PLAIN = re.compile(r"([^\w\s]*)([A-Za-z]+)([^\w\s]*)")
MIN_LENGTH = 4


def typo_candidates(word: str) -> list[str]:
    """Every readable one-edit typo of ``word``, sorted (so a seeded choice is stable)."""
    n = len(word)
    found = set()
    for i in range(1, n - 1):  # interior letters only: the first and last stay
        found.add(word[:i] + word[i + 1:])  # drop
        found.add(word[:i] + word[i] + word[i:])  # double
        if i + 1 < n - 1:
            found.add(word[:i] + word[i + 1] + word[i] + word[i + 2:])  # swap neighbours
    found.discard(word)
    return sorted(found)


def _editable(chunks: list[str], index: int, protected: frozenset[str]) -> re.Match[str] | None:
    """The plain-word match of ``chunks[index]`` if a typo may go there, else None."""
    match = _PLAIN.fullmatch(chunks[index])
    if match is None or len(match.group(2)) < MIN_LENGTH:
        return None
    word = match.group(2)
    if not (word[1:].islower()) or word.lower() in protected:
        return None
    if index > 0 and any(ch.isdigit() for ch in chunks[index - 1]):
        return None  # the unit of a number ("20 meters", "5 grams")
    return match


def add_typos(text: str, count: int, rng: random.Random, protected: frozenset[str]) -> str:
    """Put up to ``count`` typos, in distinct seeded words, into ``text``; white space is kept exactly."""
    spans = [(m.start(), m.end()) for m in _CHUNK.finditer(text)]
    chunks = [text[a:b] for a, b in spans]
    eligible = [i for i in range(len(chunks)) if _editable(chunks, i, protected)]
    for index in sorted(rng.sample(eligible, min(count, len(eligible)))):
        match = _editable(chunks, index, protected)
        assert match is not None  # eligible above, and chunks are edited one at a time
        chunks[index] = match.group(1) + rng.choice(typo_candidates(match.group(2))) + match.group(3)
    pieces, end = [], 0
    for (a, b), chunk in zip(spans, chunks, strict=True):
        pieces += [text[end:a], chunk]
        end = b
    return "".join(pieces) + text[end:]


def spelling_problem(before: str, after: str, protected: Iterable[str]) -> str | None:
    """Say why ``after`` is not ``before`` with readable typos in editable words only; None when it is."""
    shield = frozenset(w.lower() for w in protected)
    old, new = _CHUNK.findall(before), _CHUNK.findall(after)
    if len(old) != len(new):
        return f"the word count changed ({len(old)} -> {len(new)})"
    for index, (was, now) in enumerate(zip(old, new, strict=True)):
        if was == now:
            continue
        match = _editable(old, index, shield)
        if match is None:
            return (f"{was!r} was changed to {now!r}, but it may not be edited (a number, a unit, a protected or "
                    "short word)")
        edited = _PLAIN.fullmatch(now)
        if (edited is None or edited.group(1) != match.group(1) or edited.group(3) != match.group(3)
                or edited.group(2) not in typo_candidates(match.group(2))):
            return f"{was!r} -> {now!r} is not one readable typo"
    return None


@dataclass(frozen=True)
class _TypoStep:
    """What both typo steps share: their fields, their name's form and the per-field typo check.

    Attributes:
        count: How many typos (per field or in all: each subclass says).
        protected: Words never touched, lower case (units and the like, from the condition set).
    """

    count: int
    protected: frozenset[str] = frozenset()
    changes: frozenset[Attribute] = frozenset({"instruction", "stem"})
    # The name's prefix: the step reads as ``<prefix>(<count>)`` in messages and logged conditions.
    prefix: ClassVar[str]

    @property
    def name(self) -> str:
        """``<prefix>(<count>)``."""
        return f"{self.prefix}({self.count})"

    def field_problem(self, before: Variant, after: Variant) -> str | None:
        """The first field of instruction and stem not changed by readable typos in editable words only."""
        for field in ("instruction", "stem"):
            problem = spelling_problem(getattr(before, field), getattr(after, field), self.protected)
            if problem is not None:
                return f"{field}: {problem}"
        return None


@dataclass(frozen=True)
class Typos(_TypoStep):
    """Up to ``count`` typos in the instruction and up to ``count`` in the stem.

    Attributes:
        count: Typos per field (fewer when a field has fewer editable words).
    """

    prefix: ClassVar[str] = "typos"

    def apply(self, variant: Variant, seed: int) -> Variant:
        """Draw the words and the edits from ``random.Random(seed)``: instruction first, then stem."""
        rng = random.Random(seed)
        instruction = add_typos(variant.instruction, self.count, rng, self.protected)
        return replace(variant, instruction=instruction, stem=add_typos(variant.stem, self.count, rng, self.protected))

    def verify(self, before: Variant, after: Variant) -> str | None:
        """Both fields must differ from the original by readable typos in editable words only."""
        return self.field_problem(before, after)


def _editable_positions(text: str, protected: frozenset[str]) -> list[int]:
    """Indices of the whitespace-separated chunks of ``text`` that may take a typo."""
    chunks = _CHUNK.findall(text)
    return [i for i in range(len(chunks)) if _editable(chunks, i, protected)]


def _apply_edits(text: str, edits: dict[int, str]) -> str:
    """``text`` with chunk ``i`` replaced by ``edits[i]``; white space kept exactly."""
    pieces, end = [], 0
    for index, match in enumerate(_CHUNK.finditer(text)):
        pieces += [text[end:match.start()], edits.get(index, match.group())]
        end = match.end()
    return "".join(pieces) + text[end:]


def _changed_words(before: str, after: str) -> int:
    return sum(a != b for a, b in zip(_CHUNK.findall(before), _CHUNK.findall(after), strict=False))


@dataclass(frozen=True)
class NestedTypos(_TypoStep):
    """Exactly ``count`` typos over the instruction and the stem together, nested across levels.

    Attributes:
        count: Typos in all (each in its own word).
    """

    prefix: ClassVar[str] = "nested_typos"

    def apply(self, variant: Variant, seed: int) -> Variant:
        """Order every editable word of both fields and draw each one's typo from ``random.Random(seed)``.

        The whole order and every word's typo are drawn whatever ``count`` is, so the same seed gives every
        level the same draw and a level's typos are the first ``count`` of it.
        """
        rng = random.Random(seed)
        fields = {"instruction": variant.instruction, "stem": variant.stem}
        slots = [(name, i) for name, text in fields.items() for i in _editable_positions(text, self.protected)]
        order = rng.sample(slots, len(slots))
        chunks = {name: _CHUNK.findall(text) for name, text in fields.items()}
        typos = []
        for name, index in order:
            match = _PLAIN.fullmatch(chunks[name][index])
            assert match is not None  # an editable position is a plain word
            typos.append(match.group(1) + rng.choice(typo_candidates(match.group(2))) + match.group(3))
        edits: dict[str, dict[int, str]] = {name: {} for name in fields}
        for (name, index), typo in list(zip(order, typos, strict=True))[: self.count]:
            edits[name][index] = typo
        return replace(variant, instruction=_apply_edits(variant.instruction, edits["instruction"]),
                       stem=_apply_edits(variant.stem, edits["stem"]))

    def verify(self, before: Variant, after: Variant) -> str | None:
        """Exactly ``count`` words changed in the two fields, each by one readable typo of an editable word."""
        problem = self.field_problem(before, after)
        if problem is not None:
            return problem
        changed = sum(_changed_words(getattr(before, f), getattr(after, f)) for f in ("instruction", "stem"))
        if changed != self.count:
            room = sum(len(_editable_positions(getattr(before, f), self.protected)) for f in ("instruction", "stem"))
            return (f"{changed} words got a typo, not exactly {self.count}: the instruction and the stem have "
                    f"{room} words that may take one (four letters or more, no digit, not a unit or protected "
                    "word). Lower this level's count in the condition set, or leave this question out")
        return None


def _required_count(spec: StepSpec, op: str) -> int:
    count = count_of(spec, op, None)
    assert count is not None  # count_of raises without one
    return count


register_op(Op("typos", lambda spec, library: Typos(_required_count(spec, "typos"), library.protected_words), Typos))
# The levels of a dose nest: every level of the family sees one draw per question.
register_op(Op("nested_typos", lambda spec, library: NestedTypos(_required_count(spec, "nested_typos"),
                                                                 library.protected_words),
               NestedTypos, family_seeded=True))
