"""The simulated studies of a plan: responses drawn from per-question distributions, tested as compare tests them.

A *population* is what a study draws its questions from: per question and condition, the probabilities of
each answer category (index 0 the correct option). A pilot gives one (:func:`population_from_cells`: each
question's observed answers per condition, lightly smoothed); stated rates give another
(:func:`stated_population`). Each simulated study draws ``n`` questions with replacement from it, ``R``
repetitions per condition, plants the effect and runs the very test a comparison runs:

- ``shift``: the step's permutation test (:func:`prism.stats.shifts.shift`, answer measure); the to-condition
  is the baseline's distribution moved towards one wrong answer by ``t``, with ``t`` set so the expected
  excess (``1/2 sum_k (p_k - q_k)^2`` per question, averaged) equals the planted size; rejected when the excess
  is positive and ``p`` is below ``alpha / m`` (a lone effect in a Holm family of ``m``);
- ``accuracy``: the exact McNemar test (:func:`prism.stats.basics.mcnemar_exact`) over the cells of two
  models paired on question and repetition; model b is model a with every question's logit moved so the mean
  accuracy differs by the planted size; rejected at ``alpha / m``;
- ``interaction``: the clustered model of ``comparison/gee_wald.csv`` (:func:`prism.compare.noise.gee_table`)
  on a grid whose one cell gets the planted logit on keeping the baseline's answer; rejected when the two
  axes' interaction term has ``p < alpha``.

Every study is seeded from the plan's seed and its index, so a plan is reproducible. No model is asked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from prism.compare.tables import ModelCells
from prism.stats import basics, shifts

# The effects a plan can be asked to detect (PlanEffect.kind).
PLAN_EFFECTS = ("shift", "accuracy", "interaction")
# Pseudo-count spread over a question's categories when its distribution is read off a pilot: a question
# answered one way in every observed repetition still gets a little noise, as a few more repetitions would show.
SMOOTHING = 0.5


@dataclass(frozen=True)
class Population:
    """Answer-category probabilities per question and condition.

    Attributes:
        probs: (Q, C, K) probabilities; category 0 is the correct option.
        conditions: The C condition names (the baseline first).
    """

    probs: NDArray[np.float64]
    conditions: tuple[str, ...]


@dataclass(frozen=True)
class Grid:
    """A grid for the interaction effect: per cell its axis values and the logit of keeping the baseline's answer.

    Attributes:
        axes: The axis names.
        cells: Condition name -> (value per axis); the first is the baseline cell.
        logits: Condition name -> the logit of keeping the baseline's answer at the average question.
        spread: Standard deviation of the questions' intercepts on that logit.
        options: Options per question.
        families: Condition name -> its condition family (empty: every cell ``grid``).
        keep: A pilot's per-question keep probabilities (see below), or None.
    """

    axes: tuple[str, ...]
    cells: Mapping[str, tuple[str, ...]]
    logits: Mapping[str, float]
    spread: float
    options: int = 4
    families: Mapping[str, str] = field(default_factory=dict)
    # A grid pilot's questions (:func:`grid_from_cells`): (Q, C) each question's probability of keeping its
    # baseline's answer per cell (``cells`` order); a study draws its questions from these rows instead of
    # ``logits`` plus N(0, spread) intercepts.
    keep: NDArray[np.float64] | None = field(default=None, compare=False, repr=False)


def population_from_cells(model: ModelCells, conditions: Sequence[str]) -> Population:
    """Each question's answer distribution per condition, from a pilot run's observed cells.

    The correct option is category 0; the other answers a question received (UNKNOWN one of them) follow,
    and one more, never seen, so a planted shift has somewhere to go. :data:`SMOOTHING` pseudo-counts are
    spread evenly over the question's categories.
    """
    cells = model.cells[model.cells["condition"].isin(conditions)]
    questions = list(dict.fromkeys(cells["question_id"].astype(str)))
    per_question: list[tuple[str, list[str]]] = []
    for question, own in cells.groupby(cells["question_id"].astype(str), sort=False):
        key = own["correct_answer"].dropna()
        first = str(key.iloc[0]) if len(key) else "__none__"
        others = [c for c in dict.fromkeys(own["category"].astype(str)) if c != first]
        per_question.append((str(question), [first, *others, "__other__"]))
    width = max(len(c) for _, c in per_question) if per_question else 2
    probs = np.zeros((len(questions), len(conditions), width))
    index = {q: i for i, q in enumerate(questions)}
    for question, categories in per_question:
        own = cells[cells["question_id"].astype(str) == question]
        slot = {c: k for k, c in enumerate(categories)}
        for j, condition in enumerate(conditions):
            answers = own.loc[own["condition"] == condition, "category"].astype(str)
            counts = np.zeros(width)
            for answer in answers:
                counts[slot[answer]] += 1
            counts[: len(categories)] += SMOOTHING / len(categories)
            probs[index[question], j] = counts / counts.sum()
    return Population(probs, tuple(conditions))


def stated_population(accuracy: float, spread: float, options: int, conditions: Sequence[str],
                      questions: int = 2000, seed: int = 0) -> Population:
    """A population from stated rates: question logits ~ N(logit(accuracy), spread), wrong answers alike.

    Every condition has the same distribution (the null); effects are planted on top.
    """
    rng = np.random.default_rng(seed)
    correct = 1 / (1 + np.exp(-(math.log(accuracy / (1 - accuracy)) + rng.normal(0.0, spread, questions))))
    probs = np.empty((questions, len(conditions), options + 1))
    probs[:, :, 0] = correct[:, None]
    probs[:, :, 1:options] = ((1 - correct) / (options - 1))[:, None, None]
    probs[:, :, options] = 0.0  # the unseen slot a planted shift moves towards is one of the wrong options
    return Population(probs, tuple(conditions))


def shift_target(base: NDArray[np.float64], size: float) -> NDArray[np.float64]:
    """The to-condition's distributions: ``base`` (Q, K) moved towards each question's least likely answer.

    ``t`` (the share moved) is the same for every question, chosen so the expected excess averaged over the
    population's questions is ``size`` (capped at moving everything).
    """
    off = np.argmin(base + 1e-12 * np.arange(base.shape[1]), axis=1)  # ties: the last slot, the unseen one
    target = np.zeros_like(base)
    target[np.arange(len(base)), off] = 1.0
    reach = 0.5 * ((base - target) ** 2).sum(axis=1).mean()
    t = min(1.0, math.sqrt(max(size, 0.0) / reach)) if reach > 0 else 0.0
    return np.asarray((1 - t) * base + t * target, dtype=np.float64)


def _draw(rng: np.random.Generator, probs: NDArray[np.float64], reps: int) -> NDArray[np.intp]:
    """(n, reps) categories, one row per question, drawn from each row of ``probs`` (n, K)."""
    cumulative = np.cumsum(probs, axis=1)
    cumulative[:, -1] = 1.0
    u = rng.random((len(probs), reps))
    return np.asarray((u[:, :, None] > cumulative[:, None, :]).sum(axis=2), dtype=np.intp)


def shift_study(population: Population, n: int, reps: int, size: float, level: float, permutations: int,
                seed: int) -> bool:
    """One simulated study of a shift on the step baseline -> second condition: rejected or not."""
    rng = np.random.default_rng(seed)
    chosen = rng.integers(0, len(population.probs), n)
    base = population.probs[chosen, 0]
    source = _draw(rng, base, reps)
    moved = _draw(rng, shift_target(base, size), reps)
    blocks = []
    for a, b in zip(source, moved, strict=True):
        cats = np.concatenate([a, b])
        blocks.append((np.asarray(cats[:, None] != cats[None, :], dtype=np.float64), reps, reps))
    est = shifts.shift(shifts.StepData.from_blocks(blocks), n_boot=1, n_permutations=permutations, seed=seed)
    return bool(not math.isnan(est.p) and est.excess > 0 and est.p < level)


def _logit_shift(p: NDArray[np.float64], size: float) -> NDArray[np.float64]:
    """``p`` with every logit moved by one amount so the mean moves by ``size`` (bisection)."""
    clipped = np.clip(p, 1e-6, 1 - 1e-6)
    logits = np.log(clipped / (1 - clipped))
    goal = float(p.mean()) + size
    if not 0 < goal < 1:
        raise ValueError(f"an accuracy difference of {size:+g} from a mean of {p.mean():.3f} leaves [0, 1]")
    low, high = -30.0, 30.0
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if (1 / (1 + np.exp(-(logits + mid)))).mean() < goal else (low, mid)
    return np.asarray(1 / (1 + np.exp(-(logits + (low + high) / 2))), dtype=np.float64)


def accuracy_study(population: Population, condition: int, n: int, reps: int, size: float, level: float,
                   seed: int) -> bool:
    """One simulated study of two models' accuracy under one condition: the McNemar test rejects or not."""
    rng = np.random.default_rng(seed)
    chosen = rng.integers(0, len(population.probs), n)
    p_a = population.probs[chosen, condition, 0]
    p_b = _logit_shift(population.probs[:, condition, 0], size)[chosen]
    a = rng.random((n, reps)) < p_a[:, None]
    b = rng.random((n, reps)) < p_b[:, None]
    return basics.mcnemar_exact(*basics.discordant_counts(a.ravel(), b.ravel())) < level


def stated_grid(sizes: Sequence[int], accuracy: float, spread: float, options: int) -> Grid:
    """A grid from stated rates: axes ``a1``, ``a2``, ... with values ``v0`` (the baseline's) .. ``v<k-1>``.

    Every non-baseline cell keeps the baseline's answer at the same logit (no main effects).
    """
    import itertools

    axes = tuple(f"a{i + 1}" for i in range(len(sizes)))
    cells: dict[str, tuple[str, ...]] = {}
    for values in itertools.product(*[[f"v{j}" for j in range(k)] for k in sizes]):
        name = "__".join(f"{axis}.{value}" for axis, value in zip(axes, values, strict=True))
        cells[name] = tuple(values)
    logit = math.log(accuracy / (1 - accuracy))
    return Grid(axes, cells, dict.fromkeys(cells, logit), spread, options)


def grid_from_cells(model: ModelCells, baseline: str) -> Grid:
    """A grid pilot's cells as a :class:`Grid`: each question's and each cell's rate of keeping the baseline's answer.

    "Kept" is what the GEE models (:func:`prism.stats.gee.consistency_outcomes`): a response giving the modal
    answer of its question's baseline repetitions; questions whose baseline has no single mode are left out, as
    the fit leaves them out. The kept counts get the model the plan simulates (that of BENCHMARKS.md section 11):
    ``logit P(kept) = a_cell + u_question``, fitted by maximum likelihood (:func:`additive_logits`) with
    :data:`SMOOTHING` pseudo-counts per question and per cell split evenly between kept and not. The cells'
    ``a`` are then reduced to the axes' main effects (:func:`main_effects`): the test is of interactions, and
    a pilot's own (real or its noise) would be found as if planted, so the planted cell is the only one. Each
    pilot question keeps its own intercept, and a study draws the pilot's questions with those intercepts. A
    cell-by-question table of raw rates is not used: with a few repetitions per cell its noise would pass for
    question-by-cell heterogeneity and understate power.

    Raises:
        ValueError: If the run is not a grid, lacks the baseline, or has no question with a modal baseline answer.
    """
    from prism.compare.noise import consistency_responses
    from prism.stats.gee import consistency_outcomes

    if not model.grid:
        raise ValueError(f"run {model.run_id} is not a grid (its conditions have no crossed axes): an interaction "
                         "is planned from a grid pilot (conditions=grid) or from stated rates (pilot=false)")
    if baseline not in model.conditions:
        raise ValueError(f"the baseline {baseline!r} is not among run {model.run_id}'s conditions; set baseline=NAME")
    axes = tuple(model.grid)
    outcomes, _ = consistency_outcomes(consistency_responses([model], baseline, axes), baseline, axes)
    if outcomes.empty:
        raise ValueError(f"run {model.run_id} has no question whose baseline repetitions have one modal answer, "
                         "so no cell's consistency can be read")
    others = [c for c in model.conditions if c != baseline]
    kept, seen = (np.nan_to_num(outcomes.pivot_table(index="cluster", columns="condition", values="consistent",
                                                     aggfunc=how).reindex(columns=others).to_numpy(np.float64))
                  for how in ("sum", "count"))
    cell, question = additive_logits(kept, seen)
    # The test is of the interactions, so the studies' cells have none but the planted one: the cells' logits
    # are their main effects (a pilot's interactions, real or its noise, would be found as if planted).
    levels = [[str(model.levels.get(c, {}).get(axis, "")) for axis in axes] for c in others]
    cell = main_effects(cell, levels, seen.sum(axis=0))
    keep = np.ones((len(question), len(others) + 1))
    keep[:, 1:] = 1 / (1 + np.exp(-(cell[None, :] + question[:, None])))
    names = [baseline, *others]
    cells = {c: tuple(str(model.levels.get(c, {}).get(axis, "")) for axis in axes) for c in names}
    return Grid(axes, cells, {baseline: math.inf, **dict(zip(others, cell.tolist(), strict=True))},
                float(question.std()), families={c: model.families.get(c, "grid") for c in names}, keep=keep)


def main_effects(logits: NDArray[np.float64], levels: Sequence[Sequence[str]],
                 weights: NDArray[np.float64]) -> NDArray[np.float64]:
    """Cell logits projected on an intercept plus one effect per axis value (weighted least squares).

    Args:
        logits: (C,) the cells' logits.
        levels: Per cell, its value of each axis.
        weights: (C,) each cell's weight (its responses).
    """
    columns = [np.ones(len(logits))]
    for k in range(len(levels[0]) if levels else 0):
        values = sorted({cell[k] for cell in levels})
        columns += [np.asarray([cell[k] == v for cell in levels], dtype=np.float64) for v in values[1:]]
    design = np.column_stack(columns)
    root = np.sqrt(np.maximum(weights, 0.0))
    coef, *_ = np.linalg.lstsq(design * root[:, None], logits * root, rcond=None)
    return np.asarray(design @ coef, dtype=np.float64)


def additive_logits(kept: NDArray[np.float64], seen: NDArray[np.float64],
                    steps: int = 50) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``logit P = a_j + u_q`` fitted to (Q, C) kept counts out of ``seen``: the cells' ``a`` and the questions' ``u``.

    Alternating Newton steps on the two sets of score equations (``sum N sigmoid = kept``), each row and column
    with :data:`SMOOTHING` pseudo-responses, half of them kept, so a question or cell kept every time stays
    finite; ``u`` is centred on 0, so ``a`` is the logit at the average question.
    """
    a = np.zeros(kept.shape[1])
    u = np.zeros(kept.shape[0])
    row_target, col_target = kept.sum(axis=1) + SMOOTHING / 2, kept.sum(axis=0) + SMOOTHING / 2
    for _ in range(steps):
        for axis in (1, 0):  # questions (rows), then cells (columns)
            p = 1 / (1 + np.exp(-(a[None, :] + u[:, None])))
            expected = (seen * p).sum(axis=axis)
            curvature = (seen * p * (1 - p)).sum(axis=axis)
            # The pseudo-responses sit at the current probability's mean, SMOOTHING of them, half kept.
            mean_p = expected / np.maximum(seen.sum(axis=axis), 1e-12)
            gap = (row_target if axis == 1 else col_target) - expected - SMOOTHING * mean_p
            step = gap / (curvature + SMOOTHING * mean_p * (1 - mean_p))
            if axis == 1:
                u = u + np.clip(step, -2, 2)
            else:
                a = a + np.clip(step, -2, 2)
        a, u = a + u.mean(), u - u.mean()
    return a, u


def grid_cells(grid: Grid, n: int, reps: int, planted: str, size: float, seed: int) -> ModelCells:
    """One simulated grid run: each response keeps the baseline's answer ("A") or gives another option."""
    rng = np.random.default_rng(seed)
    names = list(grid.cells)
    planting = np.asarray([size if c == planted else 0.0 for c in names])
    if grid.keep is None:
        u = rng.normal(0.0, grid.spread, n)
        eta = np.asarray([grid.logits[c] for c in names])[None, :] + u[:, None] + planting[None, :]
    else:  # n of the pilot's questions, with replacement, each with its own keep probability per cell
        drawn = np.clip(grid.keep[rng.integers(0, len(grid.keep), n)], 1e-6, 1 - 1e-6)
        eta = np.log(drawn / (1 - drawn)) + planting[None, :]
    keep = rng.random((n, len(names), reps)) < 1 / (1 + np.exp(-eta[:, :, None]))
    keep[:, 0, :] = True  # the baseline cell is the reference answer
    wrong = np.asarray([chr(ord("B") + i) for i in range(grid.options - 1)])
    other = wrong[rng.integers(0, len(wrong), keep.shape)]
    categories = np.where(keep, "A", other)
    q, c, r = np.meshgrid(np.arange(n), np.arange(len(names)), np.arange(reps), indexing="ij")
    frame = pd.DataFrame({"question_id": [f"q{i}" for i in q.ravel()],
                          "condition": np.asarray(names, dtype=object)[c.ravel()], "repetition": r.ravel(),
                          "category": categories.ravel()})
    levels = {name: dict(zip(grid.axes, values, strict=True)) for name, values in grid.cells.items()}
    families = dict(grid.families) or {name: "grid" for name in names}
    return ModelCells("planned", f"sim-{seed}", tuple(names), frame, model="planned", axis="grid",
                      dataset="planned", families=families, grid=grid.axes, levels=levels)


def interaction_study(grid: Grid, n: int, reps: int, planted: str, size: float, level: float, seed: int) -> bool:
    """One simulated grid study: the GEE's interaction of the first two axes rejects at ``level`` or not.

    A fit the model could not make (separation, a singular covariance) counts as not rejected.
    """
    from prism.compare.noise import gee_table

    table = gee_table([grid_cells(grid, n, reps, planted, size, seed)], next(iter(grid.cells)))
    row = table[table["effect"] == f"{grid.axes[0]}:{grid.axes[1]}"]
    return bool(len(row) and row["p"].iloc[0] < level)
