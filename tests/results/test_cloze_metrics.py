"""The third reading's measures (prism.results.cloze_metrics)."""

from __future__ import annotations

from prism.results.cloze_metrics import cloze_condition_table, cloze_frame, cloze_metrics, cloze_row


def row(q: str, condition: str, answer: str | None, key: str | None, cloze: str, norm: str) -> dict:
    return cloze_row({"question_id": q, "condition": condition, "repetition": 0, "answer": answer,
                      "correct_answer": key, "cloze_answer": cloze, "cloze_norm_answer": norm,
                      "cloze_source": "embedded", "error": None})

def test_cloze_accuracy_norm_accuracy_and_agreement_per_condition() -> None:
    frame = cloze_frame([row("q1", "C0", "A", "A", "A", "B"), row("q2", "C0", None, "B", "B", "B"),
                         row("q1", "P0", "B", "A", "A", "A"), row("q2", "P0", "B", "B", "B", "A")])
    metrics = cloze_metrics(frame, ["C0", "P0"])
    assert metrics["cloze_accuracy"] == 1.0 and metrics["cloze_norm_accuracy"] == 0.5
    assert metrics["cloze_agreement"] == 2 / 3  # of the three cells with a parsed answer
    assert metrics["cloze_agreement/C0"] == 1.0 and metrics["cloze_norm_accuracy/P0"] == 0.5
    assert metrics["n_cloze"] == 4.0
    table = cloze_condition_table(frame, ["C0", "P0"]).set_index("condition")
    assert table.loc["P0", "cloze_agreement"] == 0.5

def test_items_without_a_key_have_no_keyed_cloze_metric_and_a_failed_cell_no_row() -> None:
    frame = cloze_frame([row("q1", "C0", "A", None, "A", "A")])
    metrics = cloze_metrics(frame, ["C0"])
    assert "cloze_accuracy" not in metrics and metrics["cloze_agreement"] == 1.0
    assert cloze_row({"cloze_answer": "A", "error": "timeout"}) is None
    assert cloze_condition_table(frame, ["C0"]).loc[0, "cloze_accuracy"] is None  # an empty cell in cloze.csv
