"""The read-outs' array paths against the straightforward computations they replaced, on awkward cells.

The scorecard reads each run's cells into arrays once and draws all its intervals in one matrix product
(:func:`prism.stats.basics.ratio_estimates`); the divergence beyond noise gathers each run's responses once,
builds single-response answer steps from one comparison and bootstraps a pair's steps together
(:func:`prism.stats.shifts.shifts_of`). Each must give exactly what the frame-by-frame code gives -- which
is written out here (filters, a merge, :func:`prism.stats.basics.pooled_rate`, :func:`prism.stats.shifts.shift`
step by step) -- on a condition listed without cells, shuffled rows, a repeated (question, repetition),
missing categories and flags, one question, and fractional differences.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from prism.compare.divergence_noise import _Responses, _single_answers_of, divergence_noise_table, pair_step
from prism.compare.noise import measure_values
from prism.compare.scorecard import METRICS, SCORECARD_COLUMNS, scorecard_table
from prism.compare.tables import POOLED, ModelCells, has_key
from prism.stats import basics, shifts

B, SEED = 200, 3


def cells(rng: np.random.Generator, questions: int, conditions: tuple[str, ...], reps: int) -> pd.DataFrame:
    """Scored-looking cells in a shuffled order, some categories and compliance flags missing."""
    rows = []
    for condition in conditions:
        for q in range(questions):
            for r in range(reps):
                answer = str(rng.choice(["A", "B", "C"]))
                rows.append({"question_id": f"q{q}", "condition": condition, "repetition": r, "answer": answer,
                             "category": answer if rng.random() > 0.15 else None,
                             "correct": answer == "A", "recovered": bool(rng.random() > 0.1),
                             "compliant": None if rng.random() < 0.3 else bool(rng.random() > 0.5),
                             "likelihood_correct": math.nan if rng.random() < 0.5 else float(rng.random() > 0.5),
                             "correct_answer": "A", "response": f"{answer} because {rng.integers(3)}",
                             "option_probs": {"A": 0.5, "B": 0.5} if rng.random() > 0.2 else None})
    frame = pd.DataFrame(rows)
    return frame.iloc[rng.permutation(len(frame))].reset_index(drop=True)


def reference_scorecard(models: list[ModelCells], baseline: str) -> pd.DataFrame:
    """The scorecard frame by frame: a filter per condition, a merge for consistency, one pooled_rate per row."""
    flags = {"accuracy": "correct", "recovery": "recovered", "compliance": "compliant",
             "likelihood_accuracy": "likelihood_correct"}

    def row(model: ModelCells, condition: str, metric: str, est: basics.Estimate, kept: pd.DataFrame) -> dict:
        return {"model": model.label, "run_id": model.run_id, "condition": condition, "metric": metric,
                "value": est.value, "ci_low": est.ci_low, "ci_high": est.ci_high, "n_cells": len(kept),
                "n_questions": int(kept["question_id"].nunique())}

    rows: list[dict] = []
    for model in models:
        frame = model.cells
        base = frame[frame["condition"] == baseline][["question_id", "repetition", "category"]]
        for condition in [*model.conditions, POOLED]:
            own = frame if condition == POOLED else frame[frame["condition"] == condition]
            found = []
            for metric, flag in flags.items():
                if (metric in ("accuracy", "likelihood_accuracy") and not has_key(model)) or flag not in own:
                    continue
                kept = own[flag].notna()
                if kept.any():
                    est = basics.pooled_rate(own.loc[kept, flag].astype(float),
                                             own.loc[kept, "question_id"].astype(str), n_boot=B, seed=SEED)
                    found.append(row(model, condition, metric, est, own[kept]))
            if condition not in (POOLED, baseline) and not base.empty:
                paired = base.merge(own[["question_id", "repetition", "category"]], on=["question_id", "repetition"],
                                    suffixes=("_base", ""))
                if len(paired):
                    same = (paired["category"] == paired["category_base"]).astype(float)
                    est = basics.pooled_rate(same, paired["question_id"].astype(str), n_boot=B, seed=SEED)
                    found.append(row(model, condition, "consistency", est, paired))
            rows += sorted(found, key=lambda r: METRICS.index(str(r["metric"])))
    return pd.DataFrame(rows, columns=list(SCORECARD_COLUMNS))


def test_the_scorecard_is_the_frame_by_frame_scorecard_on_awkward_runs() -> None:
    rng = np.random.default_rng(0)
    plain = cells(rng, 30, ("P0", "P1", "P2"), 2)
    # Missing categories as None in an object column (which numpy's == would call equal), not the str dtype's NaN.
    plain["category"] = pd.Series(plain["category"].tolist(), dtype=object).where(plain["category"].notna(), None)
    # A repeated (question, repetition) under P1 and the baseline: those pairs take the merge's every-copy rule.
    doubled = pd.concat([plain, plain[plain["condition"].isin(["P0", "P1"])].head(7)], ignore_index=True)
    one_question = cells(rng, 1, ("P0", "P1"), 3)
    survey = cells(rng, 8, ("P0", "P1"), 1).assign(correct_answer=None)
    no_baseline = cells(rng, 6, ("P1", "P2"), 2).drop(columns=["compliant"])
    models = [ModelCells("plain", "r1", ("P0", "P1", "P2", "P3"), plain),  # P3 is listed but has no cells
              ModelCells("doubled", "r2", ("P0", "P1", "P2"), doubled),
              ModelCells("one", "r3", ("P0", "P1"), one_question),
              ModelCells("survey", "r4", ("P0", "P1"), survey),
              ModelCells("nobase", "r5", ("P0", "P1", "P2"), no_baseline)]
    found = scorecard_table(models, "P0", n_boot=B, seed=SEED)
    expected = reference_scorecard(models, "P0")
    pd.testing.assert_frame_equal(found, expected, check_exact=True)
    # The edges are in it: every metric, a doubled pairing, one question, no accuracy without a key.
    assert set(found["metric"]) == set(METRICS)
    assert found.query("model == 'one'")["n_questions"].eq(1).all()
    assert not (found.query("model == 'survey'")["metric"] == "accuracy").any()
    assert not (found.query("model == 'nobase'")["metric"] == "consistency").any()
    assert "P3" not in set(found.query("model == 'plain'")["condition"])
    plain_p1 = found.query("model == 'plain' and condition == 'P1' and metric == 'consistency'")["n_cells"]
    doubled_p1 = found.query("model == 'doubled' and condition == 'P1' and metric == 'consistency'")["n_cells"]
    assert int(doubled_p1.iloc[0]) > int(plain_p1.iloc[0])


def test_ratio_estimates_are_each_ratio_estimate() -> None:
    rng = np.random.default_rng(1)
    sums = []
    for n in (1, 5, 5, 40, 40, 40):
        den = rng.integers(1, 4, size=n).astype(float)
        sums.append((rng.integers(0, 4, size=n).astype(float).clip(max=den), den))
    sums.append((rng.random(5), np.ones(5)))  # fractional: estimated alone
    sums.append((np.array([1.0, 2.0]), np.array([0.0, 3.0])))  # a question without cells is left out
    sums.append((np.array([]), np.array([])))
    found = basics.ratio_estimates(sums, n_boot=B, seed=SEED)
    for (num, den), est in zip(sums, found, strict=True):
        alone = basics.ratio_estimate(num, den, n_boot=B, seed=SEED)
        np.testing.assert_array_equal([est.value, est.ci_low, est.ci_high], [alone.value, alone.ci_low, alone.ci_high])


def step(rng: np.random.Generator, n: int, n_from: int, n_to: int, fractional: bool = False) -> shifts.StepData:
    blocks = []
    for _ in range(n):
        a, b = int(rng.integers(1, n_from + 1)), int(rng.integers(1, n_to + 1))
        values = rng.random((a + b, a + b)) if fractional else (rng.random((a + b, a + b)) > 0.5).astype(float)
        matrix = np.triu(values, 1)
        blocks.append((matrix + matrix.T, a, b))
    return shifts.StepData.from_blocks(blocks)


def test_shifts_of_is_shift_step_by_step() -> None:
    rng = np.random.default_rng(2)
    steps = [step(rng, 30, 1, 1), step(rng, 30, 1, 1), step(rng, 1, 1, 1), step(rng, 12, 1, 1),
             step(rng, 30, 1, 1, fractional=True),  # single responses, fractional differences: shift itself
             step(rng, 10, 3, 3), step(rng, 10, 2, 1),  # repetitions; some questions with one response
             shifts.StepData.from_blocks([])]
    found = shifts.shifts_of(steps, n_boot=B, n_permutations=150, seed=SEED)
    for data, est in zip(steps, found, strict=True):
        alone = shifts.shift(data, n_boot=B, n_permutations=150, seed=SEED)
        fields = ("between", "within", "excess", "ci_low", "ci_high", "p", "n_questions", "n_permutations")
        np.testing.assert_array_equal([getattr(est, f) for f in fields], [getattr(alone, f) for f in fields])
    assert shifts.shifts_of([], n_boot=0, n_permutations=0, seed=SEED) == []
    with pytest.raises(ValueError, match="at least 1"):
        shifts.shifts_of(steps[:1], n_boot=0, n_permutations=10, seed=SEED)


def reference_responses(model: ModelCells, condition: str, measure: str) -> dict[str, list[str | None]]:
    """A run's values per question under a condition, by filtering and sorting its frame."""
    own = model.cells[model.cells["condition"] == condition].sort_values("repetition", kind="stable")
    values = measure_values(own, measure)
    questions = own.loc[values.index, "question_id"]
    found: dict[str, list[str | None]] = {}
    for question, value in zip(questions, values, strict=True):
        found.setdefault(str(question), []).append(value)
    return found


def reference_step(a: dict[str, list[str | None]], b: dict[str, list[str | None]], measure: str) -> shifts.StepData:
    return shifts.StepData.from_blocks([(shifts.difference_matrix([*values, *b[q]], measure), len(values), len(b[q]))
                                        for q, values in a.items() if b.get(q)])


@pytest.mark.parametrize("measure", ["answer", "token_jaccard", "prob_tv"])
def test_divergence_noise_steps_are_the_question_by_question_steps(measure: str) -> None:
    rng = np.random.default_rng(3)
    one = ModelCells("one", "r1", ("P0", "P1"), cells(rng, 25, ("P0", "P1"), 1))
    # Another run missing some questions, and with two responses to a few under P1.
    other_cells = cells(rng, 25, ("P0", "P1"), 1)
    other_cells = other_cells[~other_cells["question_id"].isin(["q3", "q7"])]
    extra = other_cells[other_cells["condition"] == "P1"].head(4).assign(repetition=1)
    other = ModelCells("other", "r2", ("P0", "P1"), pd.concat([other_cells, extra], ignore_index=True))
    for condition in ("P0", "P1"):
        a, b = _Responses(one).of(condition, measure), _Responses(other).of(condition, measure)
        assert a == reference_responses(one, condition, measure)
        assert b == reference_responses(other, condition, measure)
        data, _, _ = pair_step(a, b, measure)
        expected = reference_step(a, b, measure)
        np.testing.assert_array_equal(data.n_from, expected.n_from)
        np.testing.assert_array_equal(data.n_to, expected.n_to)
        assert len(data.matrices) == len(expected.matrices)
        for got, want in zip(data.matrices, expected.matrices, strict=True):
            np.testing.assert_array_equal(got, want)
    # The whole table, its steps bootstrapped together, against shift() of each reference step.
    table = divergence_noise_table([(one, other)], [measure], n_boot=B, n_permutations=100, seed=SEED)
    for row in table.itertuples():
        ref = shifts.shift(reference_step(reference_responses(one, str(row.condition), measure),
                                          reference_responses(other, str(row.condition), measure), measure),
                           n_boot=B, n_permutations=100, seed=SEED)
        np.testing.assert_array_equal([row.between, row.excess_ci_low, row.excess_ci_high, row.n_questions],
                                      [ref.between, ref.ci_low, ref.ci_high, ref.n_questions])


def test_the_answer_step_from_arrays_is_pair_steps_or_none_where_it_has_none() -> None:
    rng = np.random.default_rng(8)
    one = ModelCells("one", "r1", ("P0", "P1"), cells(rng, 30, ("P0", "P1"), 1))
    other_cells = cells(rng, 30, ("P0", "P1"), 1)
    other_cells = other_cells[~other_cells["question_id"].isin(["q2", "q11"])].iloc[::-1]  # missing, reordered
    other = ModelCells("other", "r2", ("P0", "P1"), other_cells.reset_index(drop=True))
    for condition in ("P0", "P1"):
        a, b = _Responses(one), _Responses(other)
        found = _single_answers_of(a, b, condition)
        assert found is not None
        expected, _, _ = pair_step(a.of(condition, "answer"), b.of(condition, "answer"), "answer")
        np.testing.assert_array_equal(found.n_from, expected.n_from)
        np.testing.assert_array_equal(found.n_to, expected.n_to)
        assert [m.tobytes() for m in found.matrices] == [m.tobytes() for m in expected.matrices]
        assert not a.repeated(condition) and not b.repeated(condition)
    # A second response to a shared question: no step of single responses (pair_step builds it per question).
    extra = one.cells[one.cells["condition"] == "P1"].head(1).assign(repetition=1)
    twice = ModelCells("twice", "r3", ("P0", "P1"), pd.concat([one.cells, extra], ignore_index=True))
    assert _single_answers_of(_Responses(twice), _Responses(other), "P1") is None
    assert _Responses(twice).repeated("P1") and not _Responses(twice).repeated("P0")
    assert _single_answers_of(_Responses(twice), _Responses(other), "P0") is not None
