"""The comparison tables: condition sensitivity, cross-model divergence, and the evidence behind them.

Pure pandas over the observed cells of each compared run (:func:`prism.compare.select.load_scored`);
the statistics are :mod:`prism.stats.basics`. Every interval resamples questions with the same seed, so a
table is reproducible from its inputs, B and the seed.

Pairing: within a model, a condition's cell pairs with the baseline's cell of the same question and
repetition; between models, cells pair on (question, condition, repetition). A cell missing on either
side (a failed request) leaves that pair out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from prism.conditions.axes import Axis
from prism.stats import basics
from prism.stats.bootstrap_batch import Batch

if TYPE_CHECKING:
    from prism.compare.comparison_tables import ComparisonTables

SENSITIVITY_COLUMNS = ("model", "condition", "baseline", "accuracy", "delta_accuracy", "delta_ci_low",
                       "delta_ci_high", "mcnemar_p", "mcnemar_p_holm", "flip_rate", "flip_ci_low", "flip_ci_high",
                       "detectable_effect", "detectable_method")
DIVERGENCE_COLUMNS = ("model_a", "model_b", "condition", "disagreement", "disagreement_ci_low",
                      "disagreement_ci_high", "disagreement_answered", "kappa", "both_correct", "only_a", "only_b",
                      "both_wrong", "excess", "excess_ci_low", "excess_ci_high")
ACCURACY_COLUMNS = ("model", "condition", "n", "accuracy", "ci_low", "ci_high")
CONDITION_DISAGREEMENT_COLUMNS = ("model", "condition_disagreement", "ci_low", "ci_high", "n_questions")
DIFFERENCE_COLUMNS = ("model_a", "model_b", "run_a", "run_b", "question_id", "question_disagreement", "condition",
                      "repetition", "correct_answer", "answer_a", "answer_b", "correct_a", "correct_b",
                      "response_a", "response_b", "prompt_sha256", "prompt")
DIFFERENCE_COUNT_COLUMNS = ("model_a", "model_b", "run_a", "run_b", "paired", "differing", "listed", "max_per_pair")

# Which pairs of runs the cross-model tables hold: every run against one reference run (linear in the
# runs, the default) or every pair (quadratic).

# The ``condition`` of the divergence row pooled over all shared conditions.
POOLED = "all"

_CELL = ["question_id", "condition", "repetition"]


@dataclass(frozen=True)
class ModelCells:
    """One compared run's observed cells.

    Attributes:
        label: The run's name in the tables (its ``model.name``, unique among the compared runs).
        run_id: The MLflow run id.
        conditions: Condition names in the run's order.
        cells: Observed cells (:func:`prism.compare.select.load_scored`).
        prompts: Prompt text by prompt sha256, for the differences table (may be empty).
        model: The run's ``model.name`` (empty: use the label); shifts are Holm-corrected per model.
        axis: The run's condition set (``conditions.name``), the ``axis`` of the shifts table.
        dataset: The run's ``dataset.name``, a factor of the clustered model.
        families: Condition name -> condition family (may be empty), a factor of the clustered model.
        axes: The run's axes (:mod:`prism.conditions.axes`; empty when its condition set could not be rebuilt): which
            step each condition is tested by, and the profiles.
        grid: The crossed axes of a grid run (factors of the clustered model), ``()`` for a sweep.
        levels: Condition name -> axis -> value (every axis of ``axes``).
        question_set: The run's frozen question set sha256: only runs on the same one have cells to pair.
        dataset_type: The run's ``dataset.type`` (``objective`` or ``subjective``), a factor of the clustered model.
        reordered: On an ordered scale (``dataset.ordinal``), the conditions that show its options out of
            their order (:func:`prism.conditions.reordering_conditions`); empty otherwise.
    """

    label: str
    run_id: str
    conditions: tuple[str, ...]
    cells: pd.DataFrame
    prompts: Mapping[str, str] = field(default_factory=dict)
    model: str = ""
    axis: str = ""
    dataset: str = ""
    families: Mapping[str, str] = field(default_factory=dict)
    axes: tuple[Axis, ...] = ()
    grid: tuple[str, ...] = ()
    levels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    question_set: str = ""
    dataset_type: str = "objective"
    reordered: tuple[str, ...] = ()


def has_key(model: ModelCells) -> bool:
    """Whether the run's items have an answer key (survey items have a null ``correct_answer`` throughout)."""
    return not (len(model.cells) and model.cells["correct_answer"].isna().all())


def ordered_scale_notes(models: Sequence[ModelCells]) -> list[str]:
    """One sentence per run whose option-order conditions reorder an ordered scale (``dataset.ordinal``)."""
    return [f"{m.label}: {m.dataset} is an ordered scale (dataset.ordinal=true), and {', '.join(m.reordered)} "
            "show its options out of their order, so the answers there also measure the effect of a broken scale, "
            "not only of a reordered list." for m in models if m.reordered]


def keyless_labels(accuracy: pd.DataFrame) -> set[str]:
    """Runs whose items have no answer key: cells observed, yet no accuracy (:func:`accuracy_table`)."""
    return {str(m) for m in accuracy.loc[(accuracy["n"] > 0) & accuracy["accuracy"].isna(), "model"]}


def accuracy_table(models: Sequence[ModelCells], *, n_boot: int, seed: int) -> pd.DataFrame:
    """Accuracy per model and condition over observed cells, with a bootstrap interval over questions.

    Returns:
        Columns :data:`ACCURACY_COLUMNS`; ``n`` is the number of observed cells (UNKNOWN counts as wrong).
        A run on items without an answer key gets NaN accuracy and interval: nothing there is correct.
    """
    batch = Batch(n_boot=n_boot, seed=seed)
    rows: list[list[object]] = []
    pending: list[tuple[int, int]] = []  # (row, statistic) whose interval the batch fills in
    for model in models:
        keyed = has_key(model)
        conditions = _Codes(model.cells["condition"])
        questions, _ = pd.factorize(model.cells["question_id"])
        correct = model.cells["correct"].to_numpy(np.float64)
        for condition in model.conditions:
            mask = conditions.mask(condition)
            n = int(mask.sum())
            if not keyed:
                rows.append([model.label, condition, n, math.nan, math.nan, math.nan])
                continue
            index, point = batch.add_ratio(*_question_sums(questions[mask], correct[mask]))
            rows.append([model.label, condition, n, point, math.nan, math.nan])
            pending.append((len(rows) - 1, index))
    _fill(rows, pending, batch, (4, 5))
    return pd.DataFrame(rows, columns=list(ACCURACY_COLUMNS))


def sensitivity_table(models: Sequence[ModelCells], baseline: str, *, n_boot: int, seed: int) -> pd.DataFrame:
    """Each condition against the baseline condition, per model.

    For a model and condition c, over the cells paired with the baseline's (same question and
    repetition): ``delta_accuracy`` = mean(correct_c - correct_baseline) with a paired bootstrap interval;
    ``mcnemar_p`` the exact McNemar test on the discordant pairs (:func:`prism.stats.basics.mcnemar_exact`),
    ``mcnemar_p_holm`` Holm-adjusted across the model's non-baseline conditions; ``flip_rate`` the share
    of paired cells whose answer differs from the baseline's (UNKNOWN an outcome of its own) with its
    interval. ``accuracy`` is over all of c's observed cells. The baseline's own row has delta and flip
    rate 0 with interval [0, 0] and no test (empty p-values). ``detectable_effect`` is the |delta_accuracy| the
    McNemar test had 80% power to find at its Holm level (:func:`detectable_changes`), ``detectable_method`` how
    it was computed.

    With several repetitions, cells pair by repetition index and the bootstrap resamples questions (all
    their repetitions together); the McNemar test counts every discordant pair as if independent.

    Rows: per model (in the given order), the baseline first, then the other conditions ranked by the
    size of their effect (|delta_accuracy|, then flip rate, descending).

    Raises:
        ValueError: If a model has no ``baseline`` condition.
    """
    batch = Batch(n_boot=n_boot, seed=seed)
    per_model: list[tuple[ModelCells, list[dict[str, object]]]] = []
    pending: list[tuple[dict[str, object], str, int]] = []  # (row, interval's prefix, statistic)
    for model in models:
        if baseline not in model.conditions:
            raise ValueError(f"the baseline condition {baseline!r} is not among {model.label}'s conditions "
                             f"{list(model.conditions)}; pass baseline=NAME with one of them")
        keyed = has_key(model)
        cells = model.cells
        own = _Codes(cells["condition"])
        # One merge of the baseline's cells with every condition's: a condition's pairs are its rows, in the
        # order of the per-condition merge (the baseline's rows, then the condition's).
        base = cells[own.mask(baseline)][["question_id", "repetition", "category", "correct"]]
        paired = base.merge(cells[["question_id", "repetition", "condition", "category", "correct"]],
                            on=["question_id", "repetition"], suffixes=("_base", ""))
        conditions = _Codes(paired["condition"])
        questions, _ = pd.factorize(paired["question_id"])
        answers_base, answers = _category_codes(paired["category_base"], paired["category"])
        correct_base = np.asarray(paired["correct_base"], dtype=bool)
        correct = np.asarray(paired["correct"], dtype=bool)
        own_correct = cells["correct"].to_numpy(np.float64)
        rows = []
        for condition in model.conditions:
            mask = conditions.mask(condition)
            q, cb, cc = questions[mask], correct_base[mask], correct[mask]
            flips = _differ(answers_base[mask], answers[mask])
            flip_index, flip = batch.add_ratio(*_question_sums(q, flips))
            delta_index, delta = -1, math.nan
            if keyed:
                delta_index, delta = batch.add_ratio(*_question_sums(q, cc.astype(np.float64)
                                                                     - cb.astype(np.float64)))
            pairs = int(mask.sum())
            p = math.nan  # the baseline is not tested against itself; nothing is tested without pairs
            discordant = (0, 0)
            if condition != baseline and pairs:
                discordant = basics.discordant_counts(cb, cc)
                p = basics.mcnemar_exact(*discordant)
            own_mask = own.mask(condition)
            accuracy = float(own_correct[own_mask].mean()) if own_mask.any() else math.nan
            row: dict[str, object] = {
                "model": model.label, "condition": condition, "baseline": baseline, "accuracy": accuracy,
                "delta_accuracy": delta, "delta_ci_low": math.nan, "delta_ci_high": math.nan, "mcnemar_p": p,
                "flip_rate": flip, "flip_ci_low": math.nan, "flip_ci_high": math.nan, "_pairs": pairs,
                "_discordant": sum(discordant), "_both": int((cb & cc).sum())}
            pending += [(row, "delta", delta_index), (row, "flip", flip_index)]
            rows.append(row)
        per_model.append((model, rows))
    found = batch.intervals()
    for row, prefix, index in pending:
        if index >= 0:
            row[f"{prefix}_ci_low"], row[f"{prefix}_ci_high"] = found[index]
    frames = []
    for model, rows in per_model:
        table = pd.DataFrame(rows)
        if not has_key(model):
            # Without a key there is no accuracy to differ; the flip rate (answers alone) still holds.
            table[["accuracy", "delta_accuracy", "delta_ci_low", "delta_ci_high", "mcnemar_p"]] = math.nan
        table["mcnemar_p_holm"] = basics.holm(table["mcnemar_p"].to_numpy(np.float64))
        table["detectable_effect"], table["detectable_method"] = detectable_changes(table)
        table["_is_base"] = table["condition"] == baseline
        table["_effect"] = table["delta_accuracy"].abs().fillna(-1.0)
        table["_flip"] = table["flip_rate"].fillna(-1.0)
        table = table.sort_values(["_is_base", "_effect", "_flip"], ascending=False, kind="stable")
        frames.append(table)
    return pd.concat(frames, ignore_index=True)[list(SENSITIVITY_COLUMNS)] if frames else _empty(SENSITIVITY_COLUMNS)


def detectable_changes(table: pd.DataFrame) -> tuple[list[float], list[str]]:
    """Each tested condition's detectable |change in accuracy| (:func:`prism.stats.power.mcnemar_detectable`).

    At the level a lone change in the model's Holm family (its tested conditions) must reach, over the
    condition's paired cells, their observed discordant share and their both-correct share (the discordance a
    change would make); untested rows have none.
    """
    from prism.stats import power

    tested = table["mcnemar_p"].notna()
    level = power.holm_level(int(tested.sum()))
    effects, methods = [], []
    for is_tested, pairs, discordant, both in zip(tested, table["_pairs"], table["_discordant"], table["_both"],
                                                  strict=True):
        if not is_tested:
            effects.append(math.nan)
            methods.append("")
            continue
        effects.append(power.mcnemar_detectable(int(pairs), discordant / pairs, level, both_correct=both / pairs))
        methods.append(power.ANALYTIC_MCNEMAR)
    return effects, methods


def shared_conditions(a: ModelCells, b: ModelCells) -> list[str]:
    """Conditions both runs have, in a's order."""
    return [c for c in a.conditions if c in b.conditions]


def pair_cells(a: ModelCells, b: ModelCells, conditions: Sequence[str]) -> pd.DataFrame:
    """Cells of two models paired on (question, condition, repetition), restricted to ``conditions``."""
    keep = ["question_id", "condition", "repetition", "category", "correct", "recovered", "correct_answer",
            "response", "prompt_sha256"]
    left = a.cells[a.cells["condition"].isin(conditions)][keep]
    right = b.cells[b.cells["condition"].isin(conditions)][keep]
    return left.merge(right, on=_CELL, suffixes=("_a", "_b"))


Pair = tuple[ModelCells, ModelCells]


def model_pairs(models: Sequence[ModelCells], pairs: str = "all", reference: str | None = None) -> list[Pair]:
    """The pairs of runs the cross-model tables are made for.

    Args:
        models: The compared runs, in table order.
        pairs: ``all``: every pair (a before b in table order); ``reference``: the reference run against
            each other run, the reference as ``model_a``.
        reference: The reference run's id (``pairs=reference``); None: the first run.

    Returns:
        The pairs, in table order of their second run.

    Raises:
        ValueError: If the reference is not among the runs (``pairs`` and the cap are checked once, by
            :meth:`prism.config.CompareConfig.check`).
    """
    if pairs == "all":
        return list(combinations(models, 2))
    if not models:
        return []
    ids = [m.run_id for m in models]
    if reference is not None and reference not in ids:
        raise ValueError(f"the reference run {reference} is not among the compared runs {', '.join(ids)}; pass "
                         "reference=RUN_ID with one of them, or leave it unset for the default")
    ref = models[ids.index(reference)] if reference is not None else models[0]
    return [(ref, m) for m in models if m is not ref]


def divergence_table(models: Sequence[ModelCells], *, n_boot: int, seed: int,
                     pairs: Sequence[Pair] | None = None) -> pd.DataFrame:
    """Answer disagreement between pairs of models, per shared condition and pooled (``all``).

    Over the paired cells: ``disagreement`` is the share whose answer categories differ (UNKNOWN an
    outcome of its own) with a bootstrap interval over questions; ``disagreement_answered`` the same share
    over the cells where both recovered an answer (no interval; empty when there is none); ``kappa`` is
    Cohen's kappa over the answer categories (:func:`prism.stats.basics.cohens_kappa`); the four counts split the
    cells by which side is correct. ``excess`` is the disagreement minus the mean of the two models' own
    across-condition disagreement over the shared conditions (:func:`prism.stats.basics.excess`), with its
    interval; it is undefined (empty) with fewer than two shared conditions.

    Every interval is evaluated at the end in one :class:`prism.stats.bootstrap_batch.Batch` (the same
    numbers as one bootstrap per row), and each run's own disagreement is counted once per set of shared
    conditions, not once per pair.

    Args:
        models: The compared runs.
        n_boot: Bootstrap resamples.
        seed: Their seed.
        pairs: The pairs to compare (:func:`model_pairs`); None: every pair.

    Returns:
        Columns :data:`DIVERGENCE_COLUMNS`; for each pair (in the given order) one row per shared
        condition, then the pooled row. Empty with fewer than two models.
    """
    batch = Batch(n_boot=n_boot, seed=seed)
    within: dict[tuple[int, tuple[str, ...]], pd.DataFrame] = {}
    rows: list[dict[str, object]] = []
    pending: list[tuple[dict[str, object], str, int]] = []
    for a, b in (combinations(models, 2) if pairs is None else pairs):
        conditions = shared_conditions(a, b)
        paired = _paired_answers(a, b, conditions)
        questions, uniques = pd.factorize(paired["question_id"])
        # Each run's own condition pairs per question, lined up with the pair's questions (NaN: none).
        own = [_within(m, conditions, within).reindex(uniques) for m in (a, b)]
        own_sums = np.column_stack([o[c].to_numpy(np.float64) for o in own for c in ("differ", "pairs")])
        answers_a, answers_b = _category_codes(paired["category_a"], paired["category_b"])
        answered = np.asarray(paired["recovered_a"], dtype=bool) & np.asarray(paired["recovered_b"], dtype=bool)
        cells = _PairCells(questions, _differ(answers_a, answers_b), answers_a, answers_b,
                           np.asarray(paired["correct_a"], dtype=bool), np.asarray(paired["correct_b"], dtype=bool),
                           answered, own_sums)
        by_condition = _Codes(paired["condition"])
        for condition in [*conditions, POOLED]:
            part = cells if condition == POOLED else cells.subset(by_condition.mask(condition))
            row, indexes = part.divergence(batch)
            row = {"model_a": a.label, "model_b": b.label, "condition": condition, **row}
            pending += [(row, prefix, index) for prefix, index in indexes.items()]
            rows.append(row)
    found = batch.intervals()
    for row, prefix, index in pending:
        if index >= 0:
            row[f"{prefix}_ci_low"], row[f"{prefix}_ci_high"] = found[index]
    return pd.DataFrame(rows, columns=list(DIVERGENCE_COLUMNS)) if rows else _empty(DIVERGENCE_COLUMNS)


def _excess(sums: NDArray[np.float64]) -> NDArray[np.float64]:
    """:func:`prism.stats.basics.excess`'s statistic from the sums of its six columns, in its order of operations."""
    between = sums[:, 0] / sums[:, 1]
    return np.asarray(between - (sums[:, 2] / sums[:, 3] + sums[:, 4] / sums[:, 5]) / 2, dtype=np.float64)


@dataclass(frozen=True)
class _PairCells:
    """Two runs' paired cells as arrays, one entry per paired cell.

    Question codes (-1: none), whether the answers differ, the answer codes, correctness, both recovered;
    ``own``: per question code, the two runs' (differ, pairs) within sums (NaN where a run has none).
    """

    questions: NDArray[np.intp]
    differ: NDArray[np.float64]
    answers_a: NDArray[np.intp]
    answers_b: NDArray[np.intp]
    correct_a: NDArray[np.bool_]
    correct_b: NDArray[np.bool_]
    answered: NDArray[np.bool_]
    own: NDArray[np.float64]

    def subset(self, mask: NDArray[np.bool_]) -> _PairCells:
        return _PairCells(self.questions[mask], self.differ[mask], self.answers_a[mask], self.answers_b[mask],
                          self.correct_a[mask], self.correct_b[mask], self.answered[mask], self.own)

    def divergence(self, batch: Batch) -> tuple[dict[str, object], dict[str, int]]:
        """The row's numbers (intervals NaN) and the batch statistics of its two intervals."""
        order, differ, cells = _question_order_sums(self.questions, self.differ)
        dis_index, dis = batch.add_ratio(differ, cells)
        # The excess pools over the questions where all three are defined (basics.excess, in its column order).
        columns = np.column_stack([differ, cells, self.own[order]])
        columns = columns[(columns[:, 1] > 0) & (columns[:, 3] > 0) & (columns[:, 5] > 0)]
        exc_index, exc = -1, math.nan
        if len(columns):
            exc = float(_excess(np.ones((1, len(columns))) @ columns)[0])
            exc_index = batch.add(columns, _excess, exc)
        answered = self.answered
        ca, cb = self.correct_a, self.correct_b
        row: dict[str, object] = {
            "disagreement": dis, "disagreement_ci_low": math.nan, "disagreement_ci_high": math.nan,
            "disagreement_answered": (float(np.count_nonzero(self.differ[answered]) / np.count_nonzero(answered))
                                      if answered.any() else math.nan),
            "kappa": _kappa(self.answers_a, self.answers_b),
            "both_correct": int((ca & cb).sum()), "only_a": int((ca & ~cb).sum()), "only_b": int((~ca & cb).sum()),
            "both_wrong": int((~ca & ~cb).sum()),
            "excess": exc, "excess_ci_low": math.nan, "excess_ci_high": math.nan,
        }
        return row, {"disagreement": dis_index, "excess": exc_index}


def _paired_answers(a: ModelCells, b: ModelCells, conditions: Sequence[str]) -> pd.DataFrame:
    """:func:`pair_cells` with only the columns the divergence table reads (the same rows, in the same order)."""
    keep = [*_CELL, "category", "correct", "recovered"]
    left = a.cells[a.cells["condition"].isin(conditions)][keep]
    right = b.cells[b.cells["condition"].isin(conditions)][keep]
    return left.merge(right, on=_CELL, suffixes=("_a", "_b"))


def _within(model: ModelCells, conditions: Sequence[str],
            cache: dict[tuple[int, tuple[str, ...]], pd.DataFrame]) -> pd.DataFrame:
    """:func:`prism.stats.basics.within_pair_sums` of the model's cells in ``conditions``, counted once."""
    key = (id(model), tuple(conditions))
    if key not in cache:
        cache[key] = basics.within_pair_sums(model.cells[model.cells["condition"].isin(conditions)])
    return cache[key]


def condition_disagreement_table(models: Sequence[ModelCells], *, n_boot: int, seed: int) -> pd.DataFrame:
    """Each model's own across-condition disagreement: the share of its condition pairs that differ.

    The quantity the divergence ``excess`` subtracts (here over all of the model's conditions), shown on
    the diagonal of the divergence matrix.

    Returns:
        Columns :data:`CONDITION_DISAGREEMENT_COLUMNS`, one row per model.
    """
    batch = Batch(n_boot=n_boot, seed=seed)
    rows: list[list[object]] = []
    pending: list[tuple[int, int]] = []
    for model in models:
        sums = basics.within_pair_sums(model.cells)
        index, point = batch.add_ratio(sums["differ"].to_numpy(np.float64), sums["pairs"].to_numpy(np.float64))
        rows.append([model.label, point, math.nan, math.nan, int((sums["pairs"] > 0).sum())])
        pending.append((len(rows) - 1, index))
    _fill(rows, pending, batch, (2, 3))
    return pd.DataFrame(rows, columns=list(CONDITION_DISAGREEMENT_COLUMNS))


class _Codes:
    """A column's values as integer codes, so that a row mask per value is one integer comparison."""

    def __init__(self, column: pd.Series) -> None:
        self.codes, uniques = pd.factorize(column)
        self.index = {value: i for i, value in enumerate(uniques)}

    def mask(self, value: str) -> NDArray[np.bool_]:
        """The rows equal to ``value`` (none when it does not occur)."""
        code = self.index.get(value, -2)
        return np.asarray(self.codes == code, dtype=bool)


def _category_codes(a: pd.Series, b: pd.Series) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Both sides' answer categories as codes of their sorted union (-1: missing), as cohens_kappa factorizes."""
    codes, _ = pd.factorize(np.concatenate([np.asarray(a, dtype=object), np.asarray(b, dtype=object)]), sort=True)
    return codes[: len(a)], codes[len(a) :]


def _differ(a: NDArray[np.intp], b: NDArray[np.intp]) -> NDArray[np.float64]:
    """1 where two answer codes differ: as object comparison does, a missing answer differs from everything."""
    return np.asarray((a != b) | (a < 0) | (b < 0), dtype=np.float64)


def _kappa(a: NDArray[np.intp], b: NDArray[np.intp]) -> float:
    """:func:`prism.stats.basics.cohens_kappa` of these cells, from codes over a wider sorted set of categories."""
    seen = np.unique(np.concatenate([a, b]))
    seen = seen[seen >= 0]  # the categories these cells show, in sorted order
    if a.size == 0 or seen.size < 2:
        return math.nan
    lookup = np.full(int(seen[-1]) + 2, -1, dtype=np.intp)  # the last entry maps -1 (missing) to -1
    lookup[seen] = np.arange(seen.size)
    return basics.kappa_of_codes(lookup[a], lookup[b], int(seen.size))


def _question_order_sums(questions: NDArray[np.intp],
                         values: NDArray[np.float64]) -> tuple[NDArray[np.intp], NDArray[np.float64],
                                                                NDArray[np.float64]]:
    """Per question code, in order of first appearance (-1 left out, as a groupby does).

    Returns:
        Each question's code, its sum of ``values`` and its number of cells: :func:`prism.stats.basics.question_sums`
        over codes.
    """
    keep = questions >= 0
    questions, values = questions[keep], values[keep]
    if not questions.size:
        empty = np.zeros(0, dtype=np.float64)
        return np.zeros(0, dtype=np.intp), empty, empty
    seen, first = np.unique(questions, return_index=True)
    order = seen[np.argsort(first, kind="stable")]
    size = int(seen[-1]) + 1
    sums = np.bincount(questions, weights=np.where(np.isnan(values), 0.0, values), minlength=size)
    counts = np.bincount(questions, minlength=size)
    return order, sums[order].astype(np.float64), counts[order].astype(np.float64)


def _question_sums(questions: NDArray[np.intp], values: NDArray[np.float64]) -> tuple[NDArray[np.float64],
                                                                                     NDArray[np.float64]]:
    """:func:`_question_order_sums` without the codes."""
    _, sums, counts = _question_order_sums(questions, values)
    return sums, counts


def _fill(rows: list[list[object]], pending: list[tuple[int, int]], batch: Batch, at: tuple[int, int]) -> None:
    """Put each pending row's interval (statistic ``index``) into its columns ``at``."""
    found = batch.intervals()
    for row, index in pending:
        if index >= 0:
            rows[row][at[0]], rows[row][at[1]] = found[index]


def differences_table(models: Sequence[ModelCells], pairs: Sequence[Pair] | None = None,
                      max_per_pair: int | None = None) -> pd.DataFrame:
    """The listed cells of :func:`differences` (its first table)."""
    return differences(models, pairs, max_per_pair)[0]


def differences(models: Sequence[ModelCells], pairs: Sequence[Pair] | None = None,
                max_per_pair: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The cells where two models' answers differ, questions where they differ most first, and their counts.

    ``question_disagreement`` is the share of the question's paired cells (over the shared conditions and
    repetitions) whose answers differ. Each row carries both run ids, the cell, both answers (UNKNOWN
    spelled out) and raw responses, and the prompt (by sha256 and text, as shown to model_a), so every
    number in the divergence table is one lookup away from its evidence.

    The cap bounds only what is listed: per pair, the first ``max_per_pair`` differing cells in the
    pair's own order (question_disagreement descending, then question, condition and repetition); the
    counts table says how many cells each pair paired, how many differ and how many are listed. Every
    statistic is computed from the paired cells, never from this table.

    Args:
        models: The compared runs.
        pairs: The pairs (:func:`model_pairs`); None: every pair.
        max_per_pair: Most cells listed per pair; None lists every differing cell.

    Returns:
        (listed, counts): columns :data:`DIFFERENCE_COLUMNS`, sorted by question_disagreement (descending),
        then by model pair, question, condition and repetition in the runs' order; and columns
        :data:`DIFFERENCE_COUNT_COLUMNS`, one row per pair (``max_per_pair`` empty without a cap).
    """
    frames, counts = [], []
    for pair_index, (a, b) in enumerate(combinations(models, 2) if pairs is None else pairs):
        conditions = shared_conditions(a, b)
        cells = pair_cells(a, b, conditions)
        differ = cells["category_a"] != cells["category_b"]
        n_paired, n_differ = len(cells), int(differ.sum())
        if n_differ:
            cells["question_disagreement"] = differ.astype(np.float64).groupby(cells["question_id"]).transform("mean")
            cells = cells[differ]
            question_order = {q: i for i, q in enumerate(dict.fromkeys(a.cells["question_id"]))}
            condition_order = {c: i for i, c in enumerate(conditions)}
            cells = cells.assign(_q=cells["question_id"].map(question_order),
                                 _c=cells["condition"].map(condition_order))
            if max_per_pair is not None and n_differ > max_per_pair:
                cells = cells.sort_values(["question_disagreement", "_q", "_c", "repetition"],
                                          ascending=[False, True, True, True], kind="stable").head(max_per_pair)
            frames.append(_difference_rows(a, b, cells, pair_index))
        listed = n_differ if max_per_pair is None else min(n_differ, max_per_pair)
        counts.append((a.label, b.label, a.run_id, b.run_id, n_paired, n_differ, listed, max_per_pair))
    count_table = pd.DataFrame(counts, columns=list(DIFFERENCE_COUNT_COLUMNS)).astype({"max_per_pair": "Int64"})
    frames = [f for f in frames if len(f)]
    if not frames:
        return _empty(DIFFERENCE_COLUMNS), count_table
    table = pd.concat(frames, ignore_index=True)
    table = table.sort_values(["question_disagreement", "_pair", "_q", "_c", "repetition"],
                              ascending=[False, True, True, True, True], kind="stable")
    return table[list(DIFFERENCE_COLUMNS)].reset_index(drop=True), count_table


def _difference_rows(a: ModelCells, b: ModelCells, cells: pd.DataFrame, pair_index: int) -> pd.DataFrame:
    """One pair's listed cells as rows of the differences table (with the sort keys ``_pair``, ``_q``, ``_c``)."""
    prompts: dict[str, str] = {**b.prompts, **a.prompts}
    return pd.DataFrame({
        "model_a": a.label, "model_b": b.label, "run_a": a.run_id, "run_b": b.run_id,
        "question_id": cells["question_id"], "question_disagreement": cells["question_disagreement"],
        "condition": cells["condition"], "repetition": cells["repetition"],
        "correct_answer": cells["correct_answer_a"], "answer_a": cells["category_a"],
        "answer_b": cells["category_b"], "correct_a": cells["correct_a"].astype(bool),
        "correct_b": cells["correct_b"].astype(bool), "response_a": cells["response_a"],
        "response_b": cells["response_b"], "prompt_sha256": cells["prompt_sha256_a"],
        "prompt": [prompts.get(str(sha), "") for sha in cells["prompt_sha256_a"]],
        "_pair": pair_index, "_q": cells["_q"], "_c": cells["_c"],
    })


def pairing_note(tables: ComparisonTables) -> str:
    """Which pairs of runs the divergence and differences tables hold, read off the divergence table.

    Empty for runs on several question sets: :func:`prism.compare.groups.coverage_lines` says it per set.
    """
    divergence = tables.divergence
    several_sets = tables.question_sets is not None and len(tables.question_sets) > 1
    if divergence is None or divergence.empty or several_sets:
        return ""
    pairs = list(dict.fromkeys(zip(divergence["model_a"], divergence["model_b"], strict=True)))
    n_models = tables.sensitivity["model"].nunique()
    firsts = {a for a, _ in pairs}
    if n_models >= 3 and len(pairs) == n_models - 1 and len(firsts) == 1:
        return (f"Each run is compared with the reference run {next(iter(firsts))} ({len(pairs)} pairs, "
                "pairs=reference, the default): the other runs are not compared with each other here. "
                "pairs=all compares every pair; reference=RUN_ID picks another reference.")
    return f"{len(pairs)} pair(s) of runs compared ({'every pair' if n_models >= 3 else 'one pair'})."


def cap_note(tables: ComparisonTables) -> str:
    """How many differing cells there are and how many the differences table lists (its per-pair cap)."""
    counts = tables.difference_counts
    if counts is None or counts.empty:
        return ""
    differing, listed = int(counts["differing"].sum()), int(counts["listed"].sum())
    caps = counts["max_per_pair"].dropna()
    cap = f"at most {int(caps.iloc[0])} per pair (differences.max_per_pair)" if len(caps) else "no cap"
    return (f"{differing} paired cells differ over {len(counts)} pair(s); {listed} are listed, {cap}; "
            f"the other {differing - listed} are counted in comparison/difference_counts.csv. Every statistic "
            "above uses all paired cells, not only the listed ones.")


def _empty(columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
