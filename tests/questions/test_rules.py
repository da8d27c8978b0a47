"""The named dataset rules, the text id and the repeated-option rule, on their own."""

from __future__ import annotations

from prism.questions.mapping import Item
from prism.questions.rules import RULES, numeric_labels, repeated_options, seeded_option_order, text_id


def _item(labels: tuple[str, ...] | None, answer: object) -> Item:
    return Item(None, "Q?", ("w", "x", "y", "z")[: len(labels or "abcd")], labels, answer, None)


def test_numeric_labels_become_letters_by_position_with_the_answer() -> None:
    assert numeric_labels(_item(("1", "2", "3", "4"), "3")) == _item(("A", "B", "C", "D"), "C")
    assert numeric_labels(_item(("1", "2", "3"), "1")).answer == "A"
    unchanged = _item(("A", "B", "C", "D"), "B")
    assert numeric_labels(unchanged) is unchanged
    assert numeric_labels(_item(("1", "2", "3", "4"), "7")).answer == "7"  # left for the answer check to name


def test_seeded_option_order_is_a_pure_function_of_seed_and_id() -> None:
    options = ("right", "a", "b", "c")
    shuffled, answer = seeded_option_order(options, 0, 5, "q1")
    assert shuffled[answer] == "right" and sorted(shuffled) == sorted(options)
    assert seeded_option_order(options, 0, 5, "q1") == (shuffled, answer)
    orders = {seeded_option_order(options, 0, seed, "q1")[0] for seed in range(20)}
    assert len(orders) > 5


def test_text_id_ignores_option_order_and_hashes_the_group_only_when_there_is_one() -> None:
    base = text_id("sciq", "Q?", ("a", "b", "c"), None)
    assert base == text_id("sciq", "Q?", ("c", "a", "b"), None) and base.startswith("sciq-") and len(base) == 21
    assert text_id("sciq", "Q?", ("a", "b", "c"), "g1") != base != text_id("sciq", "Q!", ("a", "b", "c"), None)
    assert text_id("mmlu", "Q?", ("a", "b", "c"), "g1") != text_id("mmlu", "Q?", ("a", "b", "c"), "g2")


def test_repeated_options_compare_case_and_space_insensitively() -> None:
    assert repeated_options(("R", "rr", "Rr", "RR"))
    assert repeated_options(("a", " A "))
    assert not repeated_options(("a", "b"))
    assert set(RULES) == {"numeric_labels", "seeded_option_order"}
