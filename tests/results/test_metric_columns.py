"""The metrics' columns, gathered a scored record at a time as codes, are what pandas makes of the records."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pandas as pd
import pytest

from prism.results.metric_columns import LIKELIHOOD_COLUMNS, METRIC_COLUMNS, CodedColumn, MetricColumns


def _records() -> list[dict]:
    base = {"question_id": "q1", "condition": "P0", "repetition": 0, "answer": "A", "recovered": True,
            "compliant": True, "correct": True, "correct_answer": "A", "error": None, "method": "label",
            "response": "A", "cached": False}
    return [
        base,
        {**base, "condition": "P1", "answer": None, "recovered": False, "correct": False, "method": "unknown"},
        {**base, "question_id": "q2", "repetition": 1, "error": "timeout", "answer": None, "recovered": False,
         "compliant": False, "correct": False, "method": "failed"},
        # With label probabilities: only some records carry the likelihood fields.
        {**base, "question_id": "q3", "likelihood_answer": "B", "likelihood_correct": False, "label_mass": 0.5,
         "option_probs": {"A": 0.4, "B": 0.6}, "label_probs": {"A": 0.4, "B": 0.6}, "label_probs_source": "replay"},
    ]


def test_the_columns_are_the_frame_pandas_builds_from_the_records() -> None:
    records = _records()
    columns = MetricColumns()
    for record in records:
        columns.add(record)
    frame = columns.frame()
    expected = pd.DataFrame(records)[list(frame.columns)]
    pd.testing.assert_frame_equal(frame, expected)
    assert set(frame.columns) == {*METRIC_COLUMNS, *LIKELIHOOD_COLUMNS}
    assert math.isnan(frame.loc[0, "label_mass"])
    assert columns.label_probs
    assert [r["question_id"] for r in columns.bias_records] == ["q3"]


def test_without_likelihood_fields_their_columns_are_left_out_as_pandas_does() -> None:
    records = _records()[:3]
    columns = MetricColumns()
    for record in records:
        columns.add(record)
    frame = columns.frame()
    assert list(frame.columns) == list(METRIC_COLUMNS)
    pd.testing.assert_frame_equal(frame, pd.DataFrame(records)[list(METRIC_COLUMNS)])
    assert not columns.label_probs and columns.bias_records == []
    assert MetricColumns().frame().empty


def _frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    columns = MetricColumns()
    for record in records:
        columns.add(record)
    assert len(columns) == len(records)
    return columns.frame()


# Values of every kind a column of JSON records can hold, each kind pandas infers a dtype from on its own
# and in mixtures: equal in Python (True, 1, 1.0; 0.0, -0.0) yet not the same value in a frame.
_KINDS: dict[str, list[Any]] = {
    "strings": ["A", "B", "C"],
    "strings and null": ["A", "B", None],
    "null": [None],
    "integers": [0, 1, 7],
    "integers and null": [0, 3, None],
    "flags": [True, False],
    "flags and null": [True, False, None],
    "flags and integers": [True, 1, 0, False],
    "floats": [0.0, -0.0, 1.0, 0.5],
    "floats and integers": [1, 1.0, 2],
    "strings and integers": ["1", 1],
    "unhashable": [["A"], {"A": 0.5}, ["A"]],
}


@pytest.mark.parametrize("kind", sorted(_KINDS))
@pytest.mark.parametrize("absent", [False, True])
def test_every_kind_of_column_is_the_column_pandas_builds(kind: str, absent: bool) -> None:
    rng = random.Random(kind)
    records = []
    for i in range(300):
        record: dict[str, Any] = {name: rng.choice(_KINDS[kind]) for name in METRIC_COLUMNS}
        if absent and i % 7 == 3:  # a key some records lack is NaN there
            del record[rng.choice(METRIC_COLUMNS)]
        records.append(record)
    frame = _frame(records)
    expected = pd.DataFrame(records)[list(METRIC_COLUMNS)]
    pd.testing.assert_frame_equal(frame, expected)
    for name in METRIC_COLUMNS:  # -0.0 and 0.0 compare equal: their signs must be kept too
        if frame[name].dtype == np.float64:
            assert np.array_equal(np.signbit(frame[name].to_numpy()), np.signbit(expected[name].to_numpy()))


def test_codes_widen_as_the_distinct_values_grow() -> None:
    # 40,000 question ids: past the 128 one byte holds and the 32,768 two bytes hold.
    records = [{"question_id": f"q{i}", "condition": f"P{i % 3}", "repetition": i % 2, "answer": None,
                "recovered": False, "compliant": True, "correct": False, "correct_answer": "A", "error": None,
                "method": "unknown"} for i in range(40_000)]
    frame = _frame(records)
    pd.testing.assert_frame_equal(frame, pd.DataFrame(records)[list(METRIC_COLUMNS)])
    column = CodedColumn()
    for record in records:
        column.append(record["question_id"])
    assert column.codes().dtype == np.int32 and len(column.distinct) == len(column) == 40_000
    flags = CodedColumn()
    for record in records:
        flags.append(record["compliant"])
    assert flags.codes().dtype == np.int8 and flags.distinct == [True]


def test_a_scored_run_holds_a_byte_a_record_and_column() -> None:
    # The columns of a run of 21 conditions x 50 questions x 4 repetitions: one byte a code.
    columns = MetricColumns()
    for i in range(21 * 50 * 4):
        answer = "ABCD"[i % 5] if i % 5 < 4 else None
        columns.add({"question_id": f"q{i % 50}", "condition": f"P{i // 200}", "repetition": i % 4,
                     "answer": answer, "recovered": answer is not None, "compliant": i % 3 == 0,
                     "correct": answer == "A", "correct_answer": "A", "error": None, "method": "label"})
    assert columns.code_bytes == len(METRIC_COLUMNS) * len(columns)
