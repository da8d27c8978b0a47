"""The three readings in a comparison: parsed text, first-token label probabilities and the cloze reading.

Runs recorded with ``generation.cloze=true`` have each option's continuation log-likelihood (``prism.cloze``):
``cloze_answer`` (lm-eval's ``acc``) and ``cloze_norm_answer`` (``acc_norm``) per cell. This table puts the
three readings side by side per model and condition: its columns join the label-probability table's in the
one ``readings.csv`` (:func:`merged_readings_table`; the label-probability columns are empty for runs without
``generation.label_probs``, the cloze columns for runs without ``generation.cloze``), and it lists the cells
where the cloze and parsed readings part (``cloze_disagreements.csv``). Pure pandas over
:class:`~prism.compare.tables.ModelCells`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from prism.compare.label_prob_tables import READINGS_COLUMNS
from prism.compare.tables import ModelCells, has_key

CLOZE_READINGS_COLUMNS = ("model", "condition", "n", "n_cloze", "accuracy", "likelihood_accuracy", "cloze_accuracy",
                          "cloze_norm_accuracy", "cloze_agreement", "cloze_likelihood_agreement")
#: The cloze reading's columns of ``readings.csv``, after the label-probability table's own.
CLOZE_COLUMNS = ("n_cloze", "cloze_accuracy", "cloze_norm_accuracy", "cloze_agreement", "cloze_likelihood_agreement")
#: ``readings.csv``: both tables' columns, each once.
MERGED_READINGS_COLUMNS = (*READINGS_COLUMNS, *CLOZE_COLUMNS)
CLOZE_DISAGREEMENT_COLUMNS = ("model", "question_id", "condition", "repetition", "correct_answer", "answer",
                              "likelihood_answer", "cloze_answer", "cloze_norm_answer", "response")


def has_cloze(model: ModelCells) -> bool:
    """Whether the run recorded the cloze reading (some cell has a cloze answer)."""
    column = model.cells.get("cloze_answer")
    return column is not None and bool(column.notna().any())


def _share(mask: pd.Series) -> float:
    return float(mask.mean()) if len(mask) else math.nan


def cloze_readings_table(models: Sequence[ModelCells]) -> pd.DataFrame:
    """Per model with the cloze reading and condition: the three readings' accuracies and agreements.

    ``accuracy`` is the parsed reading (UNKNOWN counts as wrong), ``likelihood_accuracy`` the label
    probabilities' (empty without them), ``cloze_accuracy`` / ``cloze_norm_accuracy`` lm-eval's ``acc`` /
    ``acc_norm``; ``cloze_agreement`` is, of the cells with a parsed answer and a cloze answer, the share
    naming the same option, ``cloze_likelihood_agreement`` the same against the label probabilities'.
    Accuracies are empty (NaN) for items without a key.
    """
    rows = []
    for model in models:
        if not has_cloze(model):
            continue
        keyed = has_key(model)
        cells = model.cells
        for condition in model.conditions:
            part = cells[cells["condition"] == condition]
            read = part[part["cloze_answer"].notna()]
            likely = part["likelihood_answer"] if "likelihood_answer" in part else pd.Series(dtype=object)
            has_likely = bool(likely.notna().any())
            parsed = read[read["answer"].notna()]
            both = read[read["likelihood_answer"].notna()] if has_likely else read.iloc[0:0]
            rows.append({
                "model": model.label, "condition": condition, "n": len(part), "n_cloze": len(read),
                "accuracy": _share(part["answer"] == part["correct_answer"]) if keyed else math.nan,
                "likelihood_accuracy": (_share(part["likelihood_answer"] == part["correct_answer"])
                                        if keyed and has_likely else math.nan),
                "cloze_accuracy": _share(read["cloze_answer"] == read["correct_answer"]) if keyed else math.nan,
                "cloze_norm_accuracy": (_share(read["cloze_norm_answer"] == read["correct_answer"])
                                        if keyed else math.nan),
                "cloze_agreement": _share(parsed["cloze_answer"] == parsed["answer"]),
                "cloze_likelihood_agreement": (_share(both["cloze_answer"] == both["likelihood_answer"])
                                               if has_likely else math.nan),
            })
    return pd.DataFrame(rows, columns=list(CLOZE_READINGS_COLUMNS))


def merged_readings_table(models: Sequence[ModelCells], label_probs: pd.DataFrame,
                          cloze: pd.DataFrame) -> pd.DataFrame:
    """``readings.csv``: the label-probability table (``label_probs``) and the cloze table side by side.

    One row per model with either reading and condition, in the comparison's order. Every column and
    value of the label-probability table (:data:`~prism.compare.label_prob_tables.READINGS_COLUMNS`) is
    kept as it is, then the cloze columns (:data:`CLOZE_COLUMNS`) follow, empty (NaN) for a run without the
    cloze reading. A run with the cloze reading only takes ``n`` and the parsed ``accuracy`` from the cloze
    table, has ``n_label_probs`` 0 and its label-probability measures empty.
    """
    def keyed(frame: pd.DataFrame) -> dict[tuple[str, str], dict[Any, Any]]:
        return {(str(r["model"]), str(r["condition"])): r for r in frame.to_dict("records")}

    by_label, by_cloze = keyed(label_probs), keyed(cloze)
    rows = []
    for model in models:
        for condition in model.conditions:
            key = (model.label, condition)
            if key not in by_label and key not in by_cloze:
                continue
            row: dict[str, object] = {c: math.nan for c in MERGED_READINGS_COLUMNS}
            if key in by_label:
                row.update({c: by_label[key][c] for c in READINGS_COLUMNS})
            else:
                row.update({"model": model.label, "condition": condition, "n": by_cloze[key]["n"], "n_label_probs": 0,
                            "accuracy": by_cloze[key]["accuracy"]})
            if key in by_cloze:
                row.update({c: by_cloze[key][c] for c in CLOZE_COLUMNS})
            rows.append(row)
    return pd.DataFrame(rows, columns=list(MERGED_READINGS_COLUMNS))


def cloze_disagreements_table(models: Sequence[ModelCells]) -> pd.DataFrame:
    """Every cell whose parsed answer and cloze answer are both there and differ, with its response."""
    rows = []
    for model in models:
        if not has_cloze(model):
            continue
        cells = model.cells
        both = cells["answer"].notna() & cells["cloze_answer"].notna()
        parted = cells[both & (cells["answer"] != cells["cloze_answer"])]
        for r in parted.to_dict("records"):
            rows.append({"model": model.label, **{c: r.get(c) for c in CLOZE_DISAGREEMENT_COLUMNS if c != "model"}})
    return pd.DataFrame(rows, columns=list(CLOZE_DISAGREEMENT_COLUMNS))


def format_cloze_readings(table: pd.DataFrame) -> str:
    """The terminal table of the three readings per model and condition."""
    def pct(value: float) -> str:
        return "   n/a" if value is None or math.isnan(value) else f"{100 * value:5.1f}%"

    width = max([10, *(len(str(c)) for c in table["condition"])])
    lines = [f"{'model':<12} {'condition':<{width}} {'parsed':>7} {'labelp':>7} {'acc':>7} {'acc_norm':>8} "
             f"{'agree':>7}"]
    for r in table.to_dict("records"):
        lines.append(f"{str(r['model'])[:12]:<12} {r['condition']:<{width}} {pct(r['accuracy']):>7} "
                     f"{pct(r['likelihood_accuracy']):>7} {pct(r['cloze_accuracy']):>7} "
                     f"{pct(r['cloze_norm_accuracy']):>8} {pct(r['cloze_agreement']):>7}")
    return "\n".join(lines)
