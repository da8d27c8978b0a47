"""What the readings section shows, in ``report.html`` and on the published site's run pages.

Every answer has up to three readings: the option the parser recovered from the generated text; with
``generation.label_probs=true``, the option whose label the model's first reply token most preferred; with
``generation.cloze=true``, the option whose continuation is likeliest after the prompt (lm-eval's ``acc``, and
``acc_norm`` per character). The section shows them side by side per model and condition (parsed accuracy;
likelihood accuracy, reading agreement, label mass, TV distance from the baseline's option distribution; cloze
acc, acc_norm and agreement with the parsed answer), only the readings some run recorded, then the cells where
each parts from the parsed answer, each with its raw response. Items without an answer key have no accuracy in
any reading (:data:`prism.formatting.NO_KEY`), as in every other table.

The report takes its rows from compare's ``readings`` (``readings.csv``), ``reading_disagreements`` and
``cloze_disagreements`` tables (:mod:`prism.compare.label_prob_tables`, :mod:`prism.compare.cloze_tables`);
the site takes them from each run's logged per-condition metrics and its scored records, so each number on
the site is the MLflow metric it names (``data-run``, ``data-metric``). Plain values only;
``prism/templates/sections/two_readings.j2`` turns them into markup.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from prism.formatting import missing
from prism.names import (
    METRIC_ACCURACY,
    METRIC_CLOZE_ACCURACY,
    METRIC_CLOZE_AGREEMENT,
    METRIC_CLOZE_NORM_ACCURACY,
    METRIC_LIKELIHOOD_ACCURACY,
    METRIC_MEAN_LABEL_MASS,
    METRIC_MEAN_PROB_TV,
    METRIC_N_CLOZE,
    METRIC_N_LABEL_PROBS,
    METRIC_READING_AGREEMENT,
    condition_metric,
)

# The columns of the side-by-side table: (the measure's name in readings.csv and in MLflow, its heading),
# the parsed reading's, then the label probabilities', then the cloze reading's.
PARSED_MEASURES = ((METRIC_ACCURACY, "parsed accuracy"),)
LIKELIHOOD_MEASURES = ((METRIC_LIKELIHOOD_ACCURACY, "likelihood accuracy"),
                       (METRIC_READING_AGREEMENT, "reading agreement"), (METRIC_MEAN_LABEL_MASS, "label mass"),
                       (METRIC_MEAN_PROB_TV, "TV from the baseline"))
CLOZE_MEASURES = ((METRIC_CLOZE_ACCURACY, "cloze acc"), (METRIC_CLOZE_NORM_ACCURACY, "cloze acc_norm"),
                  (METRIC_CLOZE_AGREEMENT, "cloze = parsed"))
MEASURES = (*PARSED_MEASURES, *LIKELIHOOD_MEASURES, *CLOZE_MEASURES)
# The measures that need an answer key.
KEYED = (METRIC_ACCURACY, METRIC_LIKELIHOOD_ACCURACY, METRIC_CLOZE_ACCURACY, METRIC_CLOZE_NORM_ACCURACY)
# How many parted cells a page lists (the CSV and the run's scored records have them all).
TOP_PARTED = 12


@dataclass(frozen=True)
class ReadingRow:
    """One model and condition, both readings side by side.

    Attributes:
        model: The run's name in the tables.
        condition: The condition.
        values: Each of :data:`MEASURES` (NaN when undefined).
        no_key: Whether the items have no answer key (the accuracies are then n/a, not undefined).
        n: Observed cells, when known.
        n_label_probs: Of those, the cells with label probabilities, when known.
        run_id: The run whose logged metric ``<measure>/<condition>`` each value is (the site), or None.
    """

    model: str
    condition: str
    values: Mapping[str, float]
    no_key: bool
    n: int | None = None
    n_label_probs: int | None = None
    run_id: str | None = None


@dataclass(frozen=True)
class ClozePartedCell:
    """A cell whose parsed answer and cloze answer (``acc``'s) differ, as the page lists it.

    Attributes:
        model: The run's name in the tables.
        question_id: The question.
        condition: The condition.
        repetition: The repetition.
        question: The question's stem ("" when the frozen questions could not be read).
        options: Its options as ``A. text`` lines (canonical labels).
        key: The canonical label of the correct option, or None (no key).
        answer: The parsed answer (canonical label).
        cloze_answer: The likeliest continuation's option (``acc``).
        cloze_norm_answer: The likeliest per character (``acc_norm``).
        response: The raw response, whole.
    """

    model: str
    question_id: str
    condition: str
    repetition: int
    question: str
    options: tuple[str, ...]
    key: str | None
    answer: str
    cloze_answer: str
    cloze_norm_answer: str
    response: str


@dataclass(frozen=True)
class PartedCell:
    """A cell whose parsed answer and likelihood answer differ, as the page lists it.

    Attributes:
        model: The run's name in the tables.
        question_id: The question.
        condition: The condition.
        repetition: The repetition.
        question: The question's stem ("" when the frozen questions could not be read).
        options: Its options as ``A. text`` lines (canonical labels).
        key: The canonical label of the correct option, or None (no key).
        answer: The parsed answer (canonical label).
        p_answer: The probability of the parsed answer's option.
        likelihood_answer: The likelihood answer (canonical label).
        p_likelihood: Its probability.
        response: The raw response, whole.
    """

    model: str
    question_id: str
    condition: str
    repetition: int
    question: str
    options: tuple[str, ...]
    key: str | None
    answer: str
    p_answer: float
    likelihood_answer: str
    p_likelihood: float
    response: str


def report_rows(readings: pd.DataFrame) -> list[ReadingRow]:
    """The report's rows, from compare's ``readings`` table.

    That table leaves a model's parsed accuracy NaN only where it has no answer key or no observed cell
    (:func:`prism.compare.label_prob_tables.readings_table`), so observed cells without an accuracy mean no key.
    """
    rows = []
    for r in readings.to_dict("records"):
        values = {key: _float(r[key]) for key, _ in MEASURES}
        no_key = int(r["n"]) > 0 and math.isnan(values[METRIC_ACCURACY])
        rows.append(ReadingRow(str(r["model"]), str(r["condition"]), values, no_key, int(r["n"]),
                               int(r[METRIC_N_LABEL_PROBS])))
    return rows


def site_rows(label: str, run_id: str, conditions: Sequence[str], metrics: Mapping[str, float],
              no_key: bool) -> list[ReadingRow]:
    """A run's rows on the site: its logged ``<measure>/<condition>`` metrics (NaN where none was logged)."""
    return [ReadingRow(label, condition, {key: float(metrics.get(condition_metric(key, condition), math.nan))
                                          for key, _ in MEASURES}, no_key, run_id=run_id)
            for condition in conditions]


def has_two_readings(metrics: Mapping[str, float]) -> bool:
    """Whether a run logged a reading beside the parsed one (``generation.label_probs`` or ``generation.cloze``)."""
    return METRIC_READING_AGREEMENT in metrics or METRIC_N_LABEL_PROBS in metrics or METRIC_N_CLOZE in metrics


def shown_measures(rows: Sequence[ReadingRow]) -> tuple[tuple[str, str], ...]:
    """The columns the rows fill: the parsed accuracy, then each other reading some row has a value of."""
    def present(group: tuple[tuple[str, str], ...]) -> bool:
        return any(not math.isnan(r.values[key]) for r in rows for key, _ in group)

    return (*PARSED_MEASURES, *(LIKELIHOOD_MEASURES if present(LIKELIHOOD_MEASURES) else ()),
            *(CLOZE_MEASURES if present(CLOZE_MEASURES) else ()))


def cloze_parted(rows: Sequence[Mapping[Any, Any]], questions: Mapping[str, Mapping[str, Any]],
                 limit: int = TOP_PARTED) -> list[ClozePartedCell]:
    """The first ``limit`` cells whose parsed and cloze answers differ, in the rows' order.

    Args:
        rows: Rows of :data:`prism.compare.cloze_tables.CLOZE_DISAGREEMENT_COLUMNS` (the CSV's, or
            :func:`cloze_parted_rows`' for one run).
        questions: Frozen questions by id, for the stem and options.
        limit: How many to list.
    """
    cells = []
    for r in rows[:limit]:
        q = questions.get(str(r["question_id"])) or {}
        options = tuple(f"{label}. {text}" for label, text in zip(q.get("labels", ()), q.get("options", ()),
                                                                   strict=False))
        key = r.get("correct_answer")
        norm = r.get("cloze_norm_answer")
        cells.append(ClozePartedCell(str(r["model"]), str(r["question_id"]), str(r["condition"]),
                                     int(r["repetition"]), str(q.get("question", "")), options,
                                     None if missing(key) else str(key), str(r["answer"]), str(r["cloze_answer"]),
                                     "" if missing(norm) else str(norm),
                                     "" if missing(r["response"]) else str(r["response"])))
    return cells


def cloze_parted_rows(cells: pd.DataFrame, label: str) -> list[dict[str, Any]]:
    """One run's scored records whose parsed and cloze answers are both there and differ (the CSV's rows)."""
    if "cloze_answer" not in cells.columns or cells.empty:
        return []
    both = cells["answer"].notna() & cells["cloze_answer"].notna()
    parted = cells[both & (cells["answer"] != cells["cloze_answer"])]
    return [{"model": label, "question_id": r["question_id"], "condition": r["condition"],
             "repetition": r["repetition"], "correct_answer": r.get("correct_answer"), "answer": r["answer"],
             "cloze_answer": r["cloze_answer"], "cloze_norm_answer": r.get("cloze_norm_answer"),
             "response": r.get("response")} for r in parted.to_dict("records")]


def parted(rows: Sequence[Mapping[Any, Any]], questions: Mapping[str, Mapping[str, Any]],
           limit: int = TOP_PARTED) -> list[PartedCell]:
    """The first ``limit`` parted cells, the likeliest-first reading furthest from the parsed one first.

    Args:
        rows: Rows of :data:`prism.compare.label_prob_tables.DISAGREEMENT_COLUMNS` (the CSV's, or
            :func:`prism.compare.label_prob_tables.parted_cells`' for one run).
        questions: Frozen questions by id, for the stem and options.
        limit: How many to list.
    """
    def gap(row: Mapping[Any, Any]) -> float:
        p, q = _float(row["p_likelihood"]), _float(row["p_answer"])
        return -math.inf if math.isnan(p) or math.isnan(q) else p - q

    ranked = sorted(rows, key=lambda r: (-gap(r), str(r["model"]), str(r["question_id"]), str(r["condition"]),
                                         int(r["repetition"])))
    cells = []
    for r in ranked[:limit]:
        q = questions.get(str(r["question_id"])) or {}
        options = tuple(f"{label}. {text}" for label, text in zip(q.get("labels", ()), q.get("options", ()),
                                                                   strict=False))
        key = r.get("correct_answer")
        cells.append(PartedCell(str(r["model"]), str(r["question_id"]), str(r["condition"]), int(r["repetition"]),
                                str(q.get("question", "")), options, None if missing(key) else str(key),
                                str(r["answer"]), _float(r["p_answer"]), str(r["likelihood_answer"]),
                                _float(r["p_likelihood"]), "" if missing(r["response"]) else str(r["response"])))
    return cells


def _float(value: Any) -> float:
    return math.nan if missing(value) else float(value)
