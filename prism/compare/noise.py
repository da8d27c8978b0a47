"""Change beyond noise in a comparison: the shifts table, the profiles and the clustered model of consistency.

``shifts`` (``comparison/shifts.csv``): for every run, measure and non-baseline condition, the step to it
from the baseline -- or, for a value of an ordered axis (:mod:`prism.conditions.axes`), from the axis's previous
value: between, within, excess with its interval, the permutation p-value and its Holm correction over
all steps of one model and one measure (:mod:`prism.stats.shifts`). ``profile`` (``comparison/profile.csv``):
the same steps per model and axis in value order, with the first value where each measure shifts.
``gee_wald`` (``comparison/gee_wald.csv``): global Wald tests of the binomial GEE of consistency with the
baseline's modal answer (:mod:`prism.stats.gee`), on a grid's axes and their two-way interactions when the runs
are grids over the same axes. Pure pandas over :class:`~prism.compare.tables.ModelCells`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from prism.compare.tables import ModelCells
from prism.stats import basics, gee, gee_fits, power, shifts
from prism.types import canonical_json

SHIFT_COLUMNS = ("model", "axis", "from_condition", "to_condition", "measure", "between", "within", "excess",
                 "excess_ci_low", "excess_ci_high", "p", "p_holm", "shift", "detectable_effect", "detectable_method")
PROFILE_COLUMNS = ("model", "axis", "scale", "from", "to", "from_condition", "to_condition", "measure", "between",
                   "within", "excess", "excess_ci_low", "excess_ci_high", "p", "p_holm", "shift", "first_shift")

# The response field each measure compares: answer categories (UNKNOWN spelled out) or raw texts.
MEASURE_FIELDS = {"answer": "category", "token_jaccard": "response", "edit_distance": "response",
                  "prob_tv": "option_probs", "embedding_cosine": "response"}


def measure_values(cells: pd.DataFrame, measure: str) -> pd.Series:
    """The value each cell is compared by under ``measure`` (None for a missing text).

    ``prob_tv`` keeps only the cells with probabilities, their distributions as canonical JSON.
    """
    if measure == "prob_tv":
        cells = cells[cells["option_probs"].map(lambda v: isinstance(v, dict))]
        return cells["option_probs"].map(canonical_json).astype(object)
    return cells[MEASURE_FIELDS[measure]].map(
        lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)).astype(object)


def check_measures(measures: Sequence[str]) -> list[str]:
    """The measures, checked against :data:`prism.stats.shifts.MEASURES` (repeats dropped).

    Raises:
        ValueError: Naming the unknown ones and the known ones.
    """
    unknown = [m for m in measures if m not in shifts.MEASURES]
    if unknown:
        raise ValueError(f"unknown shift measure(s) {unknown}; known: {', '.join(shifts.MEASURES)}")
    if not measures:
        raise ValueError(f"measures is empty; name at least one of {', '.join(shifts.MEASURES)}")
    return list(dict.fromkeys(measures))


def _questions(model: ModelCells, measure: str,
               embed: shifts.Embed | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per question: the difference matrix over all its responses and each response's condition."""
    order = {c: i for i, c in enumerate(model.conditions)}
    cells = model.cells.assign(_c=model.cells["condition"].map(order)).sort_values(["_c", "repetition"],
                                                                                     kind="stable")
    values = measure_values(cells, measure)
    cells = cells.loc[values.index]
    listed, conditions = values.tolist(), cells["condition"].to_numpy()
    grouped = question_rows(cells["question_id"])
    if measure == "answer":
        return _answer_questions(grouped, listed, conditions)
    out = {}
    for question, rows in grouped:
        out[question] = (shifts.difference_matrix([listed[i] for i in rows.tolist()], measure, embed),
                         conditions[rows])
    return out


def _answer_questions(grouped: list[tuple[str, NDArray[np.intp]]], listed: list[str | None],
                      conditions: NDArray[Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """:func:`_questions` for ``answer``: every question's matrix of differing categories, made per layout.

    ``difference_matrix`` gives 1.0 where two values differ as text (``str``), 0.0 elsewhere and on the
    diagonal; here the texts are numbered once, and the questions with the same number of responses get
    their matrices from one comparison of those numbers (the same 0/1 floats, one array per question).
    """
    codes, _ = pd.factorize(np.asarray([str(v) for v in listed], dtype=object), sort=False)
    sizes: dict[int, list[int]] = {}
    for i, (_, rows) in enumerate(grouped):
        sizes.setdefault(rows.size, []).append(i)
    matrices: list[np.ndarray | None] = [None] * len(grouped)
    for members in sizes.values():
        at = codes[np.stack([grouped[i][1] for i in members])]  # (questions, size): every size is >= 1
        stacked = np.asarray(at[:, :, None] != at[:, None, :], dtype=np.float64)
        for j, i in enumerate(members):
            matrices[i] = stacked[j]
    return {question: (matrix, conditions[rows])
            for (question, rows), matrix in zip(grouped, matrices, strict=True) if matrix is not None}


def question_rows(question_ids: pd.Series) -> list[tuple[str, NDArray[np.intp]]]:
    """Per question, in order of first appearance, the positions of its rows in order.

    What ``groupby("question_id", sort=False)`` gives, in one pass instead of a pandas frame per question
    (most of the comparison's time at a thousand questions a run).
    """
    codes, questions = pd.factorize(question_ids, sort=False)
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes, minlength=len(questions))
    ends = np.cumsum(counts)
    return [(str(q), order[s:e]) for q, s, e in zip(questions, (ends - counts).tolist(), ends.tolist(), strict=True)]


def step_data(questions: dict[str, tuple[np.ndarray, np.ndarray]], baseline: str, condition: str) -> shifts.StepData:
    """One step's responses: per question, the baseline's then the condition's, with their differences.

    Questions whose responses have the same conditions in the same order (in a run without missing cells,
    all of them) share one selection of rows and columns: it is worked out once per such layout, not once
    per question (that was most of the shifts table's time at a thousand questions).
    """
    layouts: dict[tuple[object, ...], tuple[tuple[NDArray[Any], ...], int, int]] = {}
    blocks = []
    for matrix, conditions in questions.values():
        key = tuple(conditions.tolist())
        if key not in layouts:
            index = np.concatenate([np.flatnonzero(conditions == baseline), np.flatnonzero(conditions == condition)])
            n_from = int((conditions == baseline).sum())
            layouts[key] = np.ix_(index, index), n_from, index.size - n_from
        selection, n_from, n_to = layouts[key]
        blocks.append((matrix[selection], n_from, n_to))
    return shifts.StepData.from_blocks(blocks)


def step_origins(model: ModelCells, baseline: str) -> dict[str, str]:
    """Condition -> the condition its step starts from: the previous value on an ordered axis, else the baseline.

    A nominal axis that starts from a value of another axis (conditions=fewshot's ``shot_order``, from ``shots_4``)
    is tested from that value: its steps change only its own attribute on top of it.
    """
    origins = {}
    inner = {c for axis in model.axes for c in axis.conditions[1:]}
    for axis in model.axes:
        if axis.ordered or axis.conditions[0] in inner:
            origins.update({to: start for start, to in axis.steps()
                            if to in model.conditions and start in model.conditions})
    return {c: origins.get(c, baseline) for c in model.conditions if c != baseline}


def shifts_table(models: Sequence[ModelCells], baseline: str, measures: Sequence[str], *, n_boot: int,
                 n_permutations: int, seed: int, embed: shifts.Embed | None = None) -> pd.DataFrame:
    """Each non-baseline condition against where its step starts, per run and measure.

    Each row is :func:`prism.stats.shifts.shift` of one step.

    A step starts from the baseline, except on an ordered axis (ordinal or numeric), where each value is
    compared with the previous one (:func:`step_origins`).

    ``p_holm`` is Holm-adjusted (:func:`prism.stats.basics.holm`) over every step tested for one model (its
    ``model.name``, over all its runs and axes) and one measure; ``shift`` is an excess above 0 with
    ``p_holm`` below 0.05. Runs without repetitions have no within: ``excess`` and ``p`` are empty and
    ``excess_ci_low``/``excess_ci_high`` hold the interval of the between. ``embed`` (texts -> embeddings,
    :mod:`prism.compare.embedding`) is what ``embedding_cosine`` reads.

    Returns:
        Columns :data:`SHIFT_COLUMNS`, per run in the given order, per measure, steps in condition order.
    """
    rows = []
    for run_index, model in enumerate(models):
        for measure in measures:
            if measure == "prob_tv" and "option_probs" not in model.cells:
                continue
            questions = _questions(model, measure, embed)
            if not questions:  # prob_tv of a run without probabilities: nothing to compare
                continue
            steps = [(condition, start, step_data(questions, start, condition))
                     for condition, start in step_origins(model, baseline).items()]
            # The run's steps together: shifts.shifts_of takes the bootstrap of the steps without repetitions in
            # one product (each result the one shifts.shift gives alone), and is shifts.shift for the others.
            found = shifts.shifts_of([data for _, _, data in steps], n_boot=n_boot, n_permutations=n_permutations,
                                     seed=seed)
            for (condition, start, data), est in zip(steps, found, strict=True):
                rows.append({"model": model.label, "axis": model.axis, "from_condition": start,
                             "to_condition": condition, "measure": measure, "between": est.between,
                             "within": est.within, "excess": est.excess, "excess_ci_low": est.ci_low,
                             "excess_ci_high": est.ci_high, "p": est.p, "_family": (model.model or model.label),
                             "_run": run_index, "_null": est.null, "_data": data})
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in SHIFT_COLUMNS})
    table = pd.DataFrame(rows)
    table["p_holm"] = math.nan
    for _, index in table.groupby(["_family", "measure"], sort=False).groups.items():
        table.loc[index, "p_holm"] = basics.holm(table.loc[index, "p"].to_numpy(np.float64))
    table["shift"] = [shifts.is_shift(e, p) for e, p in zip(table["excess"], table["p_holm"], strict=True)]
    table["detectable_effect"], table["detectable_method"] = detectable_shifts(table, seed)
    return table[list(SHIFT_COLUMNS)].reset_index(drop=True)


def detectable_shifts(table: pd.DataFrame, seed: int = 0) -> tuple[list[float], list[str]]:
    """Each tested step's detectable excess (:func:`prism.stats.power.shift_detectable`), in excess units.

    Computed at the level a lone shift in its Holm family (the model and measure's tested steps) must reach,
    from the step's own responses (``_data``) and permuted excesses (``_null``), seeded by ``seed``; an
    untested step (no repetitions) has none.
    """
    tested = table["p"].notna()
    family_size = tested.groupby([table["_family"], table["measure"]], sort=False).transform("sum")
    effects, methods = [], []
    for null, data, m, is_tested in zip(table["_null"], table["_data"], family_size, tested, strict=True):
        if not is_tested or null is None:
            effects.append(math.nan)
            methods.append("")
            continue
        effects.append(power.shift_detectable(data, null, power.holm_level(int(m)), seed=seed))
        methods.append(power.SIMULATED_PERMUTATION)
    return effects, methods


def profile_table(models: Sequence[ModelCells], table: pd.DataFrame) -> pd.DataFrame:
    """Every tested step of each axis, per model and measure, in value order (``comparison/profile.csv``).

    ``from``/``to`` are the axis's values, ``from_condition``/``to_condition`` the conditions showing them;
    the numbers are the step's row of the shifts ``table``. ``first_shift`` marks, per model, axis and
    measure, the step to the first value where that measure shifts (none when no step does).

    Returns:
        Columns :data:`PROFILE_COLUMNS`; empty for runs whose axes are unknown.
    """
    rows = []
    for model in models:
        own = table[table["model"] == model.label]
        steps = {(r["from_condition"], r["to_condition"], r["measure"]): r for r in own.to_dict("records")}
        for axis in model.axes:
            value = dict(zip(axis.conditions, axis.values, strict=True))
            for measure in dict.fromkeys(table["measure"]):
                found = False
                for start, to in axis.steps():
                    row = steps.get((start, to, measure))
                    if row is None:
                        continue
                    first = bool(row["shift"]) and not found
                    found = found or first
                    rows.append({"model": model.label, "axis": axis.name, "scale": axis.scale, "from": value[start],
                                 "to": value[to], "from_condition": start, "to_condition": to, "measure": measure,
                                 **{c: row[c] for c in SHIFT_COLUMNS[5:]}, "first_shift": first})
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in PROFILE_COLUMNS})
    return pd.DataFrame(rows, columns=list(PROFILE_COLUMNS))


def measure_agreement(table: pd.DataFrame) -> pd.DataFrame:
    """Whether the measures find the same shifts: one row per step, a shift flag per measure.

    Returns:
        Columns ``model``, ``axis``, ``to_condition``, one boolean column per measure (in the table's
        order), and ``agree`` (every measure flags the step, or none does). Empty without steps.
    """
    if table.empty:
        return pd.DataFrame(columns=["model", "axis", "to_condition", "agree"])
    wide = table.pivot_table(index=["model", "axis", "to_condition"], columns="measure", values="shift",
                             aggfunc="first", sort=False)
    measures = list(dict.fromkeys(table["measure"]))
    wide = wide[measures].astype(bool)
    wide["agree"] = wide.all(axis=1) | ~wide.any(axis=1)
    return wide.reset_index().rename_axis(columns=None)


def grid_axes(models: Sequence[ModelCells]) -> tuple[str, ...]:
    """The crossed axes shared by every model, or ``()`` unless all of them are grids over the same axes."""
    grids = {model.grid for model in models}
    return next(iter(grids)) if len(grids) == 1 else ()


def consistency_responses(models: Sequence[ModelCells], baseline: str, axes: Sequence[str] = ()) -> pd.DataFrame:
    """Every observed response with its run, model, dataset and condition family, for :mod:`prism.stats.gee`.

    A condition without a recorded family (a run logged before families, or a condition set that cannot
    be rebuilt) falls back to its condition set's name. With ``axes`` (a grid's), each response also gets
    its condition's value of every axis, one column per axis.
    """
    frames = []
    for model in models:
        cells = model.cells
        fallback = model.axis or "conditions"
        families = {c: ("baseline" if c == baseline else model.families.get(c) or fallback) for c in model.conditions}
        frames.append(pd.DataFrame({
            "run": model.run_id, "model": model.model or model.label, "dataset": model.dataset or "?",
            "dataset_type": model.dataset_type or "objective",
            "question_id": cells["question_id"].astype(str), "condition": cells["condition"].astype(str),
            "family": cells["condition"].map(families).fillna(fallback).astype(str),
            "category": cells["category"].astype(str),
            **{axis: cells["condition"].map({c: v[axis] for c, v in model.levels.items()}).astype(str)
               for axis in axes},
        }))
    if not frames:
        return pd.DataFrame(columns=[*gee.RESPONSE_COLUMNS, *axes])
    return pd.concat(frames, ignore_index=True)


def gee_table(models: Sequence[ModelCells], baseline: str) -> pd.DataFrame:
    """The ``gee_wald`` table: the clustered model(s) of consistency with their notes (:mod:`prism.stats.gee_fits`).

    Runs that are all grids over the same axes are modelled on those axes with their two-way interactions.
    Runs on datasets of both types get a fit by dataset and one by dataset type, one after the other.
    """
    return gee_tables(models, baseline)[0]


def gee_tables(models: Sequence[ModelCells], baseline: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``gee_wald`` (every planned fit, :func:`prism.stats.gee_fits.fit_all`) and ``gee_by_dataset``.

    Returns:
        (gee_wald, gee_by_dataset): columns :data:`prism.stats.gee_fits.FIT_COLUMNS` and
        :data:`prism.stats.gee_fits.BY_DATASET_COLUMNS`.
    """
    axes = grid_axes(models)
    outcomes, notes = gee.consistency_outcomes(consistency_responses(models, baseline, axes), baseline, axes)
    term = (f"the grid's axes {', '.join(axes)} with two-way interactions" if axes
            else "condition term: {result.condition_term}")
    header = ("{result.n_responses} non-baseline responses in {result.n_clusters} question clusters; " + term
              + "; binomial GEE (logit), exchangeable working correlation, bias-reduced sandwich covariance, p from "
              "Hotelling's T-squared reference (F with the question clusters' degrees of freedom)")
    return gee_fits.fit_all(outcomes, notes, axes, header), gee_fits.by_dataset(outcomes, axes)
