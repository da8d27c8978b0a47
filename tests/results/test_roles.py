"""prism.results.roles and prism.compare.role_tables: a role follows from the reference answers, a reading from
the verdict."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from prism.compare.role_tables import UNTESTED, roles_note, roles_table
from prism.compare.tables import ModelCells
from prism.results.roles import CAUSAL, INVARIANT, invariant_conditions, references, role_table, step_role


def _cells(rows: list[tuple[str, str, str | None, str | None]]) -> pd.DataFrame:
    """(question, condition, answer, correct_answer) -> scored-like cells, one repetition."""
    return pd.DataFrame([{"question_id": q, "condition": c, "repetition": 0, "answer": a, "correct_answer": k}
                         for q, c, a, k in rows])


CELLS = _cells([("q1", "P0", "B", "B"), ("q2", "P0", "A", "C"),
                ("q1", "reverse", "B", "B"), ("q2", "reverse", "C", "C"),
                ("q1", "missing", "E", "E"), ("q2", "missing", "A", "E")])


def test_a_step_is_causal_exactly_when_the_reference_moves_for_some_question() -> None:
    refs = references(CELLS)
    assert step_role(refs, "P0", "reverse") == INVARIANT
    assert step_role(refs, "P0", "missing") == CAUSAL
    assert step_role(refs, "reverse", "missing") == CAUSAL
    table = role_table(CELLS, ["P0", "reverse", "missing"], "P0")
    assert table.to_dict("list") == {"condition": ["P0", "reverse", "missing"],
                                     "role": [INVARIANT, INVARIANT, CAUSAL], "moved_questions": [0, 0, 2]}
    assert invariant_conditions(table) == ["P0", "reverse"]


def test_one_moved_question_is_enough() -> None:
    cells = _cells([("q1", "P0", "B", "B"), ("q2", "P0", "C", "C"), ("q1", "x", "B", "B"), ("q2", "x", "E", "E")])
    assert role_table(cells, ["P0", "x"], "P0")["moved_questions"].tolist() == [0, 1]


def test_items_without_a_key_have_only_invariant_steps() -> None:
    cells = _cells([("q1", "P0", "B", None), ("q1", "x", "A", None)])
    assert role_table(cells, ["P0", "x"], "P0")["role"].tolist() == [INVARIANT, INVARIANT]


def test_two_keys_for_one_prompt_are_refused() -> None:
    cells = pd.concat([CELLS, _cells([("q1", "P0", "B", "C")])])
    with pytest.raises(ValueError, match="several reference answers under condition 'P0'"):
        references(cells)


def _shifts(rows: list[tuple[str, bool, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"model": "m", "from_condition": "P0", "to_condition": to, "measure": "answer", "shift": s,
                          "p_holm": p} for to, s, p in rows])


def test_each_role_and_verdict_reads_as_one_of_four_and_an_untested_step_says_so() -> None:
    model = ModelCells("m", "r1", ("P0", "reverse", "missing"), CELLS, families={"reverse": "option_order"})
    table = roles_table([model], _shifts([("reverse", True, 0.01), ("missing", False, 0.4)]))
    assert table["reading"].tolist() == ["spurious", "missed"]
    assert table["axis"].tolist() == ["option_order", ""]
    # followed: of the missing condition's answers on moved questions, the share that is the new key (1 of 2).
    assert table.loc[1, "followed"] == 0.5 and table.loc[1, "followed_n"] == 2
    assert math.isnan(table.loc[0, "followed"])
    table = roles_table([model], _shifts([("reverse", False, 0.5), ("missing", True, 0.001)]))
    assert table["reading"].tolist() == ["stable", "expected"]
    untested = roles_table([model], _shifts([("missing", False, math.nan)]))
    assert untested["reading"].tolist() == [UNTESTED]
    assert "no permutation test without repetitions" in roles_note(untested)
    assert "leave their conditions out" in roles_note(untested)
