"""The step contract: a pure, seeded function from one variant to the next that says what it may change."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from prism.conditions.perturbations.variant import Attribute, Variant


class Step(Protocol):
    """One perturbation step.

    ``apply`` must be a pure function of the variant and the seed (any randomness comes from
    ``random.Random(seed)``), and may change only the fields of the attributes in ``changes``; the checks
    in ``prism.conditions.perturbations.checks`` hold every step to both.
    """

    @property
    def name(self) -> str:
        """Short name for messages, e.g. ``relabel(numbers)``."""
        ...

    @property
    def changes(self) -> frozenset[Attribute]:
        """The attributes this step may change."""
        ...

    def apply(self, variant: Variant, seed: int) -> Variant:
        """Return the perturbed variant."""
        ...

    def verify(self, before: Variant, after: Variant) -> str | None:
        """Check what only this step knows about its own output; None when fine, else the problem."""
        ...


def step_seed(set_seed: int, condition: str, index: int, question_id: str) -> int:
    """The seed of one step on one question, derived from the run's seed by hashing.

    Hashing (not ``hash()``, which is salted per process) keeps it stable across machines and runs, and
    different for every condition, step position and question.
    """
    digest = hashlib.sha256(f"{set_seed}|{condition}|{index}|{question_id}".encode()).hexdigest()
    return int(digest[:16], 16)


def permute(variant: Variant, order: Sequence[int]) -> Variant:
    """Show the option at position ``order[p]`` at position ``p``; its canonical label travels with it."""
    return replace(
        variant,
        options=tuple(variant.options[i] for i in order),
        canonical=tuple(variant.canonical[i] for i in order),
    )
