"""``comparison/divergence_noise.csv``: where two models differ beyond the noise of both.

For a pair of models (:func:`prism.compare.tables.model_pairs`), a condition both ran and a shift measure,
per question:

- *between* is the mean difference over every cross pair (a response of model a with one of model b, any
  repetitions);
- *within_a* (*within_b*) is the mean difference over distinct pairs of model a's (b's) own repetitions:
  how much the model disagrees with itself under that very condition;
- *excess* = between - (within_a + within_b) / 2.

This is the shift of :mod:`prism.stats.shifts` with the two models in place of two conditions, so it gets the
same two-level bootstrap interval (questions, and repetitions inside each question) and the same one-sided
permutation p-value (the model labels shuffled among a question's responses), Holm-corrected over the
pair's conditions per measure; ``beyond_noise`` is an excess above 0 with Holm p below 0.05;
``detectable_effect`` the excess the test had 80% power to find at its Holm level (:mod:`prism.stats.power`). Questions
where either model has fewer than two responses under the condition are left out.

Without repetitions there is no within-condition noise to subtract: such rows keep the between (with its
interval) and leave within, excess and p empty, and ``note`` says so; nothing stands in for the noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from prism.compare.noise import measure_values, question_rows
from prism.compare.tables import ModelCells, Pair, shared_conditions
from prism.stats import basics, power, shifts

NOISE_COLUMNS = ("model_a", "model_b", "run_a", "run_b", "condition", "measure", "n_questions", "between",
                 "within_a", "within_b", "excess", "excess_ci_low", "excess_ci_high", "p", "p_holm", "beyond_noise",
                 "note", "detectable_effect", "detectable_method")

NO_REPETITIONS = ("no repetitions under this condition ({who}): a model's own noise cannot be measured, so no "
                  "excess is given; between (with its interval) is the raw cross-model difference, noise included. "
                  "Run with generation.repetitions=2 or more (and a temperature above 0)")


class _Responses:
    """One run's responses per condition, measure and question, each gathered once for every pair it is in.

    The reference run is in every pair of the default pairing, and each run in one per condition: reading its
    frame again for each (filtering by condition, sorting, mapping every cell to its value) was most of the
    table's time after the bootstrap.
    """

    def __init__(self, model: ModelCells) -> None:
        self.model = model
        cells = model.cells
        self.condition = cells["condition"].to_numpy()
        self.repetition = cells["repetition"].to_numpy()
        # Plain objects: iterating the factorized ids of a pyarrow-backed column costs a call per id.
        self.questions = cells["question_id"].to_numpy(dtype=object)
        self._values: dict[str, tuple[list[str | None], NDArray[np.bool_]]] = {}
        self._gathered: dict[tuple[str, str], dict[str, list[str | None]]] = {}
        self._firsts: dict[tuple[str, str], tuple[pd.Index, NDArray[np.intp], NDArray[np.object_]]] = {}
        self._repeated: dict[str, bool] = {}

    def _measured(self, measure: str) -> tuple[list[str | None], NDArray[np.bool_]]:
        """Every cell's value under the measure (by position), and which cells have one (prob_tv: not all)."""
        if measure not in self._values:
            cells = self.model.cells
            values = measure_values(cells, measure)
            has = cells.index.isin(values.index)
            listed: list[str | None] = [None] * len(cells)
            for position, value in zip(np.flatnonzero(has).tolist(), values.tolist(), strict=True):
                listed[position] = value
            self._values[measure] = listed, has
        return self._values[measure]

    def of(self, condition: str, measure: str) -> dict[str, list[str | None]]:
        """Per question (in order of first appearance), the values under the condition, in repetition order."""
        key = (condition, measure)
        if key not in self._gathered:
            listed, has = self._measured(measure)
            positions = np.flatnonzero(self.condition == condition)
            positions = positions[np.argsort(self.repetition[positions], kind="stable")]
            positions = positions[has[positions]]
            questions = pd.Series(self.questions[positions], dtype=object)
            self._gathered[key] = {question: [listed[i] for i in positions[rows].tolist()]
                                   for question, rows in question_rows(questions)}
        return self._gathered[key]

    def firsts(self, condition: str, measure: str) -> tuple[pd.Index, NDArray[np.intp], NDArray[np.object_]]:
        """:meth:`of` as arrays: its questions (in its order), each one's number of values, and its first value.

        The first value as ``str`` (None as ``"None"``), which is how the ``answer`` step of single responses
        compares them (:func:`_single_answers`); gathered without a list per question.
        """
        key = (condition, measure)
        if key not in self._firsts:
            listed, has = self._measured(measure)
            positions = np.flatnonzero(self.condition == condition)
            positions = positions[np.argsort(self.repetition[positions], kind="stable")]
            positions = positions[has[positions]]
            # question_rows' order: the questions by first appearance, their rows in order.
            codes, questions = pd.factorize(pd.Series(self.questions[positions], dtype=object), sort=False)
            kept = codes >= 0
            codes, positions = codes[kept], positions[kept]
            counts = np.bincount(codes, minlength=len(questions)).astype(np.intp)
            _, first_rows = np.unique(codes, return_index=True)
            firsts = np.asarray([str(listed[i]) for i in positions[first_rows].tolist()], dtype=object)
            self._firsts[key] = pd.Index([str(q) for q in questions], dtype=object), counts, firsts
        return self._firsts[key]

    def repeated(self, condition: str) -> bool:
        """Whether some question has two cells under the condition."""
        if condition not in self._repeated:
            own = self.model.cells["question_id"].iloc[np.flatnonzero(self.condition == condition)]
            codes, _ = pd.factorize(own)  # a missing id is -1 and counts for nothing, as a groupby counts them
            present = codes[codes >= 0]
            self._repeated[condition] = bool(present.size and np.bincount(present).max() >= 2)
        return self._repeated[condition]


def _responses(model: ModelCells, condition: str, measure: str) -> dict[str, list[str | None]]:
    """Per question (in order of first appearance), the model's values under the condition, in repetition order."""
    return _Responses(model).of(condition, measure)


def _mean_off_diagonal(block: np.ndarray) -> float:
    n = block.shape[0]
    return float(block.sum() / (n * (n - 1))) if n >= 2 else math.nan


def _single_answers(a: dict[str, list[str | None]], b: dict[str, list[str | None]]) -> shifts.StepData | None:
    """The ``answer`` step of two models with one response each to every question both answered, or None.

    The per-question matrices :func:`prism.stats.shifts.difference_matrix` gives, [[0, d], [d, 0]] with d = 1
    where the two answer categories differ, from one comparison of all the questions (views of one array).
    """
    shared = [(values_a, values_b) for question, values_a in a.items() if (values_b := b.get(question))]
    if not shared or any(len(x) != 1 or len(y) != 1 for x, y in shared):
        return None
    differ = (np.asarray([str(x[0]) for x, _ in shared], dtype=object)
              != np.asarray([str(y[0]) for _, y in shared], dtype=object))
    matrices = np.zeros((len(shared), 2, 2), dtype=np.float64)
    matrices[:, 0, 1] = matrices[:, 1, 0] = differ
    ones = np.ones(len(shared), dtype=np.int64)
    return shifts.StepData(tuple(matrices), ones, ones.copy())


def _single_answers_of(a: _Responses, b: _Responses, condition: str) -> shifts.StepData | None:
    """:func:`_single_answers` of the two runs' responses under the condition, from :meth:`_Responses.firsts`.

    The same step (or None in the same cases: no question both answered, or one with two responses of
    either run among them), paired by question id through an index instead of a list per question.
    """
    questions_a, counts_a, firsts_a = a.firsts(condition, "answer")
    questions_b, counts_b, firsts_b = b.firsts(condition, "answer")
    at = questions_b.get_indexer(questions_a)
    shared = at >= 0
    at = at[shared]
    if not at.size or (counts_a[shared] != 1).any() or (counts_b[at] != 1).any():
        return None
    differ = firsts_a[shared] != firsts_b[at]
    matrices = np.zeros((at.size, 2, 2), dtype=np.float64)
    matrices[:, 0, 1] = matrices[:, 1, 0] = differ
    ones = np.ones(at.size, dtype=np.int64)
    return shifts.StepData(tuple(matrices), ones, ones.copy())


def pair_step(a: dict[str, list[str | None]], b: dict[str, list[str | None]],
              measure: str, embed: shifts.Embed | None = None) -> tuple[shifts.StepData, float, float]:
    """The two models' responses as one step (a's first), and the mean within of each over the repeated questions."""
    if measure == "answer":  # without repetitions: no within, and no matrix built question by question
        single = _single_answers(a, b)
        if single is not None:
            return single, math.nan, math.nan
    blocks, own_a, own_b = [], [], []
    for question, values_a in a.items():
        values_b = b.get(question)
        if not values_b:
            continue
        matrix = shifts.difference_matrix([*values_a, *values_b], measure, embed)
        n_a = len(values_a)
        blocks.append((matrix, n_a, len(values_b)))
        if n_a >= 2 and len(values_b) >= 2:
            own_a.append(_mean_off_diagonal(matrix[:n_a, :n_a]))
            own_b.append(_mean_off_diagonal(matrix[n_a:, n_a:]))
    within_a = float(np.mean(own_a)) if own_a else math.nan
    within_b = float(np.mean(own_b)) if own_b else math.nan
    return shifts.StepData.from_blocks(blocks), within_a, within_b


def _unrepeated(a: _Responses, b: _Responses, condition: str) -> str:
    """Which of the two models has no question with two responses under the condition."""
    lacking = [m.model.label for m in (a, b) if not m.repeated(condition)]
    return " and ".join(lacking) or f"no question has two responses of both {a.model.label} and {b.model.label}"


def divergence_noise_table(pairs: Sequence[Pair], measures: Sequence[str], *, n_boot: int, n_permutations: int,
                           seed: int, embed: shifts.Embed | None = None) -> pd.DataFrame:
    """Cross-model difference beyond both models' own noise, per pair, shared condition and measure.

    Args:
        pairs: The pairs of runs (:func:`prism.compare.tables.model_pairs`).
        measures: The shift measures (``prob_tv`` only where both runs recorded probabilities).
        n_boot: Two-level bootstrap resamples.
        n_permutations: Label permutations behind each p-value.
        seed: Seeds every bootstrap and permutation (:func:`prism.stats.shifts.shift`).
        embed: Texts -> embeddings, for ``embedding_cosine`` (:mod:`prism.compare.embedding`).

    Returns:
        Columns :data:`NOISE_COLUMNS`, per pair in the given order, per measure, conditions in a's order.
    """
    rows: list[dict[str, Any]] = []
    # The reference run is in every pair of the default pairing: its responses are gathered once.
    gathered: dict[str, _Responses] = {}

    def responses(model: ModelCells) -> _Responses:
        if model.run_id not in gathered:
            gathered[model.run_id] = _Responses(model)
        return gathered[model.run_id]

    for a, b in pairs:
        # The pair's steps first, then their shifts together (shifts.shifts_of: one bootstrap product for all
        # the steps without repetitions), then each measure's Holm correction over the pair's conditions.
        groups: list[list[dict[str, Any]]] = []
        for measure in measures:
            group: list[dict[str, Any]] = []
            for condition in shared_conditions(a, b):
                # Runs without repetitions: the answer step from arrays (pair_step's own, without its lists).
                single = _single_answers_of(responses(a), responses(b), condition) if measure == "answer" else None
                data, within_a, within_b = (single, math.nan, math.nan) if single is not None else pair_step(
                    responses(a).of(condition, measure), responses(b).of(condition, measure), measure, embed)
                if not data.matrices:  # prob_tv without probabilities, or no question both answered
                    continue
                group.append({"condition": condition, "measure": measure, "_data": data,
                              "_within": (within_a, within_b)})
            groups.append(group)
        found = iter(shifts.shifts_of([r["_data"] for group in groups for r in group], n_boot=n_boot,
                                      n_permutations=n_permutations, seed=seed))
        for group in groups:
            for row in group:
                est, data = next(found), row["_data"]
                repeated = data.repeated
                within_a, within_b = row.pop("_within")
                condition = row["condition"]
                row.update({"model_a": a.label, "model_b": b.label, "run_a": a.run_id, "run_b": b.run_id,
                            "n_questions": est.n_questions, "between": est.between,
                            "within_a": within_a if repeated else math.nan,
                            "within_b": within_b if repeated else math.nan, "excess": est.excess,
                            "excess_ci_low": est.ci_low, "excess_ci_high": est.ci_high, "p": est.p,
                            "note": "" if repeated else NO_REPETITIONS.format(
                                who=_unrepeated(responses(a), responses(b), condition)),
                            "_null": est.null})
            adjusted = basics.holm(np.asarray([r["p"] for r in group], dtype=np.float64))
            level = power.holm_level(int(np.isfinite(adjusted).sum()))  # a lone effect among the pair's tests
            for row, p_holm in zip(group, adjusted, strict=True):
                row["p_holm"] = float(p_holm)
                row["beyond_noise"] = shifts.is_shift(row["excess"], row["p_holm"])
                null, step = row.pop("_null"), row.pop("_data")
                tested = null is not None and not math.isnan(row["p"])
                row["detectable_effect"] = (power.shift_detectable(step, null, level, seed=seed) if tested
                                            else math.nan)
                row["detectable_method"] = power.SIMULATED_PERMUTATION if tested else ""
            rows += group
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in NOISE_COLUMNS})
    return pd.DataFrame(rows, columns=list(NOISE_COLUMNS))


def has_repetitions(table: pd.DataFrame) -> bool:
    """Whether any row of the table has an excess (some condition had repetitions on both sides)."""
    return bool(len(table) and table["excess"].notna().any())
