from __future__ import annotations

import math

import pandas as pd
import pytest

from prism.results.consistency import consistency_metrics, consistency_summary, pairs, question_consistency

FAMILIES = {"P0": "baseline", "reverse": "order", "shuffle": "order", "numbers": "labels"}


def rec(qid: str, condition: str, answer: str | None, repetition: int = 0, error: str | None = None) -> dict:
    return {"question_id": qid, "condition": condition, "repetition": repetition, "answer": answer, "error": error}


def frame(*records: dict) -> pd.DataFrame:
    return pd.DataFrame(list(records))


def test_unknown_is_an_outcome_of_its_own_and_failures_are_not_compared() -> None:
    scored = frame(
        rec("q1", "P0", "C"), rec("q1", "reverse", "C"), rec("q1", "shuffle", None), rec("q1", "numbers", "C"),
        rec("q2", "P0", None), rec("q2", "reverse", None), rec("q2", "shuffle", "A"),
        rec("q2", "numbers", None, error="timeout"),
        rec("q3", "P0", None, error="timeout"), rec("q3", "reverse", "B"),
    )
    got = pairs(scored, FAMILIES, "P0").set_index(["question_id", "condition"])["consistent"].to_dict()
    assert got == {("q1", "reverse"): True, ("q1", "shuffle"): False, ("q1", "numbers"): True,
                   ("q2", "reverse"): True, ("q2", "shuffle"): False}
    table = question_consistency(scored, FAMILIES, "P0", ["q1", "q2", "q3"])
    assert table[["question_id", "family", "n_compared", "n_consistent"]].values.tolist() == [
        ["q1", "order", 2, 1], ["q1", "labels", 1, 1],
        ["q2", "order", 2, 1], ["q2", "labels", 0, 0],
        ["q3", "order", 0, 0], ["q3", "labels", 0, 0],
    ]
    assert table["consistency"].tolist()[:3] == [0.5, 1.0, 0.5]
    assert table["consistency"].isna().tolist() == [False, False, False, True, True, True]


def test_summary_and_metrics_per_family_and_variant() -> None:
    scored = frame(
        rec("q1", "P0", "A"), rec("q1", "reverse", "A"), rec("q1", "shuffle", "A"), rec("q1", "numbers", "B"),
        rec("q2", "P0", "B"), rec("q2", "reverse", "C"), rec("q2", "shuffle", "B"), rec("q2", "numbers", "B"),
        rec("q3", "P0", "D"), rec("q3", "reverse", "D"),  # shuffle and numbers never came back
    )
    summary = consistency_summary(scored, FAMILIES, "P0", ["q1", "q2", "q3"])
    rows = summary.set_index(["family", "variant"])
    # order: q1 2/2, q2 1/2, q3 1/1 -> mean 5/6; reverse 2/3, shuffle 2/2.
    assert rows.loc[("order", ""), "consistency"] == pytest.approx(5 / 6)
    assert rows.loc[("order", ""), "n_questions"] == 3 and rows.loc[("order", ""), "n_compared"] == 5
    assert rows.loc[("order", "reverse"), "consistency"] == pytest.approx(2 / 3)
    assert rows.loc[("order", "shuffle"), "consistency"] == 1.0
    assert rows.loc[("labels", ""), "consistency"] == 0.5 and rows.loc[("labels", "numbers"), "n_questions"] == 2
    assert consistency_metrics(summary) == pytest.approx({
        "consistency/order": 5 / 6, "consistency/order/reverse": 2 / 3, "consistency/order/shuffle": 1.0,
        "consistency/labels": 0.5, "consistency/labels/numbers": 0.5,
    })


def test_repetitions_pair_with_the_baseline_of_the_same_repetition() -> None:
    scored = frame(rec("q1", "P0", "A", 0), rec("q1", "P0", "B", 1), rec("q1", "reverse", "B", 0),
                   rec("q1", "reverse", "B", 1))
    table = question_consistency(scored, {"P0": "baseline", "reverse": "order"}, "P0", ["q1"])
    assert table["n_compared"].tolist() == [2] and table["consistency"].tolist() == [0.5]


def test_prism_instruction_family_and_no_records() -> None:
    families = {"P0": "baseline", "P1": "instruction", "P2": "instruction"}
    empty = pd.DataFrame(columns=["question_id", "condition", "repetition", "answer", "error"])
    summary = consistency_summary(empty, families, "P0", ["q1"])
    assert summary[["family", "variant"]].values.tolist() == [["instruction", ""], ["instruction", "P1"],
                                                               ["instruction", "P2"]]
    assert all(math.isnan(v) for v in consistency_metrics(summary).values())


def test_a_record_of_a_condition_without_family_is_refused() -> None:
    with pytest.raises(ValueError, match="without a family"):
        pairs(frame(rec("q1", "P0", "A"), rec("q1", "P9", "A")), FAMILIES, "P0")
