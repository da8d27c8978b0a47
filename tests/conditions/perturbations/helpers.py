"""Small builders shared by the perturbation tests."""

from __future__ import annotations

from prism.conditions.perturbations.variant import Format, Variant, base_variant
from prism.types import Question

PLAIN = Format(layout="{question}\n\n{options}\n\n{closing}")
CLOSING = "Return only the {kind} of the correct option."
LETTER_CLOSING = "Return only the letter of the correct option."


def question(
    stem: str = "A ball rolls 20 meters in 5 seconds. Which quantity describes how fast the ball moves?",
    options: tuple[str, ...] = ("mass", "speed", "weight", "volume"),
    answer: str = "B",
    qid: str = "q1",
) -> Question:
    return Question(qid, stem, options, tuple("ABCDEFGH"[: len(options)]), answer, "arc_challenge", "test")


def base(q: Question | None = None) -> Variant:
    return base_variant(q or question(), PLAIN, LETTER_CLOSING)
