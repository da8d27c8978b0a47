"""The three readings side by side in a comparison (prism.compare.cloze_tables), in readings.csv and on the page."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from prism.compare import two_readings
from prism.compare.cloze_tables import (
    CLOZE_COLUMNS,
    MERGED_READINGS_COLUMNS,
    cloze_disagreements_table,
    cloze_readings_table,
    format_cloze_readings,
    merged_readings_table,
)
from prism.compare.label_prob_tables import READINGS_COLUMNS
from prism.compare.tables import ModelCells
from prism.render import environment


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


def label_table(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(READINGS_COLUMNS))


def test_readings_csv_keeps_every_label_probability_value_and_adds_the_cloze_columns() -> None:
    frame = cells([("q1", "C0", 0, "A", "A", "A", "A", "B", "A"), ("q2", "C0", 0, None, "B", "B", "B", "B", "?"),
                   ("q1", "P0", 0, "B", "A", "A", "A", "A", "B"), ("q2", "P0", 0, "B", "B", "A", "B", "B", "B")])
    both = ModelCells("both", "r1", ("C0", "P0"), frame)
    probs_only = ModelCells("probs", "r2", ("P0",), frame.drop(columns=["cloze_answer", "cloze_norm_answer"]))
    cloze_only = ModelCells("cloze", "r3", ("C0", "P0"), frame.drop(columns=["likelihood_answer"]))
    neither = ModelCells("text", "r4", ("P0",), frame.drop(columns=["likelihood_answer", "cloze_answer",
                                                                      "cloze_norm_answer"]))
    models = [both, probs_only, cloze_only, neither]
    # What label_prob_tables.readings_table gives (values chosen so a recomputation would not reproduce them).
    labels = label_table([("both", "C0", 2, 2, 0.25, 0.75, 0.5, 0.9, 0.0),
                          ("both", "P0", 2, 2, 0.5, 0.5, 0.5, 0.8, 0.1),
                          ("probs", "P0", 2, 1, 0.5, 0.125, 1.0, 0.7, 0.2)])
    merged = merged_readings_table(models, labels, cloze_readings_table(models))
    assert tuple(merged.columns) == MERGED_READINGS_COLUMNS == (*READINGS_COLUMNS, *CLOZE_COLUMNS)
    assert [(r.model, r.condition) for r in merged.itertuples()] == [
        ("both", "C0"), ("both", "P0"), ("probs", "P0"), ("cloze", "C0"), ("cloze", "P0")]  # no row for "text"
    kept = merged.iloc[:3][list(READINGS_COLUMNS)].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, labels, check_dtype=False)  # every existing column and value as it was
    assert merged.loc[0, "cloze_accuracy"] == 1.0 and merged.loc[1, "cloze_likelihood_agreement"] == 0.5
    assert merged.iloc[2][list(CLOZE_COLUMNS)].isna().all()  # label probabilities only: no cloze values
    cloze_c0 = merged.iloc[3]
    assert cloze_c0["n"] == 2 and cloze_c0["n_label_probs"] == 0 and cloze_c0["accuracy"] == 0.5
    assert math.isnan(cloze_c0["likelihood_accuracy"]) and cloze_c0["cloze_norm_accuracy"] == 0.5


def render_section(section: dict) -> str:
    template = environment().from_string('{% from "sections/two_readings.j2" import two_readings %}'
                                         "{{ two_readings(s) }}")
    return template.render(s=section)


def test_the_readings_section_shows_the_readings_the_runs_recorded_and_where_cloze_parts() -> None:
    frame = cells([("q1", "P0", 0, "B", "A", None, "A", "A", "it is <b>B</b>")])
    model = ModelCells("m", "r", ("P0",), frame.drop(columns=["likelihood_answer"]))
    table = merged_readings_table([model], label_table([]), cloze_readings_table([model]))
    rows = two_readings.report_rows(table)
    cloze = cloze_disagreements_table([model])
    section = {"rows": rows, "cells": [], "total": 0, "measures": two_readings.shown_measures(rows),
               "keyed": two_readings.KEYED, "baseline": "P0", "whole_in": "x.csv", "label_probs": False,
               "cloze": True, "cloze_cells": two_readings.cloze_parted(cloze.to_dict("records"), {}),
               "cloze_total": len(cloze), "cloze_whole_in": "comparison/cloze_disagreements.csv"}
    assert [key for key, _ in section["measures"]] == ["accuracy", "cloze_accuracy", "cloze_norm_accuracy",
                                                       "cloze_agreement"]
    html = render_section(section)
    assert 'id="answer-readings"' in html and "Readings: the generated answer" in html
    assert "cloze acc_norm" in html and "likelihood accuracy" not in html and "cells with probabilities" not in html
    assert 'data-measure="cloze_accuracy">100.0%' in html and 'data-measure="accuracy">0.0%' in html
    assert 'id="cloze-part"' in html and 'id="readings-part"' not in html
    assert 'data-reading="cloze"><strong>A</strong>' in html and "it is &lt;b&gt;B&lt;/b&gt;" in html
    # A label-probability run keeps its section as it was: no cloze columns, no cloze cells.
    probs = two_readings.report_rows(label_table([("m", "P0", 2, 2, 0.5, 0.5, 0.5, 0.8, 0.1)]).assign(
        **{c: math.nan for c in CLOZE_COLUMNS}))
    assert two_readings.shown_measures(probs) == (*two_readings.PARSED_MEASURES, *two_readings.LIKELIHOOD_MEASURES)
