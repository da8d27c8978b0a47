"""Mean consistency per condition family and dataset type, per model (``comparison/consistency_by_type.csv``).

The layout of the robustness paper's Table 2: one row per model and family, one column per dataset type
(``objective``, ``subjective``) and their difference. Consistency is the run's own measure
(:mod:`prism.results.consistency`): a non-baseline response is consistent when its answer equals the baseline's
answer for the same question and repetition (UNKNOWN an answer of its own). Per question and family it
is the share of its compared pairs that are consistent; a cell of the table is the mean of that over every
question of the model's runs on datasets of that type, so a dataset weighs by its number of questions.
The ``all`` row of a model is the mean over all its (question, family) values of the type. Pure pandas.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from prism.compare.tables import ModelCells
from prism.questions.spec import DATASET_TYPES
from prism.results.consistency import question_consistency

ALL_FAMILIES = "all"


def question_family_consistency(models: Sequence[ModelCells], baseline: str) -> pd.DataFrame:
    """Per run, question and family: consistency with the baseline.

    Each row is :func:`prism.results.consistency.question_consistency` of one run.

    A condition without a recorded family falls back to its condition set's name, as the clustered
    model's does (:func:`prism.compare.noise.consistency_responses`).

    Returns:
        Columns ``model``, ``dataset``, ``dataset_type``, ``question_id``, ``family``, ``consistency``
        (questions where nothing was compared left out).
    """
    frames = []
    for model in models:
        fallback = model.axis or "conditions"
        families = {c: ("baseline" if c == baseline else model.families.get(c) or fallback) for c in model.conditions}
        cells = model.cells.assign(error=None, answer=model.cells["category"].where(
            model.cells["category"] != "UNKNOWN", None))
        ids = list(dict.fromkeys(cells["question_id"]))
        table = question_consistency(cells, families, baseline, ids).dropna(subset=["consistency"])
        frames.append(table.assign(model=model.model or model.label, dataset=model.dataset,
                                   dataset_type=model.dataset_type))
    columns = ["model", "dataset", "dataset_type", "question_id", "family", "consistency"]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]


def consistency_by_type_table(models: Sequence[ModelCells], baseline: str) -> pd.DataFrame:
    """Mean consistency per model and family (then ``all``), one column per dataset type present.

    Returns:
        Columns ``model``, ``family``, a column per dataset type in :data:`DATASET_TYPES` order (NaN where
        the model has no run of that type), ``difference`` (subjective minus objective) when both types are
        there, and ``n_<type>`` (the questions behind each mean).
    """
    values = question_family_consistency(models, baseline)
    types = [t for t in DATASET_TYPES if t in set(values["dataset_type"])]
    rows = []
    for model, own in values.groupby("model", sort=False):
        for family in [*dict.fromkeys(own["family"]), ALL_FAMILIES]:
            cells = own if family == ALL_FAMILIES else own[own["family"] == family]
            row: dict[str, object] = {"model": model, "family": family}
            for kind in types:
                typed = cells[cells["dataset_type"] == kind]
                row[kind] = float(typed["consistency"].mean()) if len(typed) else float("nan")
                row[f"n_{kind}"] = int(typed[["dataset", "question_id"]].drop_duplicates().shape[0])
            rows.append(row)
    columns = ["model", "family", *types, *(["difference"] if len(types) == 2 else []), *(f"n_{t}" for t in types)]
    table = pd.DataFrame(rows, columns=[c for c in columns if c != "difference"])
    if len(types) == 2:
        table["difference"] = table["subjective"] - table["objective"]
    return table[columns] if rows else pd.DataFrame(columns=columns)


def format_consistency_by_type(table: pd.DataFrame) -> str:
    """The table as text, one block of rows per model (three decimals; ``-`` where a type is missing)."""
    if table.empty:
        return "  (no consistency: no non-baseline response with a baseline response to compare with)"
    shown = table.copy()
    for column in shown.columns:
        if column not in ("model", "family") and not column.startswith("n_"):
            spec = "+.3f" if column == "difference" else ".3f"
            shown[column] = [("-" if pd.isna(v) else format(float(v), spec)) for v in shown[column]]
    widths = {c: max(len(c), *(len(str(v)) for v in shown[c])) for c in shown.columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in shown.columns).rstrip()]
    lines += ["  ".join(str(v).ljust(widths[c]) for c, v in zip(shown.columns, row, strict=True)).rstrip()
              for row in shown.itertuples(index=False)]
    return "\n".join(lines)
