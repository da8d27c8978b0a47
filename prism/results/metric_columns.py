"""The columns of scored records the metrics read, gathered a record at a time as small integer codes.

A run scores its records one at a time (``prism.results.summary.write_results``) and keeps of each only what the
metrics read. Those columns repeat a few values over and over (a thousand question ids, twenty conditions,
a handful of answers, methods and flags), so each is kept as one code a record into the list of its
distinct values: one byte a record while a column has at most 128 distinct values, two up to 32,768, and
so on. :meth:`MetricColumns.frame` decodes them into exactly the DataFrame ``pandas.DataFrame(records)``
builds from the records on those columns, dtypes included: pandas infers a column's dtype from the kinds
of value in it (all strings and missing: ``str``; integers and missing: ``float64``; ...), and the kinds
present in a column are the kinds present among its distinct values, so the dtype inferred from the
distinct values is the column's; the codes then take from them.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from prism.results.metrics import REQUIRED_COLUMNS

METRIC_COLUMNS: tuple[str, ...] = (*REQUIRED_COLUMNS, "method")
"""What the metrics read of a scored record (``prism.results.metrics``, ``prism.results.consistency``)."""
LIKELIHOOD_COLUMNS: tuple[str, ...] = ("likelihood_answer", "likelihood_correct", "label_mass", "option_probs")
"""What ``prism.results.label_prob_metrics`` also reads, with label probabilities."""
# What prism.results.summary.bias_cells reads of a record with a likelihood answer.
BIAS_KEYS: tuple[str, ...] = ("question_id", "condition", "repetition", "label_probs", "likelihood_answer", "answer",
                               "correct_answer", "error")
_ABSENT = object()
"""A record without the key: NaN in the frame, as pandas makes it."""
# Each code width (array typecode) and the next, once a column has more distinct values than it holds.
_WIDER = {"b": "h", "h": "i", "i": "q"}
_HOLDS = {"b": 2**7, "h": 2**15, "i": 2**31, "q": 2**63}


class CodedColumn:
    """One column as a code a record into the list of its distinct values (a value hashed by kind and value)."""

    __slots__ = ("_codes", "_index", "distinct")

    def __init__(self) -> None:
        """No values yet."""
        self._codes = array("b")
        self._index: dict[tuple[Any, ...], int] = {}
        self.distinct: list[Any] = []
        """The distinct values in the order they first came."""

    def __len__(self) -> int:
        """The number of values appended."""
        return len(self._codes)

    def append(self, value: Any) -> None:
        """Add the next record's value."""
        # By kind as well as value: True, 1 and 1.0 are equal in Python but not in a column's dtype, and the
        # hex of a float tells -0.0 from 0.0.
        key = (float, value.hex()) if type(value) is float else (type(value), value)
        try:
            code = self._index.get(key)
            hashable = True
        except TypeError:  # an unhashable value (a list, a dict) is kept as it is, once per record
            code, hashable = None, False
        if code is None:
            code = len(self.distinct)
            self.distinct.append(value)
            if hashable:
                self._index[key] = code
            if code == _HOLDS[self._codes.typecode]:
                self._codes = array(_WIDER[self._codes.typecode], self._codes)
        self._codes.append(code)

    def codes(self) -> np.ndarray[Any, np.dtype[np.signedinteger[Any]]]:
        """Every record's code, in order (a view of the codes held, not a copy)."""
        return np.frombuffer(self._codes, dtype=self._codes.typecode)

    def values(self) -> pd.Series:
        """The column as pandas builds it from the records' values (a missing value NaN)."""
        distinct = pd.Series([float("nan") if value is _ABSENT else value for value in self.distinct])
        codes = self.codes()
        # Numpy indexes with the narrow codes as they are, where a take first widens them to 8 bytes each.
        taken = distinct.to_numpy()[codes] if isinstance(distinct.dtype, np.dtype) else distinct.array.take(codes)
        # With its dtype given, pandas takes the column as it is rather than inferring one again over it.
        return pd.Series(taken, dtype=distinct.dtype, copy=False)


class MetricColumns:
    """The columns of scored records that the metrics read, gathered a record at a time.

    :meth:`frame` is exactly ``pandas.DataFrame(records)`` restricted to those columns (a key some records
    lack is NaN there, as pandas makes it), at a byte or two a record and column for :data:`METRIC_COLUMNS`
    (:class:`CodedColumn`). The likelihood columns, there only in a run with label probabilities, hold
    mostly distinct values (probabilities) and are kept as lists.
    """

    def __init__(self) -> None:
        """No records yet."""
        self._coded = {name: CodedColumn() for name in METRIC_COLUMNS}
        self._listed: dict[str, list[Any]] = {}
        self._present: set[str] = set()
        self._n = 0
        self.label_probs = False
        """Whether any record came from a run with label probabilities (it has ``label_probs_source``)."""
        self.bias_records: list[dict[str, Any]] = []
        """What the position-bias table reads of each observed record with a likelihood answer."""

    def __len__(self) -> int:
        """The number of records added."""
        return self._n

    @property
    def code_bytes(self) -> int:
        """The bytes the codes of :data:`METRIC_COLUMNS` take (their distinct values aside)."""
        return sum(column.codes().nbytes for column in self._coded.values())

    def add(self, record: Mapping[str, Any]) -> None:
        """Keep what the metrics read of one scored record (its JSON)."""
        for name in LIKELIHOOD_COLUMNS:  # a column only once some record has it: most runs have none
            if name not in self._listed and name in record:
                self._listed[name] = [_ABSENT] * self._n
        self._n += 1
        present = self._present
        for name, column in self._coded.items():
            value = record.get(name, _ABSENT)
            if value is not _ABSENT:
                present.add(name)
            column.append(value)
        for name, values in self._listed.items():
            value = record.get(name, _ABSENT)
            if value is not _ABSENT:
                present.add(name)
            values.append(value)
        if "label_probs_source" in record:
            self.label_probs = True
        if record.get("error") is None and record.get("likelihood_answer") is not None:
            self.bias_records.append({key: record.get(key) for key in BIAS_KEYS})

    def frame(self) -> pd.DataFrame:
        """The gathered columns as pandas builds them from the records (columns no record had are left out)."""
        data: dict[str, Any] = {}
        for name, column in self._coded.items():
            if name in self._present:
                data[name] = column.values()
        for name, values in self._listed.items():
            if name in self._present:
                data[name] = [float("nan") if value is _ABSENT else value for value in values]
        # Each column is made once, above: consolidating them into one block a dtype would copy them again.
        return pd.DataFrame(data, copy=False)
