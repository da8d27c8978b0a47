from __future__ import annotations

import random
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conditions.perturbations.helpers import base, question
from prism.conditions.perturbations.spelling import NestedTypos, Typos, add_typos, spelling_problem, typo_candidates

UNITS = frozenset({"meters", "seconds", "grams"})


def test_typo_candidates_keep_first_and_last_letters() -> None:
    found = typo_candidates("speed")
    assert "sped" in found and "speeed" in found and "sepd" not in found  # "sepd" would move the first e...
    assert all(c[0] == "s" and c[-1] == "d" and c != "speed" for c in found)
    assert "spede" not in found  # ... and the last letter never moves


def test_typos_never_touch_numbers_units_or_capitalised_abbreviations() -> None:
    stem = "A ball rolls 20 meters in 5 seconds; DNA and NaCl stay. Which quantity describes 3.5 grams best?"
    for seed in range(100):
        after = add_typos(stem, 10, random.Random(seed), UNITS)
        for kept in ("20", "meters", "5", "seconds", "DNA", "NaCl", "3.5", "grams", "and", "A"):
            assert re.search(rf"(?<!\w){re.escape(kept)}(?!\w)", after), (kept, after)
        assert spelling_problem(stem, after, UNITS) is None


def test_typos_respect_count_and_keep_white_space() -> None:
    stem = "Which  process\tchanges liquid water\ninto water vapor?"
    after = add_typos(stem, 1, random.Random(0), frozenset())
    changed = [a for a, b in zip(stem.split(), after.split(), strict=True) if a != b]
    assert len(changed) == 1
    assert re.sub(r"\S", "", stem) == re.sub(r"\S", "", after)  # the same white space in the same places


def test_step_puts_typos_in_instruction_and_stem_only() -> None:
    start = base()
    start = type(start)(**{**start.__dict__, "instruction": "Answer the following question carefully."})
    after = Typos(2, UNITS).apply(start, 11)
    assert start.changed_fields(after) == {"instruction", "stem"}
    assert Typos(2, UNITS).verify(start, after) is None


@pytest.mark.parametrize(
    ("after", "message"),
    [
        ("A ball rolls 20 meterz in 5 seconds.", "may not be edited"),  # the unit after a number
        ("A ball rolls 20 meters in 5 secnods.", "may not be edited"),  # a protected unit
        ("A ball rolls 21 meters in 5 seconds.", "may not be edited"),
        ("A ball rolls 20 meters ni 5 seconds.", "may not be edited"),  # "in" is too short to touch
        ("A ball orlls 20 meters in 5 seconds.", "not one readable typo"),  # the first letter moved
        ("A ball rols. 20 meters in 5 seconds.", "not one readable typo"),  # punctuation added
        ("A ball rolls 20 meters in five seconds.", "may not be edited"),
        ("A ball rolls 20 meters in 5 seconds. Extra", "word count"),
    ],
)
def test_spelling_problem_names_what_a_typo_may_not_do(after: str, message: str) -> None:
    assert message in spelling_problem("A ball rolls 20 meters in 5 seconds.", after, UNITS)


@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=120),
       st.integers(0, 2**32), st.integers(1, 5))
def test_add_typos_always_passes_its_own_check(text: str, seed: int, count: int) -> None:
    after = add_typos(text, count, random.Random(seed), UNITS)
    assert spelling_problem(text, after, UNITS) is None
    assert re.findall(r"\d+", after) == re.findall(r"\d+", text)


def _dose_start() -> object:
    start = base()
    return type(start)(**{**start.__dict__, "instruction": "Answer the following question by selecting the option."})


def _typo_words(before: str, after: str) -> set[tuple[int, str]]:
    return {(i, b) for i, (a, b) in enumerate(zip(before.split(), after.split(), strict=True)) if a != b}


def test_nested_typos_put_exactly_count_typos_and_each_level_keeps_the_ones_below() -> None:
    start = _dose_start()
    levels = {k: NestedTypos(k, UNITS).apply(start, 5) for k in (1, 2, 4, 8)}
    edits = {}
    for k, after in levels.items():
        assert NestedTypos(k, UNITS).verify(start, after) is None
        assert start.changed_fields(after) <= {"instruction", "stem"}
        edits[k] = {("i", *e) for e in _typo_words(start.instruction, after.instruction)} | {
            ("s", *e) for e in _typo_words(start.stem, after.stem)}
        assert len(edits[k]) == k
    assert edits[1] < edits[2] < edits[4] < edits[8]  # the same typos, in the same words, plus more
    assert NestedTypos(4, UNITS).apply(start, 5) == levels[4]  # seeded
    assert NestedTypos(4, UNITS).apply(start, 6) != levels[4]


def test_nested_typos_refuse_a_question_without_room_for_the_dose() -> None:
    short = base(question(stem="Which metal rusts?", options=("iron", "gold", "tin", "lead"), answer="A"))
    after = NestedTypos(3, UNITS).apply(short, 0)  # "Which", "metal", "rusts" take one each; no instruction
    assert NestedTypos(3, UNITS).verify(short, after) is None
    problem = NestedTypos(4, UNITS).verify(short, NestedTypos(4, UNITS).apply(short, 0))
    assert problem is not None and "not exactly 4" in problem and "3 words that may take one" in problem
