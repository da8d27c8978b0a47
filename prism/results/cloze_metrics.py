"""The third reading's measures: cloze accuracy, normalised accuracy and agreement with the parsed answer.

``cloze_accuracy`` is lm-eval's ``acc``, ``cloze_norm_accuracy`` its ``acc_norm``, ``cloze_agreement`` how often
the cloze answer is the parsed one.

Pure over the scored records' cloze fields (``prism.cloze.cloze_fields``): each record with a cloze reading
contributes one row. A keyed measure leaves out items without a key, like the other key metrics; agreement
counts only cells where both readings have an answer (the parsed reading may be UNKNOWN).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from prism.names import (
    METRIC_CLOZE_ACCURACY,
    METRIC_CLOZE_AGREEMENT,
    METRIC_CLOZE_NORM_ACCURACY,
    METRIC_N_CLOZE,
    condition_metric,
)

#: What each row keeps of a scored record.
COLUMNS: tuple[str, ...] = ("question_id", "condition", "repetition", "answer", "correct_answer", "cloze_answer",
                            "cloze_norm_answer", "cloze_source")


def cloze_row(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """The row a scored record gives, or None when it has no cloze reading (or its request failed)."""
    if record.get("cloze_answer") is None or record.get("error") is not None:
        return None
    return {name: record.get(name) for name in COLUMNS}


def _rates(frame: pd.DataFrame) -> dict[str, float]:
    keyed = frame[frame["correct_answer"].notna()]
    both = frame[frame["answer"].notna()]
    out: dict[str, float] = {}
    if len(keyed):
        out[METRIC_CLOZE_ACCURACY] = float((keyed["cloze_answer"] == keyed["correct_answer"]).mean())
        out[METRIC_CLOZE_NORM_ACCURACY] = float((keyed["cloze_norm_answer"] == keyed["correct_answer"]).mean())
    if len(both):
        out[METRIC_CLOZE_AGREEMENT] = float((both["cloze_answer"] == both["answer"]).mean())
    return out


def cloze_frame(rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """The rows as a frame with :data:`COLUMNS` (empty but typed when there are none)."""
    return pd.DataFrame(list(rows), columns=list(COLUMNS))


def cloze_metrics(frame: pd.DataFrame, conditions: Sequence[str]) -> dict[str, float]:
    """Run-level and per-condition (``<metric>/<condition>``) measures, and ``n_cloze`` (cells with a reading)."""
    metrics = _rates(frame)
    for name in conditions:
        rates = _rates(frame[frame["condition"] == name])
        metrics.update({condition_metric(key, name): value for key, value in rates.items()})
    metrics[METRIC_N_CLOZE] = float(len(frame))
    return metrics


def cloze_condition_table(frame: pd.DataFrame, conditions: Sequence[str]) -> pd.DataFrame:
    """``results/cloze.csv``: per condition the cells with a reading and the three measures (empty cells: no key)."""
    rows = []
    for name in conditions:
        part = frame[frame["condition"] == name]
        rates = _rates(part)
        rows.append({"condition": name, "n_cells": len(part),
                     **{key: rates.get(key) for key in (METRIC_CLOZE_ACCURACY, METRIC_CLOZE_NORM_ACCURACY,
                                                        METRIC_CLOZE_AGREEMENT)}})
    return pd.DataFrame(rows, columns=["condition", "n_cells", METRIC_CLOZE_ACCURACY, METRIC_CLOZE_NORM_ACCURACY,
                                       METRIC_CLOZE_AGREEMENT])
