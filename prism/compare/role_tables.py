"""The roles table of a comparison: each step's role set beside its shift verdict, read as one of four readings.

``roles`` (``comparison/roles.csv``): per model, step and measure of the shifts table (:mod:`prism.compare.noise`),
the step's ``role`` from the reference answers (:mod:`prism.results.roles`: ``causal`` when the correct option moves
for some question, ``invariant`` otherwise; never labelled by hand), its ``shift`` verdict, and the reading:

==========  =========  ==========================================================
role        shift      reading
==========  =========  ==========================================================
causal      yes        ``expected``: the answers move where the correct answer moves
causal      no         ``missed``: the correct answer moved, the answers did not
invariant   yes        ``spurious``: nothing about the answer changed, the answers did
invariant   no         ``stable``
==========  =========  ==========================================================

A step without a permutation test (a run without repetitions has no within, so no p-value) reads
``untested``. For a causal step, ``followed`` is the share of the to-condition's observed answers, on the
questions whose reference moved, that are the new reference (``followed_n`` answers): a model can shift
without following (every answer that was the removed option must move somewhere), so ``expected`` says the
answers moved and ``followed`` says whether they moved to the right place. Pure pandas.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from prism.compare.tables import ModelCells
from prism.results.roles import CAUSAL, moved, references, step_role

ROLE_COLUMNS = ("model", "axis", "scale", "from_condition", "to_condition", "measure", "role", "moved_questions",
                "shift", "reading", "followed", "followed_n", "detectable_effect", "detectable_method")
READINGS = {(CAUSAL, True): "expected", (CAUSAL, False): "missed", ("invariant", True): "spurious",
            ("invariant", False): "stable"}
UNTESTED = "untested"


def _axis_of(model: ModelCells, condition: str) -> tuple[str, str]:
    """(axis, scale) of the axis a condition is a value of; a grid cell's family (or the set) otherwise."""
    for axis in model.axes:
        if condition in axis.conditions:
            return axis.name, axis.scale
    return model.families.get(condition) or model.axis, ""


def followed(model: ModelCells, to: str, targets: dict[str, str]) -> tuple[float, int]:
    """The share of ``to``'s observed answers on the questions of ``targets`` that are their new reference."""
    cells = model.cells[(model.cells["condition"] == to) & model.cells["question_id"].isin(list(targets))]
    if cells.empty:
        return math.nan, 0
    hits = [answer == targets[str(q)] for q, answer in zip(cells["question_id"], cells["answer"], strict=True)]
    return float(np.mean(hits)), len(hits)


def roles_table(models: Sequence[ModelCells], shifts: pd.DataFrame) -> pd.DataFrame:
    """Every step of the shifts table with its role, verdict and reading (see the module docstring).

    Returns:
        Columns :data:`ROLE_COLUMNS`, in the shifts table's order; ``followed`` empty for invariant steps.
    """
    by_label = {model.label: model for model in models}
    refs = {model.label: references(model.cells) for model in models}
    rows = []
    for row in shifts.to_dict("records"):
        model = by_label.get(str(row["model"]))
        if model is None:
            continue
        start, to = str(row["from_condition"]), str(row["to_condition"])
        role = step_role(refs[model.label], start, to)
        targets = moved(refs[model.label], start, to)
        share, n = followed(model, to, targets) if role == CAUSAL else (math.nan, 0)
        tested = not math.isnan(float(row["p_holm"]))
        reading = READINGS[(role, bool(row["shift"]))] if tested else UNTESTED
        axis, scale = _axis_of(model, to)
        rows.append({"model": model.label, "axis": axis, "scale": scale, "from_condition": start, "to_condition": to,
                     "measure": row["measure"], "role": role, "moved_questions": len(targets),
                     "shift": bool(row["shift"]), "reading": reading,
                     "followed": share, "followed_n": n,
                     # The step's own test, so its detectable excess (prism.stats.power) is the shift's.
                     "detectable_effect": row.get("detectable_effect", math.nan),
                     "detectable_method": row.get("detectable_method", "")})
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in ROLE_COLUMNS})
    return pd.DataFrame(rows, columns=list(ROLE_COLUMNS))


def roles_note(table: pd.DataFrame) -> str:
    """One line on what the roles say: how many steps read each way, and that causal steps are read here."""
    counts = table["reading"].value_counts()
    found = ", ".join(f"{counts[r]} {r}" for r in ("expected", "missed", "spurious", "stable", UNTESTED) if r in counts)
    causal = int((table["role"] == CAUSAL).sum())
    note = f"{found or 'no steps'}."
    if causal:
        note += (" Causal steps move the correct answer, so the runs' question-level metrics (agreement, majority, "
                 "unanimity, prompt sensitivity, prompt-invariant incorrectness) leave their conditions out; they "
                 "are read here.")
    if UNTESTED in counts:
        note += " 'untested': no permutation test without repetitions (generation=sampled, or repetitions >= 2)."
    return note
