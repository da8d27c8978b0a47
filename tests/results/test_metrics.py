from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prism.records import RawRecord
from prism.results.metrics import (
    QUESTION_METRIC_NAMES,
    RATE_NAMES,
    condition_table,
    parse_method_shares,
    question_summary,
    question_table,
    summary_metrics,
)
from prism.results.scoring import score_record
from prism.types import Parsed, Prompt

CONDITIONS = ["P0", "P1", "P2", "P3", "P4"]
FAIL = "<failed request>"  # a cell whose request failed
UNKNOWN = None  # an observed response the parser could not read


def records(
    question_id: str,
    answers: list[str | None],
    key: str,
    repetition: int = 0,
    conditions: list[str] = CONDITIONS,
    compliant: list[bool] | None = None,
) -> list[dict[str, Any]]:
    """Scored records of one question and repetition: one answer (a label, UNKNOWN or FAIL) per condition."""
    rows = []
    for i, (condition, answer) in enumerate(zip(conditions, answers, strict=True)):
        failed = answer == FAIL
        recovered = not failed and answer is not None
        rows.append(
            {
                "question_id": question_id,
                "condition": condition,
                "repetition": repetition,
                "answer": answer if recovered else None,
                "recovered": recovered,
                "compliant": recovered if compliant is None else compliant[i],
                "correct": recovered and answer == key,
                "correct_answer": key,
                "error": "timeout" if failed else None,
                "method": "failed" if failed else ("exact" if recovered else "none"),
            }
        )
    return rows


def frame(*groups: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame([row for group in groups for row in group])


def one_row(scored: pd.DataFrame, ids: list[str] | None = None, repetitions: int = 1) -> pd.Series:
    table = question_table(scored, CONDITIONS, ids or ["q1"], repetitions)
    return table.iloc[0]


def is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


# --- the seed document's worked examples ------------------------------------------------------


def test_four_of_five_agree_gives_agreement_point_eight() -> None:
    row = one_row(frame(records("q1", ["B", "B", "B", "B", "C"], key="B")))
    assert row["agreement"] == pytest.approx(0.8)
    assert row["prompt_sensitivity"] == pytest.approx(0.2)
    assert row["majority_answer"] == "B"
    assert row["majority_correct"]
    assert not row["unanimous"]
    assert not row["invariant_incorrect"]
    assert row["complete"]
    assert (row["n_observed"], row["n_recovered"]) == (5, 5)


def test_74_correct_of_100_gives_accuracy_point_74() -> None:
    groups = [records(f"q{i}", ["A"], key="A" if i < 74 else "B", conditions=["P0"]) for i in range(100)]
    scored = frame(*groups)
    table = condition_table(scored, ["P0"])
    assert table.loc[0, "accuracy"] == pytest.approx(0.74)
    metrics = summary_metrics(scored, ["P0"], [f"q{i}" for i in range(100)], 1)
    assert metrics["accuracy"] == pytest.approx(0.74)
    assert metrics["accuracy/P0"] == pytest.approx(0.74)
    assert metrics["n_responses"] == 100
    assert metrics["question_majority_accuracy"] == pytest.approx(0.74)


def test_same_wrong_answer_everywhere_is_prompt_invariant_incorrect() -> None:
    scored = frame(records("q1", ["B"] * 5, key="D"))
    row = one_row(scored)
    assert row["agreement"] == 1.0
    assert row["unanimous"]
    assert row["invariant_incorrect"]
    assert row["majority_answer"] == "B"
    assert not row["majority_correct"]
    metrics = summary_metrics(scored, CONDITIONS, ["q1"], 1)
    assert metrics["prompt_invariant_incorrect_rate"] == 1.0
    assert metrics["answer_unanimous_rate"] == 1.0
    assert metrics["question_majority_accuracy"] == 0.0
    assert metrics["accuracy"] == 0.0


def test_same_right_answer_everywhere_is_unanimous_not_invariant_incorrect() -> None:
    row = one_row(frame(records("q1", ["D"] * 5, key="D")))
    assert row["unanimous"]
    assert not row["invariant_incorrect"]
    assert row["majority_correct"]


# --- ties, UNKNOWN, failures, missing questions ---------------------------------------------------


def test_a_tie_has_no_majority() -> None:
    scored = frame(records("q1", ["B", "B", "C", "C", UNKNOWN], key="B"))
    row = one_row(scored)
    assert row["majority_answer"] is None
    assert not row["majority_correct"]
    assert row["agreement"] == pytest.approx(0.5)  # UNKNOWN is left out: 2 of 4 recovered
    assert row["n_recovered"] == 4
    assert row["complete"]
    assert not row["unanimous"]
    assert summary_metrics(scored, CONDITIONS, ["q1"], 1)["question_majority_accuracy"] == 0.0


def test_a_three_way_split_with_a_leader_has_a_majority() -> None:
    row = one_row(frame(records("q1", ["A", "A", "B", "C", UNKNOWN], key="C")))
    assert row["majority_answer"] == "A"
    assert row["agreement"] == pytest.approx(0.5)
    assert not row["majority_correct"]


def test_one_recovered_answer_among_unknowns_is_a_majority_but_not_unanimous() -> None:
    row = one_row(frame(records("q1", [UNKNOWN, UNKNOWN, "C", UNKNOWN, UNKNOWN], key="C")))
    assert row["agreement"] == 1.0
    assert row["majority_answer"] == "C"
    assert row["majority_correct"]
    assert not row["unanimous"]  # unanimity needs every condition recovered


def test_all_unknown_question_has_no_agreement_but_is_complete() -> None:
    scored = frame(
        records("q1", [UNKNOWN] * 5, key="A"),
        records("q2", ["B", "B", "B", "B", "C"], key="B"),
    )
    row = one_row(scored, ["q1", "q2"])
    assert is_nan(row["agreement"])
    assert is_nan(row["prompt_sensitivity"])
    assert row["majority_answer"] is None
    assert row["n_recovered"] == 0
    assert row["n_observed"] == 5
    assert row["complete"]
    assert not row["unanimous"]
    metrics = summary_metrics(scored, CONDITIONS, ["q1", "q2"], 1)
    assert metrics["mean_agreement"] == pytest.approx(0.8)  # q1 left out
    assert metrics["mean_prompt_sensitivity"] == pytest.approx(0.2)
    assert metrics["complete_questions"] == 2
    # q1 has no majority, which counts as not correct.
    assert metrics["question_majority_accuracy"] == pytest.approx(0.5)
    assert metrics["answer_recovery_rate"] == pytest.approx(0.5)
    assert metrics["unknown_rate"] == pytest.approx(0.5)
    assert metrics["accuracy"] == pytest.approx(0.4)
    assert metrics["conditional_accuracy"] == pytest.approx(0.8)


def test_no_recovered_answer_anywhere_gives_nan_agreement_and_conditional_accuracy() -> None:
    scored = frame(records("q1", [UNKNOWN] * 5, key="A"))
    metrics = summary_metrics(scored, CONDITIONS, ["q1"], 1)
    assert is_nan(metrics["mean_agreement"])
    assert is_nan(metrics["mean_prompt_sensitivity"])
    assert is_nan(metrics["conditional_accuracy"])
    assert is_nan(metrics["conditional_accuracy/P2"])
    assert metrics["accuracy"] == 0.0
    assert metrics["unknown_rate"] == 1.0


def test_failed_requests_are_excluded_everywhere_and_make_the_question_incomplete() -> None:
    scored = frame(
        records("q1", ["B", "B", FAIL, "B", "B"], key="B"),
        records("q2", ["A", "A", "A", "A", "A"], key="B"),
    )
    row = one_row(scored, ["q1", "q2"])
    assert row["n_observed"] == 4
    assert row["agreement"] == 1.0
    assert not row["complete"]
    assert not row["unanimous"]  # P2 never answered
    assert row["majority_correct"]

    table = condition_table(scored, CONDITIONS).set_index("condition")
    assert table.loc["P2", "n_observed"] == 1
    assert table.loc["P2", "n_failed"] == 1
    assert table.loc["P2", "accuracy"] == 0.0  # 0 of the 1 observed, the failure is not a wrong answer
    assert table.loc["P0", "accuracy"] == 0.5

    metrics = summary_metrics(scored, CONDITIONS, ["q1", "q2"], 1)
    assert metrics["n_responses"] == 9
    assert metrics["accuracy"] == pytest.approx(4 / 9)
    assert metrics["answer_recovery_rate"] == 1.0
    assert metrics["complete_questions"] == 1
    assert metrics["answer_unanimous_rate"] == pytest.approx(0.5)
    assert metrics["prompt_invariant_incorrect_rate"] == pytest.approx(0.5)


def test_a_retried_cell_counts_its_observed_response_only() -> None:
    retried = records("q1", ["B"], key="B", conditions=["P2"])
    scored = frame(records("q1", ["B", "B", FAIL, "B", "B"], key="B"), retried)
    row = one_row(scored)
    assert row["complete"]
    assert row["unanimous"]
    assert summary_metrics(scored, CONDITIONS, ["q1"], 1)["n_responses"] == 5


def test_a_condition_with_only_failures_has_nan_rates() -> None:
    scored = frame(records("q1", ["B", "B", "B", "B", FAIL], key="B"))
    table = condition_table(scored, CONDITIONS).set_index("condition")
    for name in RATE_NAMES:
        assert is_nan(table.loc["P4", name])
    assert table.loc["P4", "n_observed"] == 0
    metrics = summary_metrics(scored, CONDITIONS, ["q1"], 1)
    assert is_nan(metrics["accuracy/P4"])
    assert metrics["accuracy"] == 1.0


def test_questions_without_records_count_in_the_denominators() -> None:
    scored = frame(records("q1", ["C"] * 5, key="C"))
    ids = ["q1", "q2", "q3", "q4"]
    table = question_table(scored, CONDITIONS, ids, 1)
    assert list(table["question_id"]) == ids
    empty = table.iloc[1]
    assert empty["n_observed"] == 0
    assert empty["correct_answer"] is None
    assert is_nan(empty["agreement"])
    assert not empty["complete"]
    metrics = summary_metrics(scored, CONDITIONS, ids, 1)
    assert metrics["n_questions"] == 4
    assert metrics["question_majority_accuracy"] == pytest.approx(0.25)
    assert metrics["answer_unanimous_rate"] == pytest.approx(0.25)
    assert metrics["complete_questions"] == 1
    assert metrics["mean_agreement"] == 1.0
    assert metrics["accuracy"] == 1.0  # response-level rates are over observed responses only


def test_an_empty_run_without_columns() -> None:
    metrics = summary_metrics(pd.DataFrame(), CONDITIONS, ["q1", "q2"], 2)
    assert metrics["n_questions"] == 2
    assert metrics["n_responses"] == 0
    assert metrics["complete_questions"] == 0
    assert metrics["question_majority_accuracy"] == 0.0
    assert is_nan(metrics["accuracy"])
    assert is_nan(metrics["mean_agreement"])
    assert len(question_table(pd.DataFrame(), CONDITIONS, ["q1", "q2"], 2)) == 4


def test_compliance_rate() -> None:
    scored = frame(
        records("q1", ["B", "B", UNKNOWN, "B", "C"], key="B", compliant=[True, False, False, True, True]),
    )
    table = condition_table(scored, CONDITIONS).set_index("condition")
    assert list(table["instruction_compliance_rate"]) == [1.0, 0.0, 0.0, 1.0, 1.0]
    assert summary_metrics(scored, CONDITIONS, ["q1"], 1)["instruction_compliance_rate"] == pytest.approx(0.6)


def test_condition_table_shape_and_order() -> None:
    scored = frame(records("q1", ["B", "B", "B", "B", "C"], key="B"))
    table = condition_table(scored, ["P4", "P0", "P1", "P2", "P3"])
    assert list(table["condition"]) == ["P4", "P0", "P1", "P2", "P3"]
    assert list(table.columns) == [
        "condition",
        "n_observed",
        "n_recovered",
        "n_correct",
        "n_compliant",
        "n_failed",
        *RATE_NAMES,
    ]
    assert table.loc[0, "accuracy"] == 0.0
    assert table.loc[0, "conditional_accuracy"] == 0.0


def test_summary_has_exactly_the_logged_keys() -> None:
    scored = frame(records("q1", ["B", "B", "B", "B", "C"], key="B"))
    metrics = summary_metrics(scored, CONDITIONS, ["q1"], 1)
    expected = {*RATE_NAMES, *(f"{n}/{c}" for n in RATE_NAMES for c in CONDITIONS), *QUESTION_METRIC_NAMES}
    assert set(metrics) == expected
    assert all(isinstance(value, float) for value in metrics.values())


def test_parse_method_shares_count_observed_responses_and_name_every_method() -> None:
    scored = frame(records("q1", ["B", None, FAIL, "B", "C"], key="B"))
    scored["method"] = ["exact", "none", "failed", "statement", "exact"]
    shares = parse_method_shares(scored, ("exact", "statement", "none", "truncated"))
    assert shares == {"parse_method/exact": 2 / 4, "parse_method/statement": 1 / 4, "parse_method/none": 1 / 4,
                      "parse_method/truncated": 0.0}
    empty = parse_method_shares(scored.iloc[0:0], ("exact",))
    assert math.isnan(empty["parse_method/exact"])


# --- several repetitions ---------------------------------------------------------------------------


def test_repetitions_are_averaged_per_question_then_over_questions() -> None:
    scored = frame(
        records("q1", ["B"] * 5, key="B", repetition=0),  # agreement 1, unanimous
        records("q1", ["B", "B", "B", "B", "C"], key="B", repetition=1),  # agreement 0.8
        records("q2", [UNKNOWN] * 5, key="D", repetition=0),  # agreement NaN: ignored
        records("q2", ["C", "C", "D", "D", "C"], key="D", repetition=1),  # agreement 0.6, majority wrong
        records("q3", ["A", "A", "A", "A", FAIL], key="A", repetition=0),
        records("q3", ["A"] * 5, key="A", repetition=1),
    )
    ids = ["q1", "q2", "q3"]
    table = question_table(scored, CONDITIONS, ids, 2)
    assert list(zip(table["question_id"], table["repetition"], strict=True)) == [
        ("q1", 0),
        ("q1", 1),
        ("q2", 0),
        ("q2", 1),
        ("q3", 0),
        ("q3", 1),
    ]
    per_question = question_summary(table).set_index("question_id")
    assert per_question.loc["q1", "agreement"] == pytest.approx(0.9)
    assert per_question.loc["q2", "agreement"] == pytest.approx(0.6)
    assert per_question.loc["q3", "agreement"] == 1.0
    assert per_question.loc["q1", "unanimous_rate"] == 0.5
    assert per_question.loc["q3", "unanimous_rate"] == 0.5  # rep 0 missed P4
    assert per_question.loc["q2", "majority_correct_rate"] == 0.0
    assert list(per_question["complete"]) == [True, True, False]  # q3 misses one cell

    metrics = summary_metrics(scored, CONDITIONS, ids, 2)
    assert metrics["mean_agreement"] == pytest.approx((0.9 + 0.6 + 1.0) / 3)
    assert metrics["mean_prompt_sensitivity"] == pytest.approx(1 - (0.9 + 0.6 + 1.0) / 3)
    assert metrics["question_majority_accuracy"] == pytest.approx((1.0 + 0.0 + 1.0) / 3)
    assert metrics["answer_unanimous_rate"] == pytest.approx((0.5 + 0.0 + 0.5) / 3)
    assert metrics["prompt_invariant_incorrect_rate"] == 0.0
    assert metrics["complete_questions"] == 2
    assert metrics["n_responses"] == 29


def test_a_repetition_with_no_records_makes_the_question_incomplete() -> None:
    scored = frame(records("q1", ["B"] * 5, key="B", repetition=0))
    metrics = summary_metrics(scored, CONDITIONS, ["q1"], 2)
    assert metrics["complete_questions"] == 0
    assert metrics["mean_agreement"] == 1.0  # the empty repetition's NaN is ignored
    assert metrics["answer_unanimous_rate"] == 0.5


# --- refusing inconsistent input ---------------------------------------------------------------------


def test_refuses_two_observed_records_in_one_cell() -> None:
    scored = frame(records("q1", ["B"] * 5, key="B"), records("q1", ["C"], key="B", conditions=["P0"]))
    with pytest.raises(ValueError, match="more than one observed record"):
        question_table(scored, CONDITIONS, ["q1"], 1)
    with pytest.raises(ValueError, match="more than one observed record"):
        condition_table(scored, CONDITIONS)


@pytest.mark.parametrize(
    ("ids", "repetitions", "match"),
    [(["q2"], 1, "not in the frozen set"), (["q1"], 0, "at least 1")],
)
def test_refuses_records_outside_the_run(ids: list[str], repetitions: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        question_table(frame(records("q1", ["B"] * 5, key="B")), CONDITIONS, ids, repetitions)


def test_refuses_repetition_out_of_range() -> None:
    scored = frame(records("q1", ["B"] * 5, key="B", repetition=1))
    with pytest.raises(ValueError, match="repetition"):
        question_table(scored, CONDITIONS, ["q1"], 1)


def test_refuses_unlisted_conditions_and_missing_columns() -> None:
    scored = frame(records("q1", ["B"] * 5, key="B"))
    with pytest.raises(ValueError, match="not in"):
        condition_table(scored, CONDITIONS[:4])
    with pytest.raises(ValueError, match="lack the columns"):
        condition_table(scored.drop(columns=["error"]), CONDITIONS)


def test_refuses_contradictory_flags() -> None:
    scored = frame(records("q1", ["B"] * 5, key="B"))
    scored.loc[0, "correct"] = False
    with pytest.raises(ValueError, match="correct =="):
        condition_table(scored, CONDITIONS)
    scored = frame(records("q1", ["B"] * 5, key="B"))
    scored.loc[0, "answer"] = None
    with pytest.raises(ValueError, match="answer exactly when recovered"):
        condition_table(scored, CONDITIONS)
    other_key = records("q1", ["B"], key="C", repetition=1, conditions=["P0"])
    scored = frame(records("q1", ["B"] * 5, key="B"), other_key)
    with pytest.raises(ValueError, match="several correct answers"):
        question_table(scored, CONDITIONS, ["q1"], 2)


# --- records straight from scoring -------------------------------------------------------------------


def test_metrics_read_score_record_output() -> None:
    prompt_args: dict[str, Any] = {
        "text": "...",
        "displayed_options": ("w", "x", "y", "z"),
        "template_version": "1",
    }
    rows = []
    for condition, displayed, canonical, response in [
        ("P0", ("A", "B", "C", "D"), ("A", "B", "C", "D"), "B"),
        ("P1", ("A", "B", "C", "D"), ("B", "A", "D", "C"), "A"),  # reordered: displayed A is canonical B
        ("P2", ("1", "2", "3", "4"), ("A", "B", "C", "D"), "2"),
        ("P3", ("A", "B", "C", "D"), ("A", "B", "C", "D"), None),  # failed request
        ("P4", ("A", "B", "C", "D"), ("A", "B", "C", "D"), "hmm"),  # UNKNOWN
    ]:
        prompt = Prompt(
            "q1", condition, displayed_labels=displayed, canonical_labels=canonical, **prompt_args
        )
        raw = RawRecord(
            question_id="q1", dataset="d", split="test", condition=condition, repetition=0, prompt=prompt.text,
            prompt_sha256=prompt.sha256, response=response, model="m", model_digest="x", backend="replay",
            generation={}, backend_options={}, latency_s=None, prompt_tokens=None, completion_tokens=None,
            timestamp="t", template_version="1", protocol_version="1", cached=False,
            error="timeout" if response is None else None,
        )
        if response is None:
            parsed = None
        elif response in displayed:
            parsed = Parsed(response, True, True, "exact")
        else:
            parsed = Parsed(None, False, False, "none")
        rows.append(score_record(raw, prompt, parsed, "B", "1").to_json())
    row = one_row(pd.DataFrame(rows))
    assert (row["n_observed"], row["n_recovered"], row["agreement"]) == (4, 3, 1.0)
    assert row["majority_answer"] == "B"
    assert not row["complete"]


# --- properties ----------------------------------------------------------------------------------------

LABELS = ["A", "B", "C", "D"]


@st.composite
def runs(draw: st.DrawFn) -> tuple[pd.DataFrame, list[str], list[str], int]:
    k = draw(st.integers(1, 6))
    conditions = [f"P{i}" for i in range(k)]
    n_questions = draw(st.integers(0, 4))
    ids = [f"q{i}" for i in range(n_questions)]
    repetitions = draw(st.integers(1, 3))
    outcome = st.sampled_from([*LABELS, UNKNOWN, FAIL, "missing"])
    groups = []
    for qid in ids:
        key = draw(st.sampled_from(LABELS))
        for repetition in range(repetitions):
            answers = [draw(outcome) for _ in conditions]
            kept = [(c, a) for c, a in zip(conditions, answers, strict=True) if a != "missing"]
            groups.append(records(qid, [a for _, a in kept], key, repetition, [c for c, _ in kept]))
            # Retried cells: earlier failed attempts stay in the store next to whatever came after.
            retried = draw(st.lists(st.sampled_from(conditions), max_size=2, unique=True))
            groups.append(records(qid, [FAIL] * len(retried), key, repetition, retried))
    rows = [row for group in groups for row in group]
    return pd.DataFrame(rows), conditions, ids, repetitions


def reference_row(rows: list[dict[str, Any]], k: int) -> dict[str, Any]:
    """The per-(question, repetition) quantities, computed naively from their definitions."""
    observed = [r for r in rows if pd.isna(r["error"])]
    answers = Counter(r["answer"] for r in observed if r["recovered"])
    n_recovered = sum(answers.values())
    top = max(answers.values(), default=0)
    leaders = [a for a, n in answers.items() if n == top]
    majority = leaders[0] if n_recovered and len(leaders) == 1 else None
    key = rows[0]["correct_answer"] if rows else None
    unanimous = n_recovered == k and len(answers) == 1
    return {
        "n_observed": len(observed),
        "n_recovered": n_recovered,
        "agreement": top / n_recovered if n_recovered else math.nan,
        "majority_answer": majority,
        "majority_correct": majority is not None and majority == key,
        "unanimous": unanimous,
        "invariant_incorrect": unanimous and majority != key,
        "complete": len({r["condition"] for r in observed}) == k,
    }


@settings(max_examples=200, deadline=None)
@given(runs())
def test_question_table_matches_the_definitions(run: tuple[pd.DataFrame, list[str], list[str], int]) -> None:
    scored, conditions, ids, repetitions = run
    k = len(conditions)
    table = question_table(scored, conditions, ids, repetitions)
    assert len(table) == len(ids) * repetitions
    for _, row in table.iterrows():
        if len(scored):
            same = (scored["question_id"] == row["question_id"]) & (scored["repetition"] == row["repetition"])
            cell = scored[same]
        else:
            cell = scored
        expected = reference_row(cell.to_dict("records"), k)
        for name, value in expected.items():
            if is_nan(value):
                assert is_nan(row[name]), name
            else:
                assert row[name] == value, name
        if row["n_recovered"]:
            assert 1 / k - 1e-12 <= row["agreement"] <= 1.0
            assert row["prompt_sensitivity"] == pytest.approx(1 - row["agreement"])
        if row["unanimous"]:
            assert row["agreement"] == 1.0
            assert row["complete"]
        if row["invariant_incorrect"]:
            assert row["unanimous"]


@settings(max_examples=200, deadline=None)
@given(runs())
def test_summary_properties(run: tuple[pd.DataFrame, list[str], list[str], int]) -> None:
    scored, conditions, ids, repetitions = run
    k = len(conditions)
    metrics = summary_metrics(scored, conditions, ids, repetitions)
    n_observed = int(scored["error"].isna().sum()) if len(scored) else 0
    assert metrics["n_responses"] == n_observed
    assert metrics["n_questions"] == len(ids)
    assert 0 <= metrics["complete_questions"] <= len(ids)
    for suffix in ["", *(f"/{c}" for c in conditions)]:
        accuracy, recovery = metrics[f"accuracy{suffix}"], metrics[f"answer_recovery_rate{suffix}"]
        if not is_nan(recovery):
            assert 0.0 <= accuracy <= recovery <= 1.0
            assert metrics[f"unknown_rate{suffix}"] == pytest.approx(1 - recovery)
    if not is_nan(metrics["mean_agreement"]):
        assert 1 / k - 1e-12 <= metrics["mean_agreement"] <= 1.0
        assert metrics["mean_prompt_sensitivity"] == pytest.approx(1 - metrics["mean_agreement"])
    for name in ["question_majority_accuracy", "answer_unanimous_rate", "prompt_invariant_incorrect_rate"]:
        if ids:
            assert 0.0 <= metrics[name] <= 1.0
    if ids:
        assert metrics["prompt_invariant_incorrect_rate"] <= metrics["answer_unanimous_rate"] + 1e-12
