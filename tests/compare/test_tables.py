"""The one-pass tables (accuracy, sensitivity, divergence, condition disagreement) against a row-by-row reference.

The reference is the straightforward computation: per row, filter the cells, merge, and call
:mod:`prism.stats.basics` (one bootstrap per interval). The tables must equal it exactly, NaN for NaN, on
the cases where counting once over codes could part from it: a condition missing from one run, one
question, rows in another order, a duplicated cell, a run without an answer key, UNKNOWN answers, repetitions.
"""

from __future__ import annotations

import dataclasses
import math
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from prism.compare import tables
from prism.compare.tables import ModelCells
from prism.stats import basics

N_BOOT, SEED = 150, 4


def model(label: str, seed: int, n_questions: int, conditions: tuple[str, ...] = ("P0", "P1", "P2"),
          repetitions: int = 1, drop: float = 0.1) -> ModelCells:
    """Random cells: answers A-D or UNKNOWN, a share of cells missing (failed requests)."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(n_questions):
        key = "ABCD"[q % 4]
        for c in conditions:
            for r in range(repetitions):
                if rng.random() < drop:
                    continue
                answer = None if rng.random() < 0.15 else str(rng.choice(list("ABCD")))
                rows.append((f"q{q}", c, r, answer, key))
    cells = pd.DataFrame(rows, columns=["question_id", "condition", "repetition", "answer", "correct_answer"])
    cells["repetition"] = cells["repetition"].astype("int64")
    cells["recovered"] = cells["answer"].notna()
    cells["correct"] = (cells["answer"] == cells["correct_answer"]).astype(bool)
    cells["category"] = basics.answer_categories(cells["answer"])
    cells["response"] = cells["category"]
    cells["prompt_sha256"] = cells["question_id"] + cells["condition"]
    return ModelCells(label, f"run-{label}", conditions, cells)


def reference_accuracy(models: list[ModelCells]) -> pd.DataFrame:
    rows = []
    for m in models:
        for c in m.conditions:
            cells = m.cells[m.cells["condition"] == c]
            if not tables.has_key(m):
                rows.append((m.label, c, len(cells), math.nan, math.nan, math.nan))
                continue
            est = basics.pooled_rate(cells["correct"], cells["question_id"], n_boot=N_BOOT, seed=SEED)
            rows.append((m.label, c, len(cells), est.value, est.ci_low, est.ci_high))
    return pd.DataFrame(rows, columns=list(tables.ACCURACY_COLUMNS))


def reference_sensitivity(models: list[ModelCells], baseline: str) -> pd.DataFrame:
    rows = []
    for m in models:
        base = m.cells[m.cells["condition"] == baseline]
        for c in m.conditions:
            own = m.cells[m.cells["condition"] == c]
            paired = base.merge(own, on=["question_id", "repetition"], suffixes=("_base", ""))
            delta = basics.delta_accuracy(paired["correct_base"], paired["correct"], paired["question_id"],
                                          n_boot=N_BOOT, seed=SEED)
            flip = basics.flip_rate(paired["category_base"], paired["category"], paired["question_id"],
                                    n_boot=N_BOOT, seed=SEED)
            discordant = basics.discordant_counts(paired["correct_base"], paired["correct"])
            tested = c != baseline and len(paired) > 0
            rows.append({"model": m.label, "condition": c, "delta_accuracy": delta.value,
                         "delta_ci_low": delta.ci_low, "delta_ci_high": delta.ci_high, "flip_rate": flip.value,
                         "flip_ci_low": flip.ci_low, "flip_ci_high": flip.ci_high,
                         "mcnemar_p": basics.mcnemar_exact(*discordant) if tested else math.nan,
                         "accuracy": float(own["correct"].mean()) if len(own) else math.nan})
    frame = pd.DataFrame(rows)
    keyless = frame["model"].isin([m.label for m in models if not tables.has_key(m)])
    frame.loc[keyless, ["accuracy", "delta_accuracy", "delta_ci_low", "delta_ci_high", "mcnemar_p"]] = math.nan
    return frame


def reference_divergence(models: list[ModelCells]) -> pd.DataFrame:
    rows = []
    for a, b in combinations(models, 2):
        conditions = tables.shared_conditions(a, b)
        within = [basics.within_pair_sums(m.cells[m.cells["condition"].isin(conditions)]) for m in (a, b)]
        paired = tables.pair_cells(a, b, conditions)
        for c in [*conditions, tables.POOLED]:
            cells = paired if c == tables.POOLED else paired[paired["condition"] == c]
            differ = cells["category_a"] != cells["category_b"]
            dis = basics.disagreement(cells["category_a"], cells["category_b"], cells["question_id"],
                                      n_boot=N_BOOT, seed=SEED)
            grouped = differ.astype(float).groupby(cells["question_id"], sort=False)
            between = pd.DataFrame({"differ": grouped.sum(), "cells": grouped.size()})
            exc = basics.excess(between, *within, n_boot=N_BOOT, seed=SEED)
            answered = cells["recovered_a"] & cells["recovered_b"]
            ca, cb = cells["correct_a"].astype(bool), cells["correct_b"].astype(bool)
            rows.append((a.label, b.label, c, dis.value, dis.ci_low, dis.ci_high,
                         float(differ[answered].mean()) if answered.any() else math.nan,
                         basics.cohens_kappa(cells["category_a"], cells["category_b"]), int((ca & cb).sum()),
                         int((ca & ~cb).sum()), int((~ca & cb).sum()), int((~ca & ~cb).sum()),
                         exc.value, exc.ci_low, exc.ci_high))
    return pd.DataFrame(rows, columns=list(tables.DIVERGENCE_COLUMNS))


def reference_condition_disagreement(models: list[ModelCells]) -> pd.DataFrame:
    rows = []
    for m in models:
        sums = basics.within_pair_sums(m.cells)
        est = basics.ratio_estimate(sums["differ"], sums["pairs"], n_boot=N_BOOT, seed=SEED)
        rows.append((m.label, est.value, est.ci_low, est.ci_high, int((sums["pairs"] > 0).sum())))
    return pd.DataFrame(rows, columns=list(tables.CONDITION_DISAGREEMENT_COLUMNS))


def cases() -> dict[str, list[ModelCells]]:
    plain = [model(f"m{i}", i, 30) for i in range(3)]
    shuffled = dataclasses.replace(plain[1], cells=plain[1].cells.sample(frac=1.0, random_state=0))
    missing = model("gap", 7, 30, conditions=("P0", "P2"))  # no P1: pairs share two conditions
    duplicated = dataclasses.replace(plain[2], cells=pd.concat([plain[2].cells, plain[2].cells.iloc[[3, 3, 8]]],
                                                                ignore_index=True))
    keyless_cells = plain[0].cells.assign(correct_answer=None, correct=False)
    keyless = dataclasses.replace(plain[0], label="survey", cells=keyless_cells)
    listed_empty = dataclasses.replace(plain[0], label="listed", conditions=("P0", "P1", "P2", "P3"))
    return {
        "plain": plain,
        "reordered, missing condition, duplicate cell, no key": [shuffled, missing, duplicated, keyless],
        "one question": [model(f"o{i}", 20 + i, 1, drop=0.0) for i in range(3)],
        "ties: every answer the same": [dataclasses.replace(m, cells=m.cells.assign(category="A", correct=True))
                                        for m in plain],
        "repetitions": [model(f"r{i}", 30 + i, 12, repetitions=3) for i in range(3)],
        "a listed condition without cells": [listed_empty, plain[1]],
        "one condition": [model(f"c{i}", 40 + i, 10, conditions=("P0",)) for i in range(2)],
    }


@pytest.mark.parametrize("case", list(cases()))
def test_one_pass_tables_equal_the_row_by_row_reference(case: str) -> None:
    models = cases()[case]
    pd.testing.assert_frame_equal(tables.accuracy_table(models, n_boot=N_BOOT, seed=SEED),
                                  reference_accuracy(models), check_exact=True)
    sensitivity = tables.sensitivity_table(models, "P0", n_boot=N_BOOT, seed=SEED)
    want = reference_sensitivity(models, "P0")
    got = sensitivity.set_index(["model", "condition"]).loc[list(zip(want["model"], want["condition"],
                                                                         strict=True))]
    pd.testing.assert_frame_equal(got[list(want.columns[2:])].reset_index(drop=True), want.iloc[:, 2:],
                                  check_exact=True, check_dtype=False)
    pd.testing.assert_frame_equal(tables.divergence_table(models, n_boot=N_BOOT, seed=SEED),
                                  reference_divergence(models), check_exact=True)
    pd.testing.assert_frame_equal(tables.condition_disagreement_table(models, n_boot=N_BOOT, seed=SEED),
                                  reference_condition_disagreement(models), check_exact=True)
