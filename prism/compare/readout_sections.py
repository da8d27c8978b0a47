"""What the read-out sections of ``report.html`` and of the site's comparison pages show, as template data.

The template is ``prism/templates/sections/readouts.j2``. Each function turns one read-out table
(:mod:`prism.compare.readouts`) into plain rows; nothing here builds markup. Every row keeps the run ids and
conditions its numbers come from, so a page that has the cells beside it (the published site,
:mod:`prism.publish.trace`) can link each number to them; the report, one self-contained file, shows the
same rows without links.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from prism.compare.scorecard import METRICS

if TYPE_CHECKING:
    from prism.compare.comparison_tables import ReadoutTables

READOUT_SECTIONS = (("scorecard", "Scorecard"), ("sensitivity-axes", "Axes ranked"),
                    ("measure-agreement", "Measure agreement"), ("divergence-noise", "Beyond noise"))


def anchor(text: str) -> str:
    """An anchor name: letters, digits, ``-``, ``_`` and ``.`` kept, anything else ``-``."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text).strip(".") or "x"


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict("records")]


def scorecard_models(tables: ReadoutTables) -> tuple[list[str], list[tuple[str, str, list[Any]]]]:
    """The metrics shown and, per model, (model, run id, rows); a row is a condition and its value per metric."""
    table = tables.scorecard
    if table is None or table.empty:
        return [], []
    metrics = [m for m in METRICS if m in set(table["metric"])]
    models = []
    for (model, run_id), rows in table.groupby(["model", "run_id"], sort=False):
        by_condition: dict[str, dict[str, Any]] = {}
        for row in _records(rows):
            by_condition.setdefault(str(row["condition"]), {})[str(row["metric"])] = row
        models.append((str(model), str(run_id), [(condition, [values.get(m) for m in metrics])
                                                 for condition, values in by_condition.items()]))
    return metrics, models


def axes_groups(tables: ReadoutTables) -> list[tuple[str, list[dict[str, Any]]]]:
    """(model, ranked axes) per model of ``sensitivity_axes``, its measures one after the other."""
    table = tables.sensitivity_axes
    if table is None or table.empty:
        return []
    return [(str(model), _records(rows)) for model, rows in table.groupby("model", sort=False)]


def agreement_rows(tables: ReadoutTables) -> tuple[list[dict[str, Any]], list[str]]:
    """The measure-agreement rows and their distinct notes."""
    table = tables.measure_agreement
    if table is None or table.empty:
        return [], []
    return _records(table), [str(n) for n in dict.fromkeys(table["note"].astype(object).fillna("")) if str(n)]


def step_verdicts(tables: ReadoutTables) -> tuple[list[str], list[tuple[str, list[dict[str, Any]]]]]:
    """The steps behind the agreement counts: per model, each step with its verdict per measure.

    Returns:
        (measures, [(model, rows)]), a row with ``from_condition``, ``to_condition`` and ``verdicts`` (measure
        -> shift flag, None where the measure did not test the step).
    """
    shifts = tables.shifts
    if shifts is None or shifts.empty:
        return [], []
    measures = list(dict.fromkeys(shifts["measure"]))
    models = []
    for model, rows in shifts.groupby("model", sort=False):
        steps: dict[tuple[str, str], dict[str, Any]] = {}
        for row in _records(rows):
            key = (str(row["from_condition"]), str(row["to_condition"]))
            steps.setdefault(key, {"from_condition": key[0], "to_condition": key[1], "verdicts": {}})
            steps[key]["verdicts"][str(row["measure"])] = bool(row["shift"])
        models.append((str(model), list(steps.values())))
    return measures, models


def noise_pairs(tables: ReadoutTables) -> tuple[list[tuple[str, str, list[dict[str, Any]]]], list[str]]:
    """Per pair of models, (a, b, rows) of ``divergence_noise``, and the table's distinct notes."""
    table = tables.divergence_noise
    if table is None or table.empty:
        return [], []
    pairs = [(str(a), str(b), _records(rows)) for (a, b), rows in table.groupby(["model_a", "model_b"], sort=False)]
    return pairs, [str(n) for n in dict.fromkeys(table["note"].astype(object).fillna("")) if str(n)]


def readout_context(tables: ReadoutTables) -> dict[str, Any]:
    """Everything ``sections/readouts.j2`` needs, as keyword arguments of its ``readouts`` macro."""
    metrics, cards = scorecard_models(tables)
    agreement, agreement_notes = agreement_rows(tables)
    measures, steps = step_verdicts(tables)
    pairs, noise_notes = noise_pairs(tables)
    run_ids = {}
    if tables.scorecard is not None and not tables.scorecard.empty:
        run_ids = dict(zip(tables.scorecard["model"], tables.scorecard["run_id"], strict=True))
    sensitivity = tables.sensitivity
    baseline = str(sensitivity["baseline"].iloc[0]) if sensitivity is not None and len(sensitivity) else ""
    return {"baseline": baseline, "metrics": metrics, "cards": cards, "axes": axes_groups(tables),
            "agreement": agreement, "agreement_notes": agreement_notes, "step_measures": measures, "steps": steps,
            "pairs": pairs, "noise_notes": noise_notes, "run_ids": run_ids}
