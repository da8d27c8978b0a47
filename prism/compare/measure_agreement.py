"""``comparison/measure_agreement.csv``: whether the difference measures find the same shifts.

Each shift measure (:data:`prism.stats.shifts.MEASURES`: ``answer``, ``token_jaccard``, ``edit_distance``, and
``prob_tv`` when probabilities were recorded) gives every step of the shifts table a verdict, shift or
not. For each model and each pair of the measures used, over the steps both measures tested: on how many
both find a shift, only one does, or neither, and Cohen's kappa of the two verdicts
(:func:`prism.stats.basics.cohens_kappa`). With several models a pooled row (``model`` = ``all``) counts every
model's steps.

The table is always written, and says in ``note`` what its numbers cannot say: with one measure there is
nothing to agree with (one row per measure with its shift count); without repetitions no step can be a
shift (there is no noise to exceed), so the verdicts agree trivially; kappa is undefined when every
verdict of both measures is the same.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import pandas as pd

from prism.compare.tables import POOLED
from prism.stats import basics

AGREEMENT_COLUMNS = ("model", "measure_a", "measure_b", "steps", "both", "only_a", "only_b", "neither", "shifts_a",
                     "shifts_b", "kappa", "note")
_STEP = ["model", "from_condition", "to_condition"]

ONE_MEASURE = ("only one shift measure was used, so there is nothing to agree with; name two or more, e.g. "
               "measures=[answer,token_jaccard,edit_distance], to see whether they find the same shifts")
NO_REPETITIONS = ("no repetitions: without within-condition noise no step can be a shift, so the verdicts agree "
                  "trivially; run with generation.repetitions=2 or more (and a temperature above 0)")
NO_STEPS = "no step was tested: the runs have no condition besides the baseline"
KAPPA_UNDEFINED = "kappa is undefined: both measures gave one and the same verdict on every step"


def _verdicts(shifts: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, step), one boolean column per measure (missing where a measure did not test it)."""
    wide = shifts.pivot_table(index=_STEP, columns="measure", values="shift", aggfunc="first", sort=False)
    return wide.reset_index().rename_axis(columns=None)


def _pair_row(model: str, a: str, b: str, steps: pd.DataFrame, repeated: bool) -> dict[str, Any]:
    both_tested = steps[a].notna() & steps[b].notna()
    va, vb = steps.loc[both_tested, a].astype(bool), steps.loc[both_tested, b].astype(bool)
    kappa = basics.cohens_kappa(va.map(str).to_numpy(), vb.map(str).to_numpy())
    notes = [] if repeated else [NO_REPETITIONS]
    if math.isnan(kappa) and len(va):
        notes.append(KAPPA_UNDEFINED)
    return {"model": model, "measure_a": a, "measure_b": b, "steps": int(both_tested.sum()),
            "both": int((va & vb).sum()), "only_a": int((va & ~vb).sum()), "only_b": int((~va & vb).sum()),
            "neither": int((~va & ~vb).sum()), "shifts_a": int(va.sum()), "shifts_b": int(vb.sum()),
            "kappa": kappa, "note": "; ".join(notes)}


def _single_row(model: str, measure: str, steps: pd.DataFrame, repeated: bool) -> dict[str, Any]:
    tested = steps[measure].notna()
    notes = [ONE_MEASURE] + ([] if repeated else [NO_REPETITIONS])
    return {"model": model, "measure_a": measure, "measure_b": "", "steps": int(tested.sum()), "both": math.nan,
            "only_a": math.nan, "only_b": math.nan, "neither": math.nan,
            "shifts_a": int(steps.loc[tested, measure].astype(bool).sum()), "shifts_b": math.nan, "kappa": math.nan,
            "note": "; ".join(notes)}


def measure_agreement_table(shifts: pd.DataFrame, measures: Sequence[str]) -> pd.DataFrame:
    """Agreement of every pair of measures on the steps' shift verdicts, per model and pooled.

    Args:
        shifts: The shifts table (:func:`prism.compare.noise.shifts_table`).
        measures: The measures the comparison used, in its order (those without a step, e.g. ``prob_tv``
            of runs without probabilities, are left out).

    Returns:
        Columns :data:`AGREEMENT_COLUMNS`; never empty: without any step, one row saying so.
    """
    used = [m for m in measures if len(shifts) and m in set(shifts["measure"])]
    if not used:
        return pd.DataFrame([{**dict.fromkeys(AGREEMENT_COLUMNS, math.nan), "model": POOLED,
                              "measure_a": ",".join(measures), "measure_b": "", "steps": 0, "note": NO_STEPS}],
                            columns=list(AGREEMENT_COLUMNS))
    wide = _verdicts(shifts)
    repeated_by_model = shifts.groupby("model", sort=False)["within"].apply(lambda v: bool(v.notna().any()))
    groups: list[tuple[str, pd.DataFrame, bool]] = [
        (str(model), steps, bool(repeated_by_model[model])) for model, steps in wide.groupby("model", sort=False)]
    if len(groups) > 1:
        groups.append((POOLED, wide, bool(repeated_by_model.any())))
    rows = []
    for model, steps, repeated in groups:
        if len(used) == 1:
            rows.append(_single_row(model, used[0], steps, repeated))
        else:
            rows += [_pair_row(model, a, b, steps, repeated) for a, b in combinations(used, 2)]
    return pd.DataFrame(rows, columns=list(AGREEMENT_COLUMNS))
