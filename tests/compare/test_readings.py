"""prism.compare.readings: the reading's intervals, one run at a time or every run's drawn together."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from prism.compare.readings import question_estimates, question_estimates_of
from prism.stats import basics


def _metrics(seed: int, n: int, repetitions: int, keyed: bool = True) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = n * repetitions
    frame = pd.DataFrame({"question_id": [f"q{i // repetitions}" for i in range(rows)],
                          "agreement": rng.integers(1, 6, rows) / 5})
    frame["majority_correct"] = rng.random(rows) < 0.6 if keyed else None
    frame["invariant_incorrect"] = rng.random(rows) < 0.1 if keyed else None
    return frame


def _alone(frame: pd.DataFrame) -> dict[str, basics.Estimate]:
    # What question_estimates computed before the intervals were drawn together: pooled_rate per metric.
    per_question = frame.assign(
        majority=frame["majority_correct"].astype(str).str.lower().eq("true").astype(float),
        wrong=frame["invariant_incorrect"].astype(str).str.lower().eq("true").astype(float),
    ).groupby("question_id", sort=False).agg(majority=("majority", "mean"), wrong=("wrong", "mean"),
                                            agreement=("agreement", "mean"))
    agreed = per_question["agreement"].dropna()
    return {"question_majority_accuracy": basics.pooled_rate(per_question["majority"], per_question.index,
                                                             n_boot=300, seed=4),
            "mean_agreement": basics.pooled_rate(agreed, agreed.index, n_boot=300, seed=4),
            "prompt_invariant_incorrect_rate": basics.pooled_rate(per_question["wrong"], per_question.index,
                                                                  n_boot=300, seed=4)}


def test_every_runs_intervals_drawn_together_are_each_runs_own() -> None:
    frames = [_metrics(1, 80, 1), _metrics(2, 80, 1), _metrics(3, 50, 3), _metrics(4, 80, 1, keyed=False)]
    together = question_estimates_of(frames, n_boot=300, seed=4)
    assert together == [question_estimates(f, n_boot=300, seed=4) for f in frames]
    for frame, found in zip(frames[:3], together[:3], strict=True):
        assert found == _alone(frame)
    keyless = together[3]
    assert math.isnan(keyless["question_majority_accuracy"].value)
    assert math.isnan(keyless["prompt_invariant_incorrect_rate"].value)
    assert keyless["mean_agreement"] == _alone(frames[3])["mean_agreement"]
