"""Which pairs of runs the cross-model tables hold, and the cap on the differences table.

Pure tables over synthetic runs (no MLflow): the reference pairing and its choice of reference, and
that capping the listed differences changes nothing but the listing.
"""

from __future__ import annotations

import random
from dataclasses import replace
from itertools import combinations

import pandas as pd
import pytest

from prism.compare.build import build_tables
from prism.compare.comparison_plan import ComparisonPlan
from prism.compare.core import _pairing, headline_metrics
from prism.compare.select import CompareError, Selection
from prism.compare.tables import ModelCells, cap_note, model_pairs, pairing_note
from prism.config import CompareConfig, CompareDifferences
from prism.errors import ConfigError
from prism.names import LoggedRun

CONDITIONS = ("P0", "P1", "P2")
LABELS = "ABCD"


def synthetic(index: int, n_questions: int = 40, repetitions: int = 1) -> ModelCells:
    """A seeded model answering every cell: right with its own skill, UNKNOWN now and then."""
    rng = random.Random(index)
    skill = rng.uniform(0.3, 0.9)
    rows = []
    for q in range(n_questions):
        key = LABELS[q % 4]
        for condition in CONDITIONS:
            for rep in range(repetitions):
                roll = rng.random()
                answer = key if roll < skill else (None if roll > 0.95 else rng.choice(LABELS))
                rows.append((f"q{q:03d}", condition, rep, answer, key))
    frame = pd.DataFrame(rows, columns=["question_id", "condition", "repetition", "answer", "correct_answer"])
    frame["category"] = frame["answer"].where(frame["answer"].notna(), "UNKNOWN")
    frame["correct"] = frame["answer"] == frame["correct_answer"]
    frame["recovered"] = frame["answer"].notna()
    frame["response"] = "says " + frame["category"]
    frame["prompt_sha256"] = frame["question_id"] + frame["condition"]
    return ModelCells(f"m{index}", f"run{index}", CONDITIONS, frame, model=f"m{index}")


MODELS = [synthetic(i) for i in range(1, 5)]


def test_reference_pairs_put_one_run_against_each_other() -> None:
    first = [(a.label, b.label) for a, b in model_pairs(MODELS, "reference")]
    assert first == [("m1", "m2"), ("m1", "m3"), ("m1", "m4")]
    third = [(a.label, b.label) for a, b in model_pairs(MODELS, "reference", "run3")]
    assert third == [("m3", "m1"), ("m3", "m2"), ("m3", "m4")]
    every = [(a.label, b.label) for a, b in model_pairs(MODELS, "all")]
    assert every == [(a.label, b.label) for a, b in combinations(MODELS, 2)]
    with pytest.raises(ValueError, match="reference run run9 is not among the compared runs"):
        model_pairs(MODELS, "reference", "run9")


def test_a_reference_pair_has_the_same_rows_as_in_all_pairs() -> None:
    ref = build_tables(MODELS, ComparisonPlan(baseline="P0", n_boot=50, seed=0, pairs="reference", reference="run2"))
    every = build_tables(MODELS, ComparisonPlan(baseline="P0", n_boot=50, seed=0, pairs="all"))
    assert list(dict.fromkeys(zip(ref.divergence["model_a"], ref.divergence["model_b"], strict=True))) == [
        ("m2", "m1"), ("m2", "m3"), ("m2", "m4")]
    assert len(every.divergence) == 6 * (len(CONDITIONS) + 1)
    # m2 vs m3 is a pair of both; its statistics do not depend on which other pairs are made.
    a = ref.divergence.query("model_b == 'm3'").reset_index(drop=True)
    b = every.divergence.query("model_a == 'm2' and model_b == 'm3'").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    listed = set(map(tuple, ref.differences[["model_a", "model_b"]].to_numpy()))
    assert listed == {("m2", "m1"), ("m2", "m3"), ("m2", "m4")}
    for name in ("sensitivity", "accuracy", "condition_disagreement", "shifts", "gee_wald"):
        pd.testing.assert_frame_equal(getattr(ref, name), getattr(every, name), obj=name)


@pytest.mark.parametrize("pairs", ["reference", "all"])
def test_capped_differences_give_exactly_the_uncapped_statistics(pairs: str) -> None:
    cap = 7
    capped = build_tables(MODELS, ComparisonPlan(baseline="P0", n_boot=50, seed=0, pairs=pairs, max_per_pair=cap))
    whole = build_tables(MODELS, ComparisonPlan(baseline="P0", n_boot=50, seed=0, pairs=pairs, max_per_pair=None))
    for name in {name for name, _ in whole.items()} - {"differences", "difference_counts"}:
        pd.testing.assert_frame_equal(getattr(capped, name), getattr(whole, name), obj=name)
    assert headline_metrics(capped, 40) == headline_metrics(whole, 40)
    counts, whole_counts = capped.difference_counts, whole.difference_counts
    assert counts["differing"].tolist() == whole_counts["differing"].tolist()
    assert (whole_counts["listed"] == whole_counts["differing"]).all()
    assert counts["listed"].tolist() == [min(n, cap) for n in counts["differing"]]
    assert (counts["differing"] > cap).all(), "the synthetic runs must differ in more cells than the cap"
    assert counts["max_per_pair"].tolist() == [cap] * len(counts) and whole_counts["max_per_pair"].isna().all()
    # Each pair lists the first `cap` of its own uncapped cells: those where the question differs most.
    key = ["model_a", "model_b", "question_id", "condition", "repetition"]
    for (a, b), rows in capped.differences.groupby(["model_a", "model_b"], sort=False):
        full = whole.differences[(whole.differences["model_a"] == a) & (whole.differences["model_b"] == b)]
        assert len(rows) == cap
        assert rows["question_disagreement"].min() >= full["question_disagreement"].iloc[cap - 1]
        merged = rows[key].merge(full, on=key, how="left", indicator=True)
        assert (merged["_merge"] == "both").all()
    assert capped.differences["question_disagreement"].is_monotonic_decreasing


def test_the_notes_say_what_the_tables_hold() -> None:
    tables = build_tables(MODELS, ComparisonPlan(baseline="P0", n_boot=20, seed=0, pairs="reference", max_per_pair=3))
    assert "compared with the reference run m1 (3 pairs, pairs=reference" in pairing_note(tables)
    differing = int(tables.difference_counts["differing"].sum())
    note = cap_note(tables)
    assert f"{differing} paired cells differ over 3 pair(s); 9 are listed, at most 3 per pair" in note
    assert f"the other {differing - 9} are counted" in note
    every = build_tables(MODELS, ComparisonPlan(baseline="P0", n_boot=20, seed=0, pairs="all", max_per_pair=None))
    assert pairing_note(every).startswith("6 pair(s) of runs compared (every pair)")
    assert "no cap" in cap_note(every)


@pytest.mark.parametrize(("change", "message"), [
    ({"pairs": "some"}, "pairs must be one of reference, all, got 'some'"),
    ({"differences": CompareDifferences(max_per_pair=-2)}, "whole number of 0 or more"),
    ({"pairs": "all", "reference": "a"}, "only pairs=reference does"),
    ({"bootstrap": 0}, "bootstrap must be at least 1"),
    ({"permutations": 0}, "permutations must be at least 1"),
])
def test_a_pairing_or_cap_no_comparison_can_use_is_refused_once_by_the_config(change: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        replace(CompareConfig(), **change).check()
    CompareConfig().check()


def summary(run_id: str, start: int) -> LoggedRun:
    return LoggedRun(run_id, "FINISHED", start, {"model.name": run_id}, {"prism.kind": "run"})


def test_the_reference_is_chosen_as_documented() -> None:
    runs = [summary("b", 20), summary("a", 10), summary("c", 30)]
    default = CompareConfig()
    assert (default.pairs, default.reference, default.differences.max_per_pair) == ("reference", None, 200)
    cap = default.differences.max_per_pair
    assert _pairing("reference", None, cap, runs, Selection()) == ("reference", "a", cap)  # earliest started
    assert _pairing("reference", None, cap, runs, Selection(runs=("c", "a", "b"))) == ("reference", "c", cap)
    assert _pairing("reference", "b", None, runs, Selection()) == ("reference", "b", None)
    assert _pairing("all", None, 5, runs, Selection()) == ("all", None, 5)
    with pytest.raises(CompareError, match="reference run z is not among the compared runs"):
        _pairing("reference", "z", cap, runs, Selection())
