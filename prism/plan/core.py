"""``plan(cfg)``: how many questions and repetitions a design needs, by simulation, logged to MLflow.

pilot (MLflow runs, read as compare reads them) or stated rates -> population -> for each repetitions and
``dataset.n`` tried, ``simulations`` seeded studies with the effect planted, each tested as compare tests it
(:mod:`prism.plan.simulate`) -> the power table, the smallest n reaching the target, a plot -> an MLflow run
tagged ``prism.kind=plan``. No model is asked: the pilot's answers are reused, never requested again.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from prism.config import PlanConfig
from prism.errors import PrismError
from prism.names import FINISHED, KIND_PLAN, PLAN_ARTIFACT_DIR, TAG_KIND, TAG_PLAN_EFFECT, TAG_PLAN_PILOT_RUNS
from prism.plan.simulate import (
    PLAN_EFFECTS,
    Grid,
    Population,
    accuracy_study,
    grid_from_cells,
    interaction_study,
    population_from_cells,
    shift_study,
    stated_grid,
    stated_population,
)

if TYPE_CHECKING:
    from prism.compare.tables import ModelCells

# MLflow names of a plan run (tags, params, metrics, artifacts).
TABLE_FILE = "power.csv"
PLOT_FILE = "power.png"
SUMMARY_FILE = "plan.json"
POWER_METRIC = "power/r{reps}/n{n}"
RECOMMENDED_METRIC = "recommended_n/r{reps}"

POWER_COLUMNS = ("repetitions", "n", "power", "ci_low", "ci_high", "rejected", "simulations", "effect", "size",
                 "level", "reaches_target")


class PlanError(PrismError):
    """A plan that cannot be made as asked (the message says what to change)."""


@dataclass
class PlanResult:
    """What a plan found.

    Attributes:
        table: Columns :data:`POWER_COLUMNS`, one row per (repetitions, n).
        recommended: Repetitions -> the smallest n reaching the target power (None: none tried did).
        refined: Repetitions -> the smallest n reaching it, searched between the tried values (None as above).
        level: The level each test was rejected at (alpha / Holm family).
        source: ``pilot`` or ``stated``, and the pilot's run ids.
        run_id: The plan's MLflow run (empty when not logged).
        files: The files written.
    """

    table: pd.DataFrame
    recommended: dict[int, int | None]
    refined: dict[int, int | None]
    level: float
    source: str
    pilot_runs: tuple[str, ...] = ()
    run_id: str = ""
    files: tuple[Path, ...] = ()


def check(cfg: PlanConfig) -> None:
    """Refuse a plan whose settings cannot work, naming each and how to fix it."""
    effect = cfg.effect
    if effect.kind not in PLAN_EFFECTS:
        raise PlanError(f"effect.kind must be one of {', '.join(PLAN_EFFECTS)}, got {effect.kind!r}")
    if not cfg.n or any(int(n) < 2 for n in cfg.n):
        raise PlanError(f"n must list question counts of 2 or more (dataset.n values to try), got {list(cfg.n)}")
    if not cfg.repetitions or any(int(r) < 1 for r in cfg.repetitions):
        raise PlanError(f"repetitions must list counts of 1 or more, got {list(cfg.repetitions)}")
    if effect.kind == "shift" and any(int(r) < 2 for r in cfg.repetitions):
        raise PlanError("a shift is tested against the model's own repetition noise, which takes at least 2 "
                        f"repetitions; got repetitions={list(cfg.repetitions)}")
    if not 0 < cfg.power < 1 or not 0 < cfg.alpha < 1:
        raise PlanError(f"power and alpha must be in (0, 1), got power={cfg.power}, alpha={cfg.alpha}")
    if cfg.simulations < 10:
        raise PlanError(f"simulations must be at least 10 (200 gives power to about 3 points), got {cfg.simulations}")
    if cfg.holm_family is not None and cfg.holm_family < 1:
        raise PlanError(f"holm_family must be 1 or more, or null for the design's conditions; got {cfg.holm_family}")
    rates = cfg.rates
    if not 0 < rates.accuracy < 1 or rates.spread < 0 or rates.options < 2 or rates.conditions < 2:
        raise PlanError("rates need 0 < accuracy < 1, spread >= 0, options >= 2 and conditions >= 2; got "
                        f"{asdict(rates)}")
    if effect.kind == "interaction" and (len(rates.grid) < 2 or min(rates.grid) < 2):
        raise PlanError(f"rates.grid lists a grid's axes by their number of values, two axes or more of 2 values "
                        f"or more, e.g. [5,5]; got {list(rates.grid)}")


def wilson(rejected: int, total: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a simulated power (95%)."""
    if total == 0:
        return math.nan, math.nan
    p = rejected / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return max(0.0, centre - half), min(1.0, centre + half)


Study = Callable[[int, int, int], bool]  # (n, repetitions, seed) -> rejected


def study_seed(seed: int, n: int, reps: int, index: int) -> int:
    """The seed of one simulated study: a hash of all four, so no two design points share a study's numbers.

    (Seeds made by adding offsets overlapped between nearby n, so a bisection's probes reused one lucky block of
    studies and stopped too early.)
    """
    import numpy as np

    return int(np.random.SeedSequence([seed, n, reps, index]).generate_state(1)[0])


def power_at(study: Study, n: int, reps: int, simulations: int, seed: int) -> int:
    """How many of ``simulations`` seeded studies at (n, reps) reject."""
    return sum(study(n, reps, study_seed(seed, n, reps, i)) for i in range(simulations))


def power_table(study: Study, ns: Sequence[int], repetitions: Sequence[int], simulations: int, seed: int,
                target: float, effect: str, size: float, level: float) -> pd.DataFrame:
    """Simulated power at every (repetitions, n), with its Wilson interval."""
    rows = []
    for reps in repetitions:
        for n in sorted(set(ns)):
            rejected = power_at(study, n, reps, simulations, seed)
            low, high = wilson(rejected, simulations)
            rows.append({"repetitions": reps, "n": n, "power": rejected / simulations, "ci_low": low,
                         "ci_high": high, "rejected": rejected, "simulations": simulations, "effect": effect,
                         "size": size, "level": level, "reaches_target": rejected / simulations >= target})
    return pd.DataFrame(rows, columns=list(POWER_COLUMNS))


def smallest_n(table: pd.DataFrame, reps: int) -> int | None:
    """The smallest tried n whose simulated power reaches the target, for these repetitions."""
    hits = table[(table["repetitions"] == reps) & table["reaches_target"]]
    return int(hits["n"].min()) if len(hits) else None


def refine(study: Study, table: pd.DataFrame, reps: int, simulations: int, seed: int, target: float) -> int | None:
    """The smallest n reaching the target between the largest tried n below it and the first above (bisection).

    Power is taken as rising with n; each probe is ``simulations`` fresh seeded studies.
    """
    first = smallest_n(table, reps)
    if first is None:
        return None
    below = table[(table["repetitions"] == reps) & (table["n"] < first)]
    low = int(below["n"].max()) if len(below) else 1
    high = first
    while high - low > max(1, high // 50):
        mid = (low + high) // 2
        if power_at(study, mid, reps, simulations, seed + 7) / simulations >= target:
            high = mid
        else:
            low = mid
    return high


def study_for(cfg: PlanConfig, population: Population | None, grid: Grid | None, level: float) -> Study:
    """The simulated study of the configured effect."""
    effect = cfg.effect
    if effect.kind == "shift":
        assert population is not None
        pop = population

        def shift(n: int, reps: int, seed: int) -> bool:
            return shift_study(pop, n, reps, effect.size, level, cfg.permutations, seed)

        return shift
    if effect.kind == "accuracy":
        assert population is not None
        pop = population
        # The pilot's population holds the baseline and the effect's condition; stated rates, every condition.
        where = pop.conditions.index(effect.condition) if effect.condition in pop.conditions else 1

        def accuracy(n: int, reps: int, seed: int) -> bool:
            return accuracy_study(pop, where, n, reps, effect.size, level, seed)

        return accuracy
    assert grid is not None
    cells = list(grid.cells)
    planted = effect.condition or cells[-1]
    if planted not in grid.cells or planted == cells[0]:
        raise PlanError(f"effect.condition must name a non-baseline cell of the grid, e.g. {cells[-1]}; got "
                        f"{planted!r}")
    chosen = grid

    def interaction(n: int, reps: int, seed: int) -> bool:
        return interaction_study(chosen, n, reps, planted, effect.size, level, seed)

    return interaction


def design_from(cfg: PlanConfig, pilot: Sequence[ModelCells]) -> tuple[Population | None, Grid | None, int]:
    """The population (or grid) the studies draw from, and the default Holm family size."""
    effect, rates = cfg.effect, cfg.rates
    if effect.kind == "interaction":
        if pilot:  # the pilot's own questions, with its cells' main effects and interactions
            try:
                return None, grid_from_cells(pilot[0], cfg.baseline), 1
            except ValueError as err:
                raise PlanError(str(err)) from err
        return None, stated_grid(rates.grid, rates.accuracy, rates.spread, rates.options), 1
    if pilot:
        run = pilot[0]
        if cfg.baseline not in run.conditions:
            raise PlanError(f"the baseline {cfg.baseline!r} is not among the pilot run {run.run_id}'s conditions "
                            f"{list(run.conditions)}; set baseline=NAME")
        others = [c for c in run.conditions if c != cfg.baseline]
        target = effect.condition or (others[0] if others else "")
        if target not in run.conditions or target == cfg.baseline:
            raise PlanError(f"effect.condition must name one of the pilot's conditions other than the baseline "
                            f"({', '.join(others)}); got {effect.condition!r}")
        conditions = [cfg.baseline, target]
        if not run.cells["correct_answer"].notna().any() and effect.kind == "accuracy":
            raise PlanError(f"the pilot run {run.run_id} has no answer key, so no accuracy to differ")
        return population_from_cells(run, conditions), None, len(others)
    names = [f"C{i}" for i in range(rates.conditions)]
    if effect.condition and effect.condition not in names[1:]:
        raise PlanError(f"with stated rates the conditions are {', '.join(names)} (rates.conditions, {names[0]} the "
                        f"baseline); effect.condition={effect.condition!r} is not one of the others")
    population = stated_population(rates.accuracy, rates.spread, rates.options, names, seed=cfg.seed)
    return population, None, rates.conditions - 1


def make_plan(cfg: PlanConfig, pilot: Sequence[ModelCells] = ()) -> PlanResult:
    """The power table and the smallest n, from a pilot's cells or the stated rates (pure: no MLflow)."""
    check(cfg)
    population, grid, family = design_from(cfg, pilot)
    # The shift's Holm family is the model's steps, as compare corrects them; two models under one condition
    # and a grid's interaction term are one test each, unless holm_family says otherwise.
    m = cfg.holm_family if cfg.holm_family is not None else (family if cfg.effect.kind == "shift" else 1)
    level = cfg.alpha / max(1, m)
    if cfg.effect.kind == "shift" and 1 / (cfg.permutations + 1) >= level:
        raise PlanError(f"with {cfg.permutations} permutations the smallest p is {1 / (cfg.permutations + 1):.4f}, "
                        f"not below the level {level:.4f} (alpha / Holm family {m}); raise permutations")
    study = study_for(cfg, population, grid, level)
    table = power_table(study, [int(n) for n in cfg.n], [int(r) for r in cfg.repetitions], cfg.simulations, cfg.seed,
                        cfg.power, cfg.effect.kind, cfg.effect.size, level)
    recommended = {int(r): smallest_n(table, int(r)) for r in cfg.repetitions}
    refined = {int(r): refine(study, table, int(r), cfg.simulations, cfg.seed, cfg.power) for r in cfg.repetitions}
    return PlanResult(table, recommended, refined, level, "pilot" if pilot else "stated",
                      tuple(m_.run_id for m_ in pilot))


def write_plot(table: pd.DataFrame, target: float, path: Path) -> Path:
    """Power against n, one line per repetitions, the target as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for reps, rows in table.groupby("repetitions", sort=True):
        ax.errorbar(rows["n"], rows["power"], yerr=[rows["power"] - rows["ci_low"], rows["ci_high"] - rows["power"]],
                    marker="o", capsize=3, label=f"{reps} repetition(s)")
    ax.axhline(target, linestyle="--", color="grey", label=f"target {target:g}")
    ax.set_xlabel("questions (dataset.n)")
    ax.set_ylabel("simulated power")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"{table['effect'].iloc[0]} of {table['size'].iloc[0]:g} at level {table['level'].iloc[0]:.3g}")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_outputs(result: PlanResult, cfg: PlanConfig, out: Path) -> list[Path]:
    """power.csv, power.png and plan.json in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    table_path = out / TABLE_FILE
    result.table.to_csv(table_path, index=False, float_format="%.10g")
    summary = {"effect": asdict(cfg.effect), "power": cfg.power, "alpha": cfg.alpha, "level": result.level,
               "source": result.source, "pilot_runs": list(result.pilot_runs),
               "rates": asdict(cfg.rates) if result.source == "stated" else None,
               "recommended_n": {str(k): v for k, v in result.recommended.items()},
               "refined_n": {str(k): v for k, v in result.refined.items()},
               "simulations": cfg.simulations, "seed": cfg.seed}
    summary_path = out / SUMMARY_FILE
    summary_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return [table_path, write_plot(result.table, cfg.power, out / PLOT_FILE), summary_path]


def load_pilot(cfg: PlanConfig, uri: str) -> list[ModelCells]:
    """The pilot runs' cells, selected and read exactly as compare selects and reads them."""
    import mlflow

    from prism.compare.core import _experiment_id, load_models, select, selection_from_config
    from prism.config import CompareConfig

    selection = selection_from_config(CompareConfig(tracking=cfg.tracking, runs=list(cfg.runs), filters=cfg.filters))
    client = mlflow.tracking.MlflowClient(uri)
    experiment = cfg.tracking.experiment
    runs = select(client, _experiment_id(client, experiment, uri), experiment, uri, selection)
    return load_models(runs, uri)


def plan(cfg: PlanConfig, output_dir: str | Path | None = None) -> PlanResult:
    """Make the plan and log it as an MLflow run tagged ``prism.kind=plan``.

    Raises:
        PlanError: If a setting cannot work.
        CompareError: If the pilot runs cannot be selected or read.
        TrackingError: If the tracking store cannot be used.
    """
    import mlflow

    from prism.run.tracking import MlflowTracker, resolve_tracking_uri

    check(cfg)
    uri = resolve_tracking_uri(cfg.tracking.uri, cfg.tracking.require_server) or mlflow.get_tracking_uri()
    pilot = load_pilot(cfg, uri) if cfg.pilot else []
    result = make_plan(cfg, pilot)
    out = Path(output_dir or cfg.output_dir or tempfile.mkdtemp(prefix="prism-plan-"))
    files = write_outputs(result, cfg, out / PLAN_ARTIFACT_DIR)
    tracker = MlflowTracker(uri, cfg.tracking.experiment)
    result.run_id = tracker.start(f"plan-{cfg.effect.kind}-{cfg.effect.size:g}",
                                  {TAG_KIND: KIND_PLAN, TAG_PLAN_PILOT_RUNS: ",".join(result.pilot_runs),
                                   TAG_PLAN_EFFECT: f"{cfg.effect.kind}:{cfg.effect.size:g}"})
    try:
        tracker.log_params({"effect.kind": cfg.effect.kind, "effect.size": str(cfg.effect.size),
                            "effect.condition": cfg.effect.condition, "power": str(cfg.power),
                            "alpha": str(cfg.alpha), "level": f"{result.level:.6g}", "source": result.source,
                            "n": ",".join(map(str, cfg.n)), "repetitions": ",".join(map(str, cfg.repetitions)),
                            "simulations": str(cfg.simulations), "permutations": str(cfg.permutations),
                            "seed": str(cfg.seed), "baseline": cfg.baseline})
        metrics = {POWER_METRIC.format(reps=int(r["repetitions"]), n=int(r["n"])): float(r["power"])
                   for r in result.table.to_dict("records")}
        metrics.update({RECOMMENDED_METRIC.format(reps=k): float(v) for k, v in result.refined.items()
                        if v is not None})
        tracker.log_metrics(metrics)
        for path in files:
            tracker.log_artifact(path, PLAN_ARTIFACT_DIR)
    except BaseException:
        tracker.end("FAILED")
        raise
    tracker.end(FINISHED)
    result.files = tuple(files)
    return result


def format_plan(result: PlanResult, cfg: PlanConfig) -> str:
    """What the terminal shows: the power table, the smallest n per repetitions, where it was logged."""
    from prism.compare.terminal import render

    shown = pd.DataFrame({
        "repetitions": result.table["repetitions"], "n": result.table["n"],
        "power [95% CI]": [f"{p:.3f} [{lo:.3f}, {hi:.3f}]" for p, lo, hi in
                           zip(result.table["power"], result.table["ci_low"], result.table["ci_high"], strict=True)],
        "rejected": [f"{r}/{s}" for r, s in zip(result.table["rejected"], result.table["simulations"], strict=True)],
    })
    source = (f"pilot run(s) {', '.join(result.pilot_runs)}" if result.source == "pilot" else "stated rates")
    lines = [f"Plan for a {cfg.effect.kind} of {cfg.effect.size:g} ({source}); each test at level {result.level:.4g}, "
             f"{cfg.simulations} simulated studies per point:", render(shown)]
    for reps, n in result.refined.items():
        first = result.recommended[reps]
        found = (f"power {cfg.power:g} first reached at n={first} of those tried; smallest n reaching it: about {n}"
                 if n is not None else f"power {cfg.power:g} not reached by n={max(cfg.n)}: try larger n")
        lines.append(f"  {reps} repetition(s): {found}")
    if result.run_id:
        lines.append(f"Plan run {result.run_id} (prism.kind=plan); files in {result.files[0].parent}")
    return "\n".join(lines)
