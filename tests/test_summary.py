"""Results written a scored record at a time: the metrics' columns are what pandas makes of the records."""

from __future__ import annotations

import math

import pandas as pd

from prism.summary import LIKELIHOOD_COLUMNS, METRIC_COLUMNS, MetricColumns


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
