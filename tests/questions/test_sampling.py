"""Seeded samples: plain and stratified across groups, both prefix-stable."""

from __future__ import annotations

from collections import Counter

import pytest

from prism.questions import DataError, freeze, freeze_stratified
from prism.types import Question


def _pool(sizes: dict[str, int]) -> list[Question]:
    return [Question(f"{group}-{i}", "s", ("a", "b"), ("A", "B"), "A", "d", "test", group)
            for group, size in sizes.items() for i in range(size)]


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_stratified_sample_is_as_even_as_possible_with_a_seeded_remainder(seed: int) -> None:
    pool = _pool({"a": 30, "b": 30, "c": 30, "d": 30, "e": 30})
    sample = freeze_stratified(pool, 13, seed)
    counts = Counter(q.group for q in sample)
    assert sorted(counts.values()) == [2, 2, 3, 3, 3] and len(set(q.question_id for q in sample)) == 13
    assert sample == freeze_stratified(list(reversed(pool)), 13, seed)  # source order does not matter


def test_stratified_remainder_goes_to_different_groups_for_different_seeds() -> None:
    pool = _pool({g: 10 for g in "abcdefgh"})
    extra = {seed: frozenset(g for g, c in Counter(q.group for q in freeze_stratified(pool, 11, seed)).items()
                             if c == 2) for seed in range(6)}
    assert all(len(groups) == 3 for groups in extra.values()) and len(set(extra.values())) > 1


def test_a_small_group_gives_all_it_has_and_the_others_share_its_shortfall() -> None:
    sample = freeze_stratified(_pool({"big1": 50, "big2": 50, "tiny": 2}), 20, 0)
    assert Counter(q.group for q in sample) == {"tiny": 2, "big1": 9, "big2": 9}


def test_a_larger_n_extends_the_smaller_sample() -> None:
    pool = _pool({"a": 12, "b": 5, "c": 9})
    for n in range(1, 26):
        assert freeze_stratified(pool, n + 1, 4)[:n] == freeze_stratified(pool, n, 4)
        assert freeze(pool, n + 1, 4)[:n] == freeze(pool, n, 4)


def test_within_a_group_the_ranking_is_the_plain_one() -> None:
    pool = _pool({"a": 20, "b": 20})
    sample = freeze_stratified(pool, 10, 2)
    assert [q for q in sample if q.group == "a"] == freeze([q for q in pool if q.group == "a"], 5, 2)


def test_n_out_of_range_and_questions_without_a_group_are_refused() -> None:
    with pytest.raises(DataError, match=r"n=4 .*pool of 3 eligible"):
        freeze_stratified(_pool({"a": 3}), 4, 0)
    plain = [Question("q", "s", ("a", "b"), ("A", "B"), "A", "d", "test")]
    with pytest.raises(DataError, match="'q' has no group to stratify by"):
        freeze_stratified(plain, 1, 0)
