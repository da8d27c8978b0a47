"""prism.compare.noise: a step's responses gathered from the run's per-question matrices."""

from __future__ import annotations

import numpy as np

from prism.compare.noise import step_data


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
