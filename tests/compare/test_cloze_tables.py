"""The three readings side by side in a comparison (prism.compare.cloze_tables)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from prism.compare.cloze_tables import cloze_disagreements_table, cloze_readings_table, format_cloze_readings
from prism.compare.tables import ModelCells


def cells(rows: list[tuple]) -> pd.DataFrame:
    columns = ["question_id", "condition", "repetition", "answer", "correct_answer", "likelihood_answer",
               "cloze_answer", "cloze_norm_answer", "response"]
    return pd.DataFrame(rows, columns=columns)


def test_three_readings_per_condition_and_the_cells_where_cloze_and_parsed_part() -> None:
    frame = cells([("q1", "C0", 0, "A", "A", "A", "A", "B", "A"), ("q2", "C0", 0, None, "B", "B", "B", "B", "?"),
                   ("q1", "P0", 0, "B", "A", "A", "A", "A", "B"), ("q2", "P0", 0, "B", "B", "A", "B", "B", "B")])
    with_cloze = ModelCells("m", "r1", ("C0", "P0"), frame)
    without = ModelCells("n", "r2", ("P0",), frame.drop(columns=["cloze_answer", "cloze_norm_answer"]))
    table = cloze_readings_table([with_cloze, without]).set_index("condition")
    assert list(table["model"]) == ["m", "m"]  # a run without the reading is left out
    assert table.loc["C0", "accuracy"] == 0.5 and table.loc["C0", "cloze_accuracy"] == 1.0
    assert table.loc["C0", "cloze_norm_accuracy"] == 0.5 and table.loc["C0", "cloze_agreement"] == 1.0
    assert table.loc["P0", "likelihood_accuracy"] == 0.5 and table.loc["P0", "cloze_likelihood_agreement"] == 0.5
    parted = cloze_disagreements_table([with_cloze, without])
    assert list(parted["question_id"]) == ["q1"] and list(parted["condition"]) == ["P0"]
    assert "acc_norm" in format_cloze_readings(table.reset_index())


def test_items_without_a_key_have_no_cloze_accuracy() -> None:
    frame = cells([("q1", "C0", 0, "A", None, None, "A", "A", "A")])
    table = cloze_readings_table([ModelCells("m", "r", ("C0",), frame)])
    assert math.isnan(table.loc[0, "cloze_accuracy"]) and table.loc[0, "cloze_agreement"] == pytest.approx(1.0)
