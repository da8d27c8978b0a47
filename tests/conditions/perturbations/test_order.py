from __future__ import annotations

import pytest

from conditions.perturbations.helpers import PLAIN, base, question
from prism.conditions.perturbations.order import Reverse, Rotate, Shuffle, SwapEnds
from prism.conditions.perturbations.variant import to_prompt


@pytest.mark.parametrize(
    ("step", "canonical"),
    [(Reverse(), "DCBA"), (Rotate(by=1), "DABC"), (Rotate(by=2), "CDAB"), (SwapEnds(), "DBCA")],
)
def test_fixed_orders_move_each_option_with_its_canonical_label(step, canonical) -> None:
    q = question()
    after = step.apply(base(q), seed=0)
    assert after.canonical == tuple(canonical)
    assert after.options == tuple(q.options["ABCD".index(c)] for c in canonical)
    assert after.labels == ("A", "B", "C", "D")  # only the order changes


def test_under_reverse_displayed_b_is_canonical_c() -> None:
    prompt = to_prompt(Reverse().apply(base(), 0), "reverse", "1")
    assert prompt.canonical_for("B") == "C"
    assert "A. volume\nB. weight\nC. speed\nD. mass" in prompt.text


def test_shuffle_is_seeded_and_never_the_identity() -> None:
    start = base()
    seen = set()
    for seed in range(200):
        after = Shuffle().apply(start, seed)
        assert after == Shuffle().apply(start, seed)
        assert after.canonical != start.canonical
        assert sorted(after.canonical) == ["A", "B", "C", "D"]
        seen.add(after.canonical)
    assert len(seen) == 23  # every permutation of four but the identity turns up


def test_steps_never_mutate_their_input() -> None:
    start = base()
    snapshot = (start.options, start.canonical)
    for step in (Reverse(), Rotate(), SwapEnds(), Shuffle()):
        step.apply(start, 3)
    assert (start.options, start.canonical) == snapshot
    assert start.format == PLAIN
