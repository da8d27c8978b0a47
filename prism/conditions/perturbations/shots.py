"""Few-shot steps: how many demonstrations are shown before the question, which, in which order, in which turns.

A question carries its frozen draw of demonstrations (:mod:`prism.questions.demonstrations`; the variant's
``pool``). These steps choose from it and never touch the question, its options, labels, key or closing:

- ``shots`` (``count:`` k, ``to:`` a draw name under ``draws``, default ``first``) shows k demonstrations
  starting at the draw's offset, inline before the question (attribute ``shots``): ``shots_k`` takes the first
  k of the one draw, so the levels nest, and ``to: second`` shows k others;
- ``reverse_shots`` and ``shuffle_shots`` show the same demonstrations in reverse or in a seeded other order
  (attribute ``shots``);
- ``shots_as_turns`` moves them into earlier user/assistant turns, the question alone in the last user turn
  (attribute ``shot_turn``).

Each demonstration is rendered like the question (its layout, option format, labels and closing) and answered
with its key's label (:func:`prism.conditions.perturbations.variant.demonstration_answer`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, replace

from prism.conditions.perturbations.ops import Library, Op, count_of, named, register_op
from prism.conditions.perturbations.step import Step
from prism.conditions.perturbations.variant import Attribute, SpecError, Variant
from prism.config import StepSpec

_SHOTS: frozenset[Attribute] = frozenset({"shots"})
_SHOT_TURN: frozenset[Attribute] = frozenset({"shot_turn"})

#: The draw ``shots`` takes from without a ``to:``: the first demonstrations of each question's draw.
FIRST_DRAW = "first"


@dataclass(frozen=True)
class Shots:
    """Show ``count`` demonstrations of the question's draw, from position ``offset``, inline before the question.

    Attributes:
        count: How many.
        draw_name: The name of the draw (``first``, or a name under the set's ``draws``), for messages.
        offset: Where in each question's draw they start (0 for ``first``).
    """

    count: int
    draw_name: str = FIRST_DRAW
    offset: int = 0
    changes: frozenset[Attribute] = _SHOTS

    @property
    def name(self) -> str:
        """``shots(4)``, or ``shots(4, second)`` for another draw."""
        return f"shots({self.count})" if self.draw_name == FIRST_DRAW else f"shots({self.count}, {self.draw_name})"

    @property
    def needs(self) -> int:
        """How many demonstrations each question's draw must hold for this step."""
        return self.offset + self.count

    def apply(self, variant: Variant, seed: int) -> Variant:
        """Show ``pool[offset:offset + count]`` (the seed is unused: the draw is frozen)."""
        return replace(variant, demonstrations=variant.pool[self.offset:self.offset + self.count])

    def verify(self, before: Variant, after: Variant) -> str | None:
        """Exactly ``count`` demonstrations, and none shown before (a prompt has one set of them)."""
        if before.demonstrations:
            return "the variant already shows demonstrations; a condition has one 'shots' step"
        if len(after.demonstrations) != self.count:
            return (f"the question's frozen draw holds {len(after.pool)} demonstrations, too few for {self.name} "
                    f"(it needs {self.needs})")
        return None


@dataclass(frozen=True)
class ReverseShots:
    """The same demonstrations in reverse order."""

    changes: frozenset[Attribute] = _SHOTS

    @property
    def name(self) -> str:
        """``reverse_shots``."""
        return "reverse_shots"

    def apply(self, variant: Variant, seed: int) -> Variant:
        """Reverse the demonstrations (the seed is unused)."""
        return replace(variant, demonstrations=variant.demonstrations[::-1])

    def verify(self, before: Variant, after: Variant) -> str | None:
        """At least two demonstrations to reorder."""
        return _reorders(before, after, self.name)


@dataclass(frozen=True)
class ShuffleShots:
    """The same demonstrations in a seeded order other than their own and its reverse (when there is one)."""

    changes: frozenset[Attribute] = _SHOTS

    @property
    def name(self) -> str:
        """``shuffle_shots``."""
        return "shuffle_shots"

    def apply(self, variant: Variant, seed: int) -> Variant:
        """A seeded permutation that is neither the identity nor, with three or more, the reversal."""
        shown = variant.demonstrations
        if len(shown) < 2:
            return variant
        rng = random.Random(seed)
        avoid = {tuple(range(len(shown))), tuple(range(len(shown)))[::-1]} if len(shown) > 2 else {(0, 1)}
        while True:
            order = list(range(len(shown)))
            rng.shuffle(order)
            if tuple(order) not in avoid:
                return replace(variant, demonstrations=tuple(shown[i] for i in order))

    def verify(self, before: Variant, after: Variant) -> str | None:
        """At least two demonstrations, and another order than before."""
        return _reorders(before, after, self.name)


def _reorders(before: Variant, after: Variant, name: str) -> str | None:
    if len(before.demonstrations) < 2:
        return f"{name} needs at least two demonstrations shown before it (a 'shots' step with count >= 2)"
    if sorted(d.question_id for d in after.demonstrations) != sorted(d.question_id for d in before.demonstrations):
        return f"{name} must show the same demonstrations"
    if after.demonstrations == before.demonstrations:
        return f"{name} left the demonstrations in their order"
    return None


@dataclass(frozen=True)
class ShotsAsTurns:
    """The demonstrations as earlier user/assistant turns; the question alone in the last user turn."""

    changes: frozenset[Attribute] = _SHOT_TURN

    @property
    def name(self) -> str:
        """``shots_as_turns``."""
        return "shots_as_turns"

    def apply(self, variant: Variant, seed: int) -> Variant:
        """Say that the demonstrations sit in turns (the seed is unused)."""
        return replace(variant, shot_turns=True)

    def verify(self, before: Variant, after: Variant) -> str | None:
        """There must be demonstrations to move, inline until now."""
        if not before.demonstrations:
            return "there are no demonstrations to move; put a 'shots' step before 'shots_as_turns'"
        if before.shot_turns:
            return "the demonstrations already sit in turns"
        return None


def demonstrations_needed(steps: Iterable[Step]) -> int:
    """The most demonstrations any of ``steps`` takes from a question's draw (0: none)."""
    return max((step.needs for step in steps if isinstance(step, Shots)), default=0)


def _shots(spec: StepSpec, library: Library) -> Shots:
    count = count_of(spec, "shots", None)
    assert count is not None  # count_of refuses a missing count without a default
    draw = str(spec.to or FIRST_DRAW)
    if draw == FIRST_DRAW:
        return Shots(count)
    offset = named(library, "draws", draw)
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise SpecError(f"draws.{draw} must be a whole number >= 0 (where in each question's draw it starts), "
                        f"not {offset!r}")
    return Shots(count, draw, offset)


register_op(Op("shots", _shots, Shots, takes="draws"))
register_op(Op("reverse_shots", lambda spec, library: ReverseShots(), ReverseShots))
register_op(Op("shuffle_shots", lambda spec, library: ShuffleShots(), ShuffleShots))
register_op(Op("shots_as_turns", lambda spec, library: ShotsAsTurns(), ShotsAsTurns))
