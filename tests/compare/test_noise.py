"""prism.compare.noise: a step's responses gathered from the run's per-question matrices."""

from __future__ import annotations

import numpy as np
import pandas as pd

from prism.compare.noise import _questions, measure_values, question_rows, step_data
from prism.compare.tables import ModelCells
from prism.stats import shifts


def _one_by_one(questions: dict[str, tuple[np.ndarray, np.ndarray]], baseline: str,
                condition: str) -> list[tuple[np.ndarray, int, int]]:
    # What step_data took question by question before it shared a layout's selection.
    blocks = []
    for matrix, conditions in questions.values():
        index = np.concatenate([np.flatnonzero(conditions == baseline), np.flatnonzero(conditions == condition)])
        n_from = int((conditions == baseline).sum())
        if n_from and index.size - n_from:
            blocks.append((matrix[np.ix_(index, index)], n_from, index.size - n_from))
    return blocks


def test_step_data_selects_each_questions_responses_whatever_its_layout() -> None:
    rng = np.random.default_rng(3)
    layouts = [["P0", "P1", "P2"], ["P0", "P0", "P1", "P1", "P2"], ["P1", "P2"], ["P0", "P2"], ["P0", "P1", "P2"]]
    questions = {}
    for q in range(40):
        conditions = np.asarray(layouts[q % len(layouts)], dtype=object)
        values = rng.random((conditions.size, conditions.size))
        questions[f"q{q}"] = ((values + values.T) * (1 - np.eye(conditions.size)), conditions)
    for condition in ("P1", "P2"):
        data = step_data(questions, "P0", condition)
        expected = _one_by_one(questions, "P0", condition)
        assert [int(a) for a in data.n_from] == [a for _, a, _ in expected]
        assert [int(b) for b in data.n_to] == [b for _, _, b in expected]
        assert len(data.matrices) == len(expected)
        for got, (want, _, _) in zip(data.matrices, expected, strict=True):
            assert got.tobytes() == want.tobytes()


def test_answer_matrices_made_per_layout_are_difference_matrix_of_each_question() -> None:
    rng = np.random.default_rng(4)
    rows = []
    for q in range(30):
        for condition in ("P0", "P1", "P2"):
            for repetition in range(1 + (q % 3 == 0 and condition == "P1")):  # a few repeated cells
                if q % 7 == 3 and condition == "P2":
                    continue  # a few missing cells
                category = str(rng.choice(["A", "B", "C", "UNKNOWN"]))
                rows.append({"question_id": f"q{q}", "condition": condition, "repetition": repetition,
                             "category": category, "response": category})
    model = ModelCells("m", "r", ("P0", "P1", "P2"), pd.DataFrame(rows))
    found = _questions(model, "answer")
    order = {c: i for i, c in enumerate(model.conditions)}
    cells = model.cells.assign(_c=model.cells["condition"].map(order)).sort_values(["_c", "repetition"],
                                                                                     kind="stable")
    listed = measure_values(cells, "answer").tolist()
    expected = {q: shifts.difference_matrix([listed[i] for i in r.tolist()], "answer")
                for q, r in question_rows(cells["question_id"])}
    assert list(found) == list(expected)
    for question, (matrix, conditions) in found.items():
        assert matrix.dtype == np.float64 and matrix.tobytes() == expected[question].tobytes()
        assert len(conditions) == matrix.shape[0]
