"""Power planning (issue 40): is a plan right, are the detectable effects right, is the ranking calibrated?

Every figure is a seeded simulation on scripted models with planted effects (CPU only, no model):

- ``grid``: the plan for the 5 x 5 ``labels x option_order`` grid of BENCHMARKS.md section 11 (its response
  model: intercept 1.2, question intercept u ~ N(0, 0.5), its main effects per axis value, 3 repetitions),
  a single-cell interaction of ``--effect`` logits in ``labels.numbers__option_order.reverse``: simulated
  power of the GEE's ``labels:option_order`` test (Hotelling's reference) at each n, the same fit
  ``comparison/gee_wald.csv`` makes;
- ``calibration``: (1) the n ``prism.plan`` recommends for a shift reaches the stated power within 5 points
  over fresh studies at that n, and misses it at half that n; (2) under the null the rejection rate stays at
  the level; (3) the detectable effect compare reports matches the simulated power curve's 80% point (shift
  and McNemar); (4) the ranking probability of ``rank_robustness.csv`` is calibrated against replicate
  studies with planted gaps.

    PYTHONPATH=. python -m benchmarks.plan_power --part grid --sims 120 --n 30,50,70
    PYTHONPATH=. python -m benchmarks.plan_power --part calibration --sims 400
    PYTHONPATH=. python -m benchmarks.plan_power --part detectable --sims 1000   # (3) alone
    PYTHONPATH=. python -m benchmarks.plan_power --part gee --sims 200           # the GEE terms' figure
    PYTHONPATH=. python -m benchmarks.plan_power --part pilot-grid --sims 100 --n 30,45   # from a grid pilot
    python -m benchmarks --only plan --quick          # both parts at toy size, to check the harness
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.common import Context, Section
from prism.compare.rank_robustness import rank_robustness_table
from prism.compare.tables import ModelCells
from prism.config import PlanConfig
from prism.plan.core import make_plan, power_at, wilson
from prism.plan.simulate import Grid, interaction_study, shift_study, stated_population
from prism.stats import basics, power, shifts

# BENCHMARKS.md section 11's response model (scripts/grid_interaction_rates.py).
LABEL_EFFECT = {"P0": 0.0, "numbers": -0.3, "lower": -0.1, "roman": -0.6, "symbols": -0.4}
ORDER_EFFECT = {"P0": 0.0, "reverse": -0.5, "rotate": -0.2, "swap_ends": -0.3, "shuffle": -0.4}
PLANTED = "labels.numbers__option_order.reverse"


def section11_grid() -> Grid:
    """The 5 x 5 grid of section 11 with its main effects, baseline cell first."""
    cells, logits = {}, {}
    for label, a in LABEL_EFFECT.items():
        for order, b in ORDER_EFFECT.items():
            name = "P0" if (label, order) == ("P0", "P0") else f"labels.{label}__option_order.{order}"
            cells[name] = (label, order)
            logits[name] = 1.2 + a + b
    return Grid(("labels", "option_order"), cells, logits, spread=0.5, options=4)


def _rate(hits: int, total: int) -> str:
    low, high = wilson(hits, total)
    return f"{hits}/{total} = {hits / total:.3f} [{low:.3f}, {high:.3f}]"


def grid_part(ns: Sequence[int], sims: int, effect: float, reps: int = 3) -> list[str]:
    """Simulated power of the 5 x 5 grid's interaction test at each n (the plan for section 11's question)."""
    grid = section11_grid()
    lines = ["| questions | planted | rejected at 5% [95% Wilson] | s |", "|---:|---:|---|---:|"]
    first = None
    for n in ns:
        started = time.perf_counter()

        def study(n_: int, r: int, seed: int) -> bool:
            return interaction_study(grid, n_, r, PLANTED, effect, 0.05, seed)

        hits = power_at(study, n, reps, sims, 40)
        lines.append(f"| {n} | {effect:+g} | {_rate(hits, sims)} | {time.perf_counter() - started:.0f} |")
        print(lines[-1], flush=True)
        if first is None and hits / sims >= 0.8:
            first = n
    lines += ["", f"Smallest n tried reaching 0.8: {first if first is not None else 'none'}."]
    return lines


def pilot_grid_part(ns: Sequence[int], sims: int, effect: float, pilot_n: int = 60, reps: int = 3) -> list[str]:
    """The same plan as :func:`grid_part`, from a grid *pilot*: one simulated run of section 11's grid read back.

    The pilot (``pilot_n`` questions, ``reps`` repetitions, no planted effect) is read as ``prism.plan`` reads a
    grid pilot (:func:`prism.plan.simulate.grid_from_cells`), and the studies draw its questions.
    """
    from prism.plan.simulate import grid_cells, grid_from_cells

    pilot = grid_from_cells(grid_cells(section11_grid(), pilot_n, reps, PLANTED, 0.0, 2024), "P0")
    lines = [f"Pilot: {pilot_n} questions x {reps} repetitions of section 11's grid, read back: question spread "
             f"{pilot.spread:.2f} (true 0.5), planted cell's own logit {pilot.logits[PLANTED]:.2f} (true "
             f"{section11_grid().logits[PLANTED]:.2f}).", "",
             "| questions | planted | rejected at 5% [95% Wilson] | s |", "|---:|---:|---|---:|"]
    for n in ns:
        started = time.perf_counter()

        def study(n_: int, r: int, seed: int) -> bool:
            return interaction_study(pilot, n_, r, PLANTED, effect, 0.05, seed)

        hits = power_at(study, n, reps, sims, 40)
        lines.append(f"| {n} | {effect:+g} | {_rate(hits, sims)} | {time.perf_counter() - started:.0f} |")
        print(lines[-1], flush=True)
    started = time.perf_counter()  # the null: no cell planted, so a rejection is a pilot interaction left in

    def null(n_: int, r: int, seed: int) -> bool:
        return interaction_study(pilot, n_, r, PLANTED, 0.0, 0.05, seed)

    hits = power_at(null, max(ns), reps, sims, 41)
    lines.append(f"| {max(ns)} | 0 (null) | {_rate(hits, sims)} | {time.perf_counter() - started:.0f} |")
    print(lines[-1], flush=True)
    return lines


def shift_detectable_check(n: int, reps: int, family: int, sims: int, seed: int) -> list[str]:
    """Compare's detectable excess on null studies against the simulated power at that excess.

    Five null studies each give the figure compare would report (:func:`prism.stats.power.shift_detectable`,
    and the first version's :func:`prism.stats.power.permutation_detectable` beside it); fresh studies with a
    shift of the mean figure planted (:func:`prism.plan.simulate.shift_study`) say how often the test finds it.
    """
    from prism.plan.simulate import _draw

    population = stated_population(0.6, 0.5, 4, ["C0", "C1"], seed=seed)
    level = power.holm_level(family)
    rng = np.random.default_rng(seed)
    figures, moved_null = [], []
    for k in range(5):  # the detectable effect of five null studies, as compare would report each
        chosen = rng.integers(0, len(population.probs), n)
        base = population.probs[chosen, 0]
        blocks = []
        a, b = _draw(rng, base, reps), _draw(rng, base, reps)
        for x, y in zip(a, b, strict=True):
            cats = np.concatenate([x, y])
            blocks.append((np.asarray(cats[:, None] != cats[None, :], dtype=np.float64), reps, reps))
        data = shifts.StepData.from_blocks(blocks)
        est = shifts.shift(data, n_boot=1, n_permutations=2000, seed=seed + k)
        assert est.null is not None
        figures.append(power.shift_detectable(data, est.null, level, seed=seed + k))
        moved_null.append(power.permutation_detectable(est.null, level))
    detectable, before = float(np.mean(figures)), float(np.mean(moved_null))
    hits = sum(shift_study(population, n, reps, detectable, level, 1000, 9000 + i) for i in range(sims))
    old = sum(shift_study(population, n, reps, before, level, 1000, 9000 + i) for i in range(sims))
    return [f"| shift (excess), n={n}, R={reps}, Holm family {family} (level {level:.4g}) | {detectable:.4f} "
            f"(five null studies: {min(figures):.4f}-{max(figures):.4f}) | {_rate(hits, sims)} | "
            f"{before:.4f}: {_rate(old, sims)} |"]


def mcnemar_detectable_check(n: int, accuracy: float, sims: int, seed: int, family: int = 1) -> list[str]:
    """The McNemar detectable |delta| (five null studies) against the simulated power of that difference.

    Each null study's observed 2 x 2 shares give the figure compare would report
    (:func:`prism.stats.power.mcnemar_detectable`, with the both-correct share); fresh studies with model b's
    logits moved so its accuracy drops by the mean figure say how often the exact test finds it.
    """
    rng = np.random.default_rng(seed)
    p = 1 / (1 + np.exp(-(math.log(accuracy / (1 - accuracy)) + rng.normal(0, 1.0, 4000))))
    from prism.plan.simulate import _logit_shift

    level = power.holm_level(family)
    figures, shares, without = [], [], []
    for _ in range(5):
        q = p[rng.integers(0, len(p), n)]
        a, b = rng.random(n) < q, rng.random(n) < q
        discordant = float(np.mean(a != b))
        shares.append(discordant)
        figures.append(power.mcnemar_detectable(n, discordant, level, both_correct=float(np.mean(a & b))))
        without.append(power.mcnemar_detectable(n, discordant, level))
    detectable, before = float(np.mean(figures)), float(np.mean(without))

    def found(size: float, stream: int) -> int:
        moved = _logit_shift(p, -size)
        draws = np.random.default_rng([seed, stream])
        hits = 0
        for _ in range(sims):
            idx = draws.integers(0, len(p), n)
            x, y = draws.random(n) < p[idx], draws.random(n) < moved[idx]
            hits += basics.mcnemar_exact(*basics.discordant_counts(x, y)) < level
        return hits

    return [f"| McNemar (accuracy {accuracy:g}), {n} pairs, level {level:.4g}, observed discordant "
            f"{min(shares):.3f}-{max(shares):.3f} | {detectable:.4f} (five null studies: {min(figures):.4f}-"
            f"{max(figures):.4f}) | {_rate(found(detectable, 1), sims)} | {before:.4f} (exact power at the observed "
            f"discordance): {_rate(found(before, 2), sims)} |"]


def detectable_part(sims: int) -> list[str]:
    """Each detectable effect compare reports against the simulated power at it (should be 0.8)."""
    lines = ["| detectable effect | compare reports | simulated power at it | without the alternative's spread: "
             "figure, power |", "|---|---:|---|---|"]
    checks: list[Callable[[], list[str]]] = [
        lambda: shift_detectable_check(40, 3, 4, sims, 3), lambda: shift_detectable_check(100, 3, 1, sims, 5),
        lambda: shift_detectable_check(30, 5, 8, sims, 7), lambda: mcnemar_detectable_check(200, 0.6, sims, 4),
        lambda: mcnemar_detectable_check(60, 0.7, sims, 6, family=4),
        lambda: mcnemar_detectable_check(500, 0.8, sims, 8)]
    for check in checks:
        lines += check()
        print(lines[-1], flush=True)
    return lines


def _term_fit(grid: Grid, flat: bool, n: int, reps: int, planted: str, size: float, seed: int) -> pd.DataFrame:
    """The GEE table compare writes (:func:`prism.compare.noise.gee_table`) on one simulated run of ``grid``.

    ``flat``: the cells are a plain condition set (no grid axes), so the fit has the one ``condition`` term.
    """
    from prism.compare.noise import gee_table

    return gee_table([_term_cells(grid, flat, n, reps, planted, size, seed)], next(iter(grid.cells)))


def _term_cells(grid: Grid, flat: bool, n: int, reps: int, planted: str, size: float, seed: int) -> ModelCells:
    from dataclasses import replace

    from prism.plan.simulate import grid_cells

    cells = grid_cells(grid, n, reps, planted, size, seed)
    return replace(cells, axis="prism", grid=(), levels={}, families={}) if flat else cells


NULL_FITS = 20  # null fits per GEE check whose figures are averaged (the first five are the first version's)


def _term_directions(grid: Grid, flat: bool, term: str, column: str | None, n: int, reps: int,
                     seed: int) -> dict[str, float | str]:
    """``term``'s figures on one null run of ``grid``.

    The table's ``detectable_effect`` and method, the drop and rise it comes from
    (:attr:`prism.stats.gee.GeeResult.effects`; the CSV holds only the figure), the first version's figure on
    the same fit (:func:`prism.stats.power.wald_detectable` of the very covariance block the test used, the
    information taken as fitted), and the drop and rise of the design column ``column`` (the coefficient a
    study plants in; None: none, NaN) rather than of the least precise coefficient.
    """
    from prism.compare.noise import consistency_responses, grid_axes
    from prism.stats import gee, gee_design

    models = [_term_cells(grid, flat, n, reps, "", 0.0, seed)]
    baseline = next(iter(grid.cells))
    axes = grid_axes(models)
    outcomes, notes = gee.consistency_outcomes(consistency_responses(models, baseline, axes), baseline, axes)
    factors = ["model", *axes, "dataset"] if axes else ["model", "condition", "dataset"]
    _, terms, _, names = gee_design.sparse_design(outcomes, factors, 2 if axes else 3)
    position = [names[k] for k in terms[term]].index(column) if column is not None else None
    recorded: list[tuple[float, tuple[float, float]]] = []
    real = power.wald_detectable_directions
    # The fit calls the name gee imported; it is swapped there for the recording one (Any: mypy sees no export).
    patched: Any = gee

    def record(cov: np.ndarray, clusters: int, precision: Callable[[int, float], float]) -> tuple[float, float]:
        own = real(cov, clusters, precision, coefficient=position) if position is not None else (math.nan, math.nan)
        recorded.append((power.wald_detectable(cov, clusters), own))
        return real(cov, clusters, precision)

    patched.wald_detectable_directions = record
    try:
        effects = gee.fit_consistency_gee(outcomes, notes, axes).effects
    finally:
        patched.wald_detectable_directions = real
    at = int(np.flatnonzero(effects["effect"] == term)[0])
    row = effects.iloc[at]
    table = _term_fit(grid, flat, n, reps, "", 0.0, seed)
    figure = float(table.loc[table["effect"] == term, "detectable_effect"].iloc[0])
    # The same fit as the CSV's (to the root-find's tolerance: the two fits' last digits may differ).
    assert abs(figure - float(row["detectable_effect"])) < 1e-4 or (
        math.isnan(figure) and math.isnan(row["detectable_effect"])), (figure, row["detectable_effect"])
    first, (own_drop, own_rise) = recorded[at]
    return {"figure": figure, "method": str(row["detectable_method"]), "drop": float(row["detectable_drop"]),
            "rise": float(row["detectable_rise"]), "first": first, "own_drop": own_drop, "own_rise": own_rise}


def gee_detectable_check(name: str, grid: Grid, flat: bool, term: str, planted: str, column: str | None, n: int,
                         reps: int, sims: int, seed: int) -> list[str]:
    """The GEE term's detectable effect (null fits) against the power of that effect planted in one cell.

    The planted cell moves exactly one coefficient of the term (treatment coding: a condition's own coefficient,
    or one cell's interaction coefficient), the case ``detectable_effect`` is computed for; the effect is
    planted downwards (less often the baseline's answer, as a prompt that disturbs the model would) and upwards.
    Three figures, each the mean over :data:`NULL_FITS` null fits: the first version's (the information as
    fitted), the reported one (the least precise coefficient, the larger of its drop and rise: the harder
    direction should be found about 80% of the time, the easier more often, unless the least precise
    coefficient is not the planted one, which makes the figure conservative for it), and the planted
    coefficient's own drop and rise (each about 80%; ``column`` None when the planted cell moves more than one
    coefficient, as a grid cell at an axis's reference level does). A null fit whose least precise coefficient
    has no rise reaching 80% power reports its drop (the method says so); the reported figures planted are the
    means over the fits with both directions.
    """
    fits = [_term_directions(grid, flat, term, column, n, reps, seed * 1000 + k) for k in range(NULL_FITS)]
    both = [f for f in fits if math.isfinite(float(f["drop"])) and math.isfinite(float(f["rise"]))]
    first = [float(f["first"]) for f in fits]
    figures = [float(f["figure"]) for f in both]
    if not figures:
        return [f"| {name}: no null fit with a detectable drop and rise |"]
    detectable = float(np.mean(figures))
    drop, rise = float(np.mean([f["drop"] for f in both])), float(np.mean([f["rise"] for f in both]))
    own = [f for f in fits if math.isfinite(float(f["own_drop"])) and math.isfinite(float(f["own_rise"]))]
    one_way = sum(f not in both for f in fits)
    no_own = len(fits) - len(own)

    def found(size: float) -> str:
        hits = 0
        for i in range(sims):
            table = _term_fit(grid, flat, n, reps, planted, size, seed * 1000 + 500 + i)
            row = table[table["effect"] == term]
            hits += bool(len(row) and row["p"].iloc[0] < 0.05)
        return _rate(hits, sims)

    first_mean = float(np.mean(first))
    if own:
        own_drop, own_rise = float(np.mean([f["own_drop"] for f in own])), float(np.mean([f["own_rise"] for f in own]))
        mine = (f"drop {own_drop:.3f}: {found(-own_drop)}; rise {own_rise:.3f}: {found(own_rise)}"
                + (f" ({no_own} of {len(fits)} without a rise)" if no_own else ""))
    else:
        mine = "none: the planted cell moves more than one coefficient"
    return [f"| {name}: term `{term}`, planted in `{planted}` (logit {grid.logits[planted]:g}), n={n}, R={reps} | "
            f"{first_mean:.3f} ({min(first):.3f}-{max(first):.3f}): {found(-first_mean)}, {found(first_mean)} | "
            f"{detectable:.3f} ({min(figures):.3f}-{max(figures):.3f}; drop {drop:.3f}, rise {rise:.3f}; "
            f"{one_way} of {len(fits)} a drop only) | {found(-detectable)} | {found(detectable)} | {mine} |"]


def gee_part(sims: int) -> list[str]:
    """The GEE terms' detectable effect against the simulated power at it (should be about 0.8)."""
    from prism.plan.simulate import stated_grid

    names = ("P0", "C1", "C2", "C3", "C4")
    flat = Grid(("prism",), {c: (c,) for c in names}, dict.fromkeys(names, 1.2), 0.5, 4)
    # Every cell near the ceiling (0.86 at the average question), so the term is null and a rise the hard way.
    ceiling = Grid(("prism",), {c: (c,) for c in names}, dict.fromkeys(names, 2.0), 0.5, 4)
    lines = ["| GEE term | first version's figure (logits; mean and range of the null fits): power at minus it, at "
             "plus it | compare reports now: the larger of the least precise coefficient's drop and rise | "
             "simulated power at minus it (5%, Hotelling) | at plus it | the planted coefficient's own figures: "
             "power at them |", "|---|---|---|---|---|---|"]
    checks: list[Callable[[], list[str]]] = [
        lambda: gee_detectable_check("5 conditions", flat, True, "condition", "C2", "condition=C2", 40, 3, sims, 21),
        # a1.v1__a2.v1 is at a2's reference level (v1, the first non-baseline value seen), so it moves a1=v1 and
        # two interaction coefficients; a1.v1__a2.v2 has one interaction column of its own.
        lambda: gee_detectable_check("3 x 3 grid", stated_grid([3, 3], 0.77, 0.5, 4), False, "a1:a2", "a1.v1__a2.v1",
                                     None, 40, 3, sims, 22),
        lambda: gee_detectable_check("3 x 3 grid", stated_grid([3, 3], 0.77, 0.5, 4), False, "a1:a2", "a1.v1__a2.v2",
                                     "a1=v1:a2=v2", 40, 3, sims, 22),
        # At 40 questions no rise of a cell at 0.86 reaches 80% power in most null fits: 100 questions.
        lambda: gee_detectable_check("5 conditions near the ceiling", ceiling, True, "condition", "C2",
                                     "condition=C2", 100, 3, sims, 23)]
    for check in checks:
        lines += check()
        print(lines[-1], flush=True)
    return lines


def rank_check(gaps: Sequence[float], studies: int, n: int, resamples: int, seed: int) -> list[str]:
    """Reported P(a above b) against the share of replicate studies in which a ranks above b."""
    conditions = ("P0", "P1", "P2", "P3", "P4")
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0, 1.0, 5000)
    prompt_a = rng.normal(0, 0.3, len(conditions))  # each model's own prompt effects (logits), fixed
    prompt_b = rng.normal(0, 0.3, len(conditions))
    lines = ["| planted gap (logits) | mean reported P(a > b) | share of replicate studies with a above b | "
             "difference |", "|---:|---:|---:|---:|"]

    def study(gap: float, s: int) -> tuple[ModelCells, ModelCells, bool]:
        g = np.random.default_rng(s)
        idx = g.integers(0, len(difficulty), n)
        frames, truth = [], []
        for label, shift, effects in (("a", gap, prompt_a), ("b", 0.0, prompt_b)):
            eta = 0.3 + shift + difficulty[idx][:, None] + effects[None, :]
            correct = g.random(eta.shape) < 1 / (1 + np.exp(-eta))
            rows = pd.DataFrame({"question_id": np.repeat([f"q{i}" for i in range(n)], len(conditions)),
                                 "condition": np.tile(conditions, n), "repetition": 0,
                                 "correct": correct.ravel(), "category": "A", "correct_answer": "A"})
            frames.append(ModelCells(label, f"run-{label}", conditions, rows, model=label, axis="prism",
                                     dataset="d", question_set="qs"))
            truth.append(correct)
        # The replicate's own ranking at a prompt drawn at random, as a leaderboard would show it.
        c = g.integers(0, len(conditions))
        a_above = truth[0][:, c].mean() > truth[1][:, c].mean() or (
            truth[0][:, c].mean() == truth[1][:, c].mean() and g.random() < 0.5)
        return frames[0], frames[1], bool(a_above)

    for gap in gaps:
        reported, above = [], 0
        for s in range(studies):
            a, b, a_above = study(gap, seed * 7919 + s)
            table = rank_robustness_table([a, b], resamples=resamples, seed=s)
            row = table.iloc[0]
            p = float(row["prob_a_above_b"]) if row["model_a"] == "a" else 1 - float(row["prob_a_above_b"])
            reported.append(p)
            above += a_above
        mean = float(np.mean(reported))
        lines.append(f"| {gap:+g} | {mean:.3f} | {above / studies:.3f} ({above}/{studies}) | "
                     f"{mean - above / studies:+.3f} |")
        print(lines[-1], flush=True)
    return lines


def calibration_part(sims: int, quick: bool, skip_ranking: bool = False) -> list[str]:
    """The plan's recommended n, the null rate, detectable effects and the ranking's calibration."""
    cfg = PlanConfig(pilot=False, n=[25, 50, 100, 200, 400], repetitions=[3], simulations=sims,
                     permutations=1000, seed=0)
    cfg.rates.conditions = 5
    cfg.effect.size = 0.06
    started = time.perf_counter()
    result = make_plan(cfg)
    best = result.refined[3]
    lines = [f"**Plan for a shift of 0.06 (stated rates: accuracy 0.6, spread 0.5, 4 options, 5 conditions so a "
             f"Holm family of 4, level {result.level:.4f}), 3 repetitions, {sims} studies per point** "
             f"({time.perf_counter() - started:.0f} s):", "",
             "| n | simulated power [95% Wilson] |", "|---:|---|",
             *[f"| {int(r['n'])} | {_rate(int(r['rejected']), int(r['simulations']))} |"
               for r in result.table.to_dict("records")], "",
             f"Recommended: n = {best} (first tried n reaching 0.8: {result.recommended[3]}).", ""]
    print("\n".join(lines), flush=True)
    population = stated_population(0.6, 0.5, 4, [f"C{i}" for i in range(5)], seed=0)
    fresh = 2 * sims

    def at(n: int, size: float) -> int:
        return sum(shift_study(population, n, 3, size, result.level, 1000, 50_000 + i) for i in range(fresh))

    if best is not None:
        lines += ["| check | n | rejected (fresh seeds) |", "|---|---:|---|",
                  f"| planted 0.06 at the recommended n | {best} | {_rate(at(best, 0.06), fresh)} |",
                  f"| planted 0.06 at half of it | {best // 2} | {_rate(at(best // 2, 0.06), fresh)} |",
                  f"| no effect (null) at the recommended n, level {result.level:.4f} | {best} | "
                  f"{_rate(at(best, 0.0), fresh)} |", ""]
        print("\n".join(lines[-6:]), flush=True)
    null_mcnemar = 0
    rng = np.random.default_rng(5)
    for _ in range(fresh):
        p = rng.uniform(0.2, 0.9, 60)
        x, y = rng.random(60) < p, rng.random(60) < p
        null_mcnemar += basics.mcnemar_exact(*basics.discordant_counts(x, y)) < 0.05
    lines += [f"Null McNemar (60 pairs, question accuracies uniform on [0.2, 0.9]): rejected "
              f"{_rate(null_mcnemar, fresh)} at 0.05 (the exact test is conservative).", "",
              ""]
    lines += [*detectable_part(fresh), ""]
    if skip_ranking:
        return lines
    lines += ["", "**Ranking calibration, 50 questions** (question noise comparable to the prompt effects):", ""]
    lines += rank_check((0.0, 0.1, 0.2, 0.4), 40 if quick else 200, 50, 500, 11)
    lines += ["", "**Ranking calibration, 400 questions** (the prompt effects dominate):", ""]
    lines += rank_check((0.0, 0.1, 0.2, 0.4), 20 if quick else 100, 400, 500, 12)
    return lines


def run(ctx: Context) -> Section:
    """Both parts, for ``python -m benchmarks --only plan``."""
    sims = 20 if ctx.quick else 200
    body = ["**5 x 5 grid, single-cell interaction of -1.5 logits**", "",
            *grid_part((30, 60) if ctx.quick else (30, 50, 70), 6 if ctx.quick else 120, -1.5), "",
            *calibration_part(sims, ctx.quick)]
    return Section("Power planning (issue 40)", "python -m benchmarks --only plan", body)


def main() -> None:
    """Print one part's Markdown."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("grid", "pilot-grid", "calibration", "detectable", "gee"), required=True)
    parser.add_argument("--sims", type=int, default=200)
    parser.add_argument("--n", default="30,50,70")
    parser.add_argument("--effect", type=float, default=-1.5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--skip-ranking", action="store_true", help="calibration without the ranking checks")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.part == "grid":
        lines = grid_part([int(v) for v in args.n.split(",")], args.sims, args.effect)
    elif args.part == "detectable":
        lines = detectable_part(args.sims)
    elif args.part == "gee":
        lines = gee_part(args.sims)
    elif args.part == "pilot-grid":
        lines = pilot_grid_part([int(v) for v in args.n.split(",")], args.sims, args.effect)
    else:
        lines = calibration_part(args.sims, args.quick, args.skip_ranking)
    print("\n".join(lines))
    print(f"\n_(took {time.perf_counter() - started:.0f} s)_")


if __name__ == "__main__":
    main()


