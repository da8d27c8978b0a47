"""prism.compare.rank_robustness: planted gaps, ties and flips on synthetic runs (seeded)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from prism.compare.rank_robustness import RANK_ROBUSTNESS_COLUMNS, rank_robustness_table
from prism.compare.tables import ModelCells

CONDITIONS = ("P0", "P1", "P2", "P3")


def run(label: str, accuracy: dict[str, float], n: int = 60, seed: int = 0) -> ModelCells:
    rng = np.random.default_rng(seed)
    rows = [{"question_id": f"q{q}", "condition": c, "repetition": 0, "correct": bool(rng.random() < accuracy[c]),
             "category": "A"} for q in range(n) for c in CONDITIONS]
    frame = pd.DataFrame(rows).assign(correct_answer="A")
    return ModelCells(label, f"run-{label}", CONDITIONS, frame, model=label, axis="prism", dataset="d",
                      question_set="qs")


def test_a_large_gap_is_robust_and_a_tie_is_not() -> None:
    strong = run("strong", dict.fromkeys(CONDITIONS, 0.9), seed=1)
    weak = run("weak", dict.fromkeys(CONDITIONS, 0.4), seed=2)
    twin = run("twin", dict.fromkeys(CONDITIONS, 0.4), seed=3)
    table = rank_robustness_table([weak, strong, twin], resamples=400, seed=0)
    assert list(table.columns) == list(RANK_ROBUSTNESS_COLUMNS)
    pairs = {(a, b): r for a, b, r in zip(table["model_a"], table["model_b"], table.to_dict("records"), strict=True)}
    top = pairs["strong", "weak"]
    assert top["prob_a_above_b"] > 0.99 and top["robust"]
    assert (top["rank_a_low"], top["rank_a_high"]) == (1.0, 1.0)
    tie = next(r for (a, b), r in pairs.items() if {a, b} == {"weak", "twin"})
    assert 0.2 < tie["prob_a_above_b"] < 0.8 and not tie["robust"]
    assert tie["rank_a_low"] == 2 and tie["rank_a_high"] == 3


def test_the_conditions_where_the_order_flips_are_named() -> None:
    a = run("a", {"P0": 0.9, "P1": 0.9, "P2": 0.9, "P3": 0.1}, seed=4)
    b = run("b", dict.fromkeys(CONDITIONS, 0.5), seed=5)
    table = rank_robustness_table([a, b], resamples=400, seed=0)
    row = table.iloc[0]
    assert (row["model_a"], row["flips_at"]) == ("a", "P3")
    assert 0.6 < row["prob_a_above_b"] < 0.9 and not row["robust"]  # about three prompts in four favour a


def test_runs_on_different_question_sets_are_not_ranked_together() -> None:
    a, b = run("a", dict.fromkeys(CONDITIONS, 0.9)), run("b", dict.fromkeys(CONDITIONS, 0.5))
    other = ModelCells("b", b.run_id, b.conditions, b.cells, model="b", axis="prism", dataset="d", question_set="x")
    assert rank_robustness_table([a, other], resamples=50, seed=0).empty
