"""Both readings in a comparison: parsed text beside first-token probabilities, and where they part.

Only runs recorded with ``generation.label_probs=true`` have a likelihood reading; the tables here use
those runs alone (a comparison may mix runs with and without it: the comparability check ignores the
option). Pure pandas over :class:`~prism.compare.tables.ModelCells`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from prism.compare.tables import ModelCells, has_key
from prism.results.label_prob_metrics import likelihood_condition_table

READINGS_COLUMNS = ("model", "condition", "n", "n_label_probs", "accuracy", "likelihood_accuracy",
                    "reading_agreement", "mean_label_mass", "mean_prob_tv")
DISAGREEMENT_COLUMNS = ("model", "question_id", "condition", "repetition", "correct_answer", "answer",
                        "likelihood_answer", "p_answer", "p_likelihood", "response", "prompt_sha256", "prompt")


def has_probabilities(model: ModelCells) -> bool:
    """Whether the run recorded label probabilities (some cell has a likelihood answer)."""
    column = model.cells.get("likelihood_answer")
    return column is not None and bool(column.notna().any())


def readings_table(models: Sequence[ModelCells], baseline: str) -> pd.DataFrame:
    """Per model with probabilities and condition: parsed accuracy beside the likelihood reading.

    Returns:
        Columns :data:`READINGS_COLUMNS` (see :func:`prism.results.label_prob_metrics.likelihood_condition_table`;
        ``n`` is the observed cells), runs without probabilities left out. A run whose items have no answer
        key has both accuracies empty (NaN), never 0.
    """
    frames = []
    for model in models:
        if not has_probabilities(model):
            continue
        table = likelihood_condition_table(model.cells.assign(error=None), model.conditions, baseline)
        if not has_key(model):  # compare reads a null ``correct`` as False: no key is not "all wrong"
            table[["accuracy", "likelihood_accuracy"]] = math.nan
        frames.append(table.rename(columns={"n_observed": "n"}).assign(model=model.label))
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in READINGS_COLUMNS})
    return pd.concat(frames, ignore_index=True)[list(READINGS_COLUMNS)]


def disagreements_table(models: Sequence[ModelCells]) -> pd.DataFrame:
    """Every cell whose parsed answer and likelihood answer are both there and differ, with its response.

    ``p_answer`` and ``p_likelihood`` are the probabilities of the parsed and the likelihood answer's
    option; ``prompt`` is the prompt text when the run's responses were readable.
    """
    rows = []
    for model in models:
        if has_probabilities(model):
            rows += parted_cells(model.cells, model.label, model.prompts)
    return pd.DataFrame(rows, columns=list(DISAGREEMENT_COLUMNS))


def parted_cells(cells: pd.DataFrame, label: str, prompts: Mapping[str, str]) -> list[dict[str, Any]]:
    """The rows of :func:`disagreements_table` for one run's observed scored records (``cells``).

    A record counts when its response was recovered, it has a likelihood answer, and the two differ; a run
    recorded without probabilities (no ``likelihood_answer`` column) has none.
    """
    if "likelihood_answer" not in cells.columns or cells.empty:
        return []
    recovered = cells["recovered"].fillna(False).astype(bool)
    parted = cells[recovered & cells["likelihood_answer"].notna() & (cells["answer"] != cells["likelihood_answer"])]
    rows = []
    for r in parted.to_dict("records"):
        probs = r["option_probs"] if isinstance(r["option_probs"], dict) else {}
        rows.append({"model": label, "question_id": r["question_id"], "condition": r["condition"],
                     "repetition": r["repetition"], "correct_answer": r["correct_answer"], "answer": r["answer"],
                     "likelihood_answer": r["likelihood_answer"], "p_answer": probs.get(r["answer"], math.nan),
                     "p_likelihood": probs.get(r["likelihood_answer"], math.nan), "response": r["response"],
                     "prompt_sha256": r["prompt_sha256"], "prompt": prompts.get(str(r["prompt_sha256"]), "")})
    return rows


def format_readings(table: pd.DataFrame) -> str:
    """The terminal table of both readings per model and condition."""
    def pct(value: float) -> str:
        return "   n/a" if value is None or math.isnan(value) else f"{100 * value:5.1f}%"

    width = max([10, *(len(str(c)) for c in table["condition"])])
    lines = [f"{'model':<12} {'condition':<{width}} {'parsed':>7} {'likelihood':>10} {'agree':>7} {'mass':>7} "
             f"{'prob TV':>7}"]
    for r in table.to_dict("records"):
        lines.append(f"{str(r['model'])[:12]:<12} {r['condition']:<{width}} {pct(r['accuracy']):>7} "
                     f"{pct(r['likelihood_accuracy']):>10} {pct(r['reading_agreement']):>7} "
                     f"{pct(r['mean_label_mass']):>7} {pct(r['mean_prob_tv']):>7}")
    return "\n".join(lines)
