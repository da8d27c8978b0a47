"""Option-order steps: the same option texts and labels, in another order (attribute ``order``).

Each option keeps its canonical label as it moves (``permute``), so a displayed answer maps back to the
option it named: under ``reverse``, displayed ``B`` of four options is canonical ``C``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from prism.conditions.perturbations.ops import Op, count_of, register_op
from prism.conditions.perturbations.step import permute
from prism.conditions.perturbations.variant import Attribute, Variant

_ORDER: frozenset[Attribute] = frozenset({"order"})


@dataclass(frozen=True)
class Reverse:
    """Options in reverse order: the last option first."""

    name: str = "reverse"
    changes: frozenset[Attribute] = _ORDER

    def apply(self, variant: Variant, seed: int) -> Variant:
        """Reverse the display order (the seed is unused)."""
        return permute(variant, range(len(variant.options) - 1, -1, -1))

    def verify(self, before: Variant, after: Variant) -> str | None:
        """Nothing beyond the generic checks."""
        return None


@dataclass(frozen=True)
class Rotate:
    """Every option moves ``by`` places down; the ones pushed off the end wrap to the top.

    With ``by=1`` the frozen order A B C D is shown as D A B C.
    """

    by: int = 1
    name: str = "rotate"
    changes: frozenset[Attribute] = _ORDER

    def apply(self, variant: Variant, seed: int) -> Variant:
        """Rotate the display order (the seed is unused)."""
        n = len(variant.options)
        return permute(variant, [(p - self.by) % n for p in range(n)])

    def verify(self, before: Variant, after: Variant) -> str | None:
        """Nothing beyond the generic checks."""
        return None


@dataclass(frozen=True)
class SwapEnds:
    """The first and the last option trade places; the middle ones stay."""

    name: str = "swap_ends"
    changes: frozenset[Attribute] = _ORDER

    def apply(self, variant: Variant, seed: int) -> Variant:
        """Swap the first and last positions (the seed is unused)."""
        order = list(range(len(variant.options)))
        order[0], order[-1] = order[-1], order[0]
        return permute(variant, order)

    def verify(self, before: Variant, after: Variant) -> str | None:
        """Nothing beyond the generic checks."""
        return None


@dataclass(frozen=True)
class Shuffle:
    """A seeded permutation other than the identity (an unchanged order would measure nothing)."""

    name: str = "shuffle"
    changes: frozenset[Attribute] = _ORDER

    def apply(self, variant: Variant, seed: int) -> Variant:
        """Draw the permutation from ``random.Random(seed)``, redrawing while it is the identity."""
        rng = random.Random(seed)
        identity = list(range(len(variant.options)))
        order = identity[:]
        while order == identity and len(order) > 1:
            rng.shuffle(order)
        return permute(variant, order)

    def verify(self, before: Variant, after: Variant) -> str | None:
        """The order must have changed."""
        if len(before.options) > 1 and after.canonical == before.canonical:
            return "the shuffled order equals the original order"
        return None


# The ops a condition set names (``op: reverse``): prism.conditions.perturbations.ops builds them from here.
register_op(Op("reverse", lambda spec, library: Reverse(), Reverse))
register_op(Op("rotate", lambda spec, library: Rotate(by=count_of(spec, "rotate", 1) or 1), Rotate))
register_op(Op("swap_ends", lambda spec, library: SwapEnds(), SwapEnds))
register_op(Op("shuffle", lambda spec, library: Shuffle(), Shuffle))
