"""The likelihood measures against an independent recomputation on scripted probabilities."""

from __future__ import annotations

import math
import random

import numpy as np
import pandas as pd
import pytest

from prism.label_probs import likelihood_fields
from prism.results.label_prob_metrics import (
    bias_table,
    likelihood_condition_table,
    likelihood_metrics,
    pride_prior,
    prob_tv_table,
)
from prism.types import Prompt

LABELS = ("A", "B", "C", "D")
# Condition -> display order (canonical option shown at each position) and displayed labels.
CONDITIONS = {"P0": (("A", "B", "C", "D"), LABELS), "P1": (("A", "B", "C", "D"), LABELS),
              "rev": (("D", "C", "B", "A"), LABELS), "num": (("A", "B", "C", "D"), ("1", "2", "3", "4"))}


def scripted(seed: int = 3, n_questions: int = 6) -> tuple[pd.DataFrame, list[dict]]:
    """Scored records with random probabilities, parsed answers, a missing reading and a failed request."""
    rng = random.Random(seed)
    records = []
    for q in range(n_questions):
        key = rng.choice("ABCD")
        for condition, (order, labels) in CONDITIONS.items():
            prompt = Prompt(f"q{q}", condition, "t", labels, order, ("w", "x", "y", "z"), "1")
            weights = [rng.random() ** 3 for _ in labels]
            probs = {label: w / sum(weights) for label, w in zip(labels, weights, strict=True)}
            parsed = rng.choice([None, *order])
            record = {"question_id": f"q{q}", "condition": condition, "repetition": 0, "answer": parsed,
                      "recovered": parsed is not None, "compliant": False, "correct": parsed == key,
                      "correct_answer": key, "error": None, "label_mass": rng.random(), "label_probs": probs}
            if (q, condition) == (1, "P1"):  # a top-k list without any label: no label_probs
                del record["label_probs"]
                record["label_mass"] = 0.0
            if (q, condition) == (2, "rev"):  # a failed request: not observed at all
                record.update(error="timeout", answer=None, recovered=False, correct=False, label_mass=None)
                del record["label_probs"]
            record.update(likelihood_fields(record, prompt, key))
            records.append(record)
    return pd.DataFrame(records), records


def by_hand(records: list[dict]) -> dict[str, float]:
    """The metrics recomputed with plain loops from their definitions."""
    observed = [r for r in records if r["error"] is None]
    with_probs = [r for r in observed if "likelihood_answer" in r]
    both = [r for r in with_probs if r["recovered"]]
    out = {"likelihood_accuracy": sum(r["likelihood_correct"] for r in with_probs) / len(with_probs),
           "reading_agreement": sum(r["answer"] == r["likelihood_answer"] for r in both) / len(both),
           "mean_label_mass": sum(r["label_mass"] for r in observed) / len(observed)}
    for condition in CONDITIONS:
        own = [r for r in with_probs if r["condition"] == condition]
        out[f"likelihood_accuracy/{condition}"] = sum(r["likelihood_correct"] for r in own) / len(own)
    questions = sorted({r["question_id"] for r in records})
    majority = agreement = unanimous = 0.0
    for q in questions:
        answers = [r["likelihood_answer"] for r in with_probs if r["question_id"] == q]
        counts = {a: answers.count(a) for a in answers}
        top = max(counts.values())
        leaders = [a for a, c in counts.items() if c == top]
        key = next(r["correct_answer"] for r in records if r["question_id"] == q)
        majority += len(leaders) == 1 and leaders[0] == key
        agreement += top / len(answers)
        unanimous += len(answers) == len(CONDITIONS) and len(counts) == 1
    out["likelihood_question_majority_accuracy"] = majority / len(questions)
    out["likelihood_mean_agreement"] = agreement / len(questions)
    out["likelihood_answer_unanimous_rate"] = unanimous / len(questions)
    tvs = {}
    for r in with_probs:
        if r["condition"] == "P0":
            continue
        base = next((b for b in with_probs if b["condition"] == "P0" and b["question_id"] == r["question_id"]), None)
        if base is not None:
            tvs.setdefault(r["condition"], []).append(
                sum(abs(r["option_probs"][o] - base["option_probs"][o]) for o in "ABCD") / 2)
    flat = [v for values in tvs.values() for v in values]
    out["mean_prob_tv"] = sum(flat) / len(flat)
    for condition, values in tvs.items():
        out[f"mean_prob_tv/{condition}"] = sum(values) / len(values)
    out["n_label_probs"] = len(with_probs)
    out["label_probs_missing"] = len(observed) - len(with_probs)
    return out


def test_run_metrics_equal_an_independent_recomputation() -> None:
    frame, records = scripted()
    metrics = likelihood_metrics(frame, list(CONDITIONS), [f"q{q}" for q in range(6)], 1, "P0")
    for name, value in by_hand(records).items():
        assert metrics[name] == pytest.approx(value), name


def test_prob_tv_compares_canonical_options_so_a_reversed_order_is_not_a_shift() -> None:
    p0 = {"A": 0.7, "B": 0.1, "C": 0.1, "D": 0.1}
    rows = [{"question_id": "q", "condition": c, "repetition": 0, "error": None, "likelihood_answer": "A",
             "option_probs": p0} for c in ("P0", "rev")]
    assert prob_tv_table(pd.DataFrame(rows), "P0")["prob_tv"].tolist() == [0.0]


def test_condition_table_puts_both_readings_side_by_side() -> None:
    frame, records = scripted()
    table = likelihood_condition_table(frame, list(CONDITIONS), "P0").set_index("condition")
    expected = by_hand(records)
    rev = [r for r in records if r["condition"] == "rev" and r["error"] is None]
    assert table.loc["rev", "accuracy"] == pytest.approx(sum(r["correct"] for r in rev) / len(rev))
    assert table.loc["rev", "likelihood_accuracy"] == pytest.approx(expected["likelihood_accuracy/rev"])
    assert table.loc["rev", "mean_prob_tv"] == pytest.approx(expected["mean_prob_tv/rev"])
    assert math.isnan(table.loc["P0", "mean_prob_tv"])
    assert table.loc["P1", "n_label_probs"] == 5  # one of six had no label in its top-k list


def synthetic_cells(prior: list[float], orders: list[tuple[int, ...]], n_questions: int = 25) -> pd.DataFrame:
    """Observed distributions made exactly as PriDe models them: prior(position) x debiased(option)."""
    rng = np.random.default_rng(7)
    rows = []
    for q in range(n_questions):
        debiased = rng.dirichlet(np.ones(len(prior)))
        for c, order in enumerate(orders):
            weights = np.array([prior[pos] * debiased[order[pos]] for pos in range(len(prior))])
            probs = weights / weights.sum()
            for pos, option in enumerate(order):
                rows.append({"question_id": f"q{q}", "condition": f"c{c}", "repetition": 0, "position": pos + 1,
                             "label": "ABCD"[pos], "option": "ABCD"[option], "prob": probs[pos],
                             "likelihood": bool(probs[pos] == probs.max()), "parsed": False,
                             "correct": option == 0, "baseline_labels": True})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("orders", [
    [(0, 1, 2, 3), (3, 0, 1, 2), (2, 3, 0, 1), (1, 2, 3, 0)],  # PriDe's cyclic permutations
    [(0, 1, 2, 3), (3, 2, 1, 0), (3, 1, 2, 0), (3, 0, 1, 2)],  # PRISM's option_order family
])
def test_pride_prior_recovers_the_prior_the_data_were_made_with(orders) -> None:
    prior = [0.45, 0.25, 0.2, 0.1]
    assert pride_prior(synthetic_cells(prior, orders)) == pytest.approx(prior, abs=1e-9)


def test_pride_prior_is_undefined_when_no_option_ever_moves() -> None:
    assert pride_prior(synthetic_cells([0.4, 0.3, 0.2, 0.1], [(0, 1, 2, 3), (0, 1, 2, 3)])) is None


def test_pride_prior_is_undefined_when_orders_leave_positions_apart() -> None:
    # Reversal alone moves options only between positions 1<->4 and 2<->3: nothing relates 1 to 2.
    assert pride_prior(synthetic_cells([0.4, 0.3, 0.2, 0.1], [(0, 1, 2, 3), (3, 2, 1, 0)])) is None


def test_bias_table_means_per_position_and_label_match_a_recomputation() -> None:
    cells = synthetic_cells([0.4, 0.3, 0.2, 0.1], [(0, 1, 2, 3), (3, 2, 1, 0), (3, 0, 1, 2)], n_questions=5)
    table = bias_table(cells)
    positions = table[(table["kind"] == "position") & (table["condition"] == "all")].set_index("position")
    for pos in range(1, 5):
        values = cells.loc[cells["position"] == pos, "prob"]
        assert positions.loc[pos, "mean_prob"] == pytest.approx(sum(values) / len(values))
        assert positions.loc[pos, "label"] == "ABCD"[pos - 1]
    prior = table[table["kind"] == "pride_prior"]["mean_prob"].tolist()
    assert prior == pytest.approx([0.4, 0.3, 0.2, 0.1], abs=1e-9)
    # Likelihood rates per position sum to one over positions (one answer per cell).
    assert positions["likelihood_rate"].sum() == pytest.approx(1.0)
