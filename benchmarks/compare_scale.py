"""Compare at scale: ``python -m prism.compare`` over 5, 10 and 20 runs of 1,000 questions x 5 conditions.

A comparison reads every run's scored records back through MLflow and builds its tables;
a team comparing many models must not find it slowing down faster than the number of runs. This measures
the wall time and peak resident memory of the real command, each in its own child process, over the first
5, 10 and 20 of 20 runs of one frozen ARC-Challenge question set, and reports how they grow.

Setup (not timed, reported apart): 20 synthetic models answer the same 1,000 questions under P0-P4 from
replay files (:mod:`prism.backends.replay`). Each model has its own seeded accuracy and per-condition flip
rate, questions share a difficulty (so models agree more on easy questions), and answers come in the forms
models write (``B``, ``The answer is C.``, ``C. <option text>``, ``(D)``, a refusal) so the parser has real
work. The 20 runs are made by one Hydra multirun of ``python -m prism`` over 20 model configs (one process,
not 20 start-ups; the configs sit on a Hydra search path in the scratch directory), store off, into a
SQLite tracking store there.

By default a comparison pairs every run with one reference run (``pairs=reference``), so every table
grows linearly with the runs, and the differences table lists at most 200 cells per pair
(``differences.max_per_pair``). The report fits ``t = a + b*k`` through the three sizes (least squares) and
gives t(20)/t(10). ``--only compare`` also times the largest size with ``pairs=all
differences.max_per_pair=null`` (today's all-pairs, uncapped tables) in the same run, for the ratio.

Profiled first (py-spy, 4 runs x 1,000 questions): the pairwise tables spent two thirds of their time
drawing bootstrap weights that are the same for every pair (same seed, same questions), and a fifth building
Cohen's kappa's table with ``pandas.crosstab``; the sensitivity table spent most of its time in the full
``gc.collect()`` that statsmodels' Holm correction runs on every call. ``prism.stats.basics`` now keeps the weights,
counts with ``numpy.bincount`` and computes Holm with statsmodels' own operations; every table is byte for
byte what it was. Then (py-spy, 5 runs): the shifts table's two-level bootstrap visited every question of
every step in a Python loop even when a question has one response per condition and nothing to redraw;
those questions are now resampled in one matrix product (``prism.stats.shifts._bootstrap``), byte-identical.
"""

from __future__ import annotations

import json
import math
import random
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from benchmarks.common import REPO, Context, Section, run_timed
from prism.types import Question

COMMAND = "python -m benchmarks --only compare"
DATASET = "arc_challenge"
SEED = 0


def condition_names() -> list[str]:
    """The condition names of the ``prism`` condition set (P0-P4), read from its config."""
    spec = yaml.safe_load((REPO / "prism" / "conf" / "conditions" / "prism.yaml").read_text(encoding="utf-8"))
    return [str(c["name"]) for c in spec["conditions"]]


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def replay_records(model: int, questions: Sequence[Question], conditions: Sequence[str]) -> list[dict[str, object]]:
    """One synthetic model's answers: seeded accuracy, per-condition flips, varied answer forms.

    Args:
        model: The model's index; it seeds everything, so the same index always answers the same way.
        questions: The frozen questions (the same for every model).
        conditions: Condition names; the first is the baseline, which never flips.

    Returns:
        One replay record per (question, condition), repetition 0.
    """
    rng = random.Random(f"compare-scale-model-{model}")
    skill = _logit(rng.uniform(0.35, 0.85))
    flip = {c: (0.0 if i == 0 else rng.uniform(0.03, 0.25)) for i, c in enumerate(conditions)}
    refuse = rng.uniform(0.0, 0.04)
    records: list[dict[str, object]] = []
    for q in questions:
        if q.answer is None:  # a survey item: nothing to be right or wrong about
            raise ValueError(f"question {q.question_id!r} has no answer key; this benchmark needs keyed questions")
        difficulty = random.Random(f"compare-scale-question-{q.question_id}").gauss(0.0, 1.2)
        answer = q.answer
        assert answer is not None, "ARC-Challenge questions all have an answer key"
        wrong = [label for label in q.labels if label != answer]
        base = answer if rng.random() < _sigmoid(skill - difficulty) else rng.choice(wrong)
        for condition in conditions:
            label = rng.choice(q.labels) if rng.random() < flip[condition] else base
            records.append({"question_id": q.question_id, "condition": condition, "repetition": 0,
                            "response": _phrase(rng, label, q.labels, q.options, refuse)})
    return records


def _phrase(rng: random.Random, label: str, labels: tuple[str, ...], options: tuple[str, ...],
            refuse: float) -> str:
    """The answer ``label`` written the way small models write it (sometimes no answer at all)."""
    if rng.random() < refuse:
        return rng.choice(["I cannot determine the answer from the information given.",
                           "All of the options seem plausible."])
    text = options[labels.index(label)]
    form = rng.random()
    if form < 0.35:
        return label
    if form < 0.6:
        return f"The answer is {label}."
    if form < 0.8:
        return f"{label}. {text}"
    if form < 0.9:
        return f"({label})"
    return f"Answer: {label}\n\nExplanation: {text} is the option that fits the question best."


def make_runs(ctx: Context, n_runs: int, n_questions: int) -> tuple[list[str], float, Path]:
    """Write the replay files and model configs, and make the runs in one multirun process.

    Returns:
        The run ids in model order, the seconds the multirun took, and the tracking URI's database path.
    """
    from prism.questions import freeze_question_set

    work = ctx.workdir / "compare_scale"
    models_dir = work / "conf" / "model"
    models_dir.mkdir(parents=True, exist_ok=True)
    frozen = freeze_question_set(DATASET, "test", n_questions, SEED, ctx.data_dir, work / "frozen")
    conditions = condition_names()
    names = [f"m{i:02d}" for i in range(1, n_runs + 1)]
    for index, name in enumerate(names, start=1):
        replay = work / "replay" / f"{name}.jsonl"
        replay.parent.mkdir(parents=True, exist_ok=True)
        lines = (json.dumps(r) for r in replay_records(index, list(frozen.questions), conditions))
        replay.write_text("\n".join(lines) + "\n", encoding="utf-8")
        (models_dir / f"{name}.yaml").write_text(
            yaml.safe_dump({"defaults": ["/schema/model/replay@_here_", "_self_"], "name": name, "backend": "replay",
                            "path": str(replay)}), encoding="utf-8")
    db = work / "mlflow.db"
    made = run_timed(
        [sys.executable, "-m", "prism", "-m", f"hydra.searchpath=[file://{work / 'conf'}]",
         f"model={','.join(names)}", f"dataset={DATASET}", f"dataset.n={n_questions}", f"seed={SEED}",
         f"dataset.data_dir={ctx.data_dir}", f"dataset.cache_dir={work / 'frozen'}", "store.enabled=false",
         f"store.path={work / 'store.sqlite'}", f"tracking.uri=sqlite:///{db}", f"hydra.sweep.dir={work / 'sweep'}"],
        env={"PRISM_DATA_DIR": str(ctx.data_dir)}, cwd=work,
    )
    run_ids = re.findall(r"^MLflow run ([0-9a-f]{32}) ", made.stdout, flags=re.MULTILINE)
    if len(run_ids) != n_runs:
        raise SystemExit(f"expected {n_runs} runs from the multirun, found {len(run_ids)}:\n{made.stdout[-3000:]}")
    return run_ids, made.seconds, db


# Today's tables before the reference pairing: every pair of runs, every differing cell listed.
ALL_PAIRS = ("pairs=all", "differences.max_per_pair=null")


def compare_command(run_ids: list[str], db: Path, out: Path, extra: Sequence[str] = ()) -> list[str]:
    """The measured command: ``python -m prism.compare`` over exactly these runs, defaults otherwise."""
    return [sys.executable, "-m", "prism.compare", f"runs=[{','.join(run_ids)}]", f"tracking.uri=sqlite:///{db}",
            f"output_dir={out}", f"hydra.run.dir={out}", *extra]


def growth(sizes: Sequence[int], seconds: Sequence[float]) -> tuple[float, float]:
    """Split wall times into a fixed and a per-run cost: the least-squares line t = a + b*k through the sizes.

    Returns:
        (a, b): seconds once, and per run.
    """
    import numpy as np

    matrix = np.array([[1.0, k] for k in sizes])
    (fixed, per_run), *_ = np.linalg.lstsq(matrix, np.asarray(seconds, dtype=float), rcond=None)
    return float(fixed), float(per_run)


def run(ctx: Context) -> Section:
    """Make the runs, then time ``prism.compare`` over the first k of them for each k."""
    sizes, n_questions = ((2, 3, 4), 50) if ctx.quick else ((5, 10, 20), 1000)
    conditions = condition_names()
    run_ids, setup_s, db = make_runs(ctx, max(sizes), n_questions)
    work = db.parent
    # One small comparison first, untimed: the interpreter, pandas, scipy and MLflow are read from disk once,
    # so the first timed size does not pay for a cold page cache.
    run_timed(compare_command(run_ids[:2], db, work / "compare-warmup"), cwd=work)
    timed = {k: run_timed(compare_command(run_ids[:k], db, work / f"compare-{k}"), cwd=work) for k in sizes}
    small, mid, large = sizes
    every = run_timed(compare_command(run_ids[:large], db, work / f"compare-{large}-all", ALL_PAIRS), cwd=work)

    fixed, per_run = growth(sizes, [timed[k].seconds for k in sizes])
    figures: dict[str, float] = {
        "setup_s": setup_s, "n_questions": float(n_questions),
        "ratio_mid_small": timed[mid].seconds / timed[small].seconds,
        "ratio_large_mid": timed[large].seconds / timed[mid].seconds,
        "cpu_ratio_large_mid": timed[large].cpu_seconds / max(timed[mid].cpu_seconds, 1e-9),
        "fixed_s": fixed, "per_run_s": per_run,
        "all_pairs_wall_s": every.seconds, "all_pairs_peak_rss_mib": every.max_rss_mib,
    }

    def row(k: int, pairs: int, t: Any, out: str, label: str) -> str:
        differences = (work / out / "comparison" / "differences.csv").stat().st_size / 2**20
        return (f"| {k} | {label} | {pairs} | {k * n_questions * len(conditions):,} | {t.seconds:.1f} | "
                f"{t.seconds / k:.2f} | {t.cpu_seconds:.1f} | {t.max_rss_mib:.0f} | {differences:.1f} |")

    rows = ["| runs | pairs | pairs made | cells compared | wall s | s per run | CPU s | peak RSS MiB "
            "| differences.csv MiB |",
            "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for k, t in timed.items():
        rows.append(row(k, k - 1, t, f"compare-{k}", "reference (default)"))
        figures[f"wall_s_{k}"] = t.seconds
        figures[f"peak_rss_mib_{k}"] = t.max_rss_mib
        figures[f"cpu_s_{k}"] = t.cpu_seconds  # barely moves with the load, where the wall time does
    rows.append(row(large, large * (large - 1) // 2, every, f"compare-{large}-all", "all, uncapped"))
    body = [
        f"{large} replay runs of {n_questions:,} ARC-Challenge questions x {len(conditions)} conditions (P0-P4), "
        f"made by one multirun of `python -m prism` in {setup_s:.0f} s (setup, not timed below); then "
        "`python -m prism.compare runs=[...]` with its defaults (each run against the first, at most 200 listed "
        "differences per pair, 2000 bootstrap resamples, 2000 permutations, the answer measure) over the first k "
        f"runs, each in its own process, and once over all {large} with `{' '.join(ALL_PAIRS)}` (every pair, "
        "every differing cell listed: the tables before the reference pairing).",
        "",
        *rows,
        "",
        f"**t({mid})/t({small}) = {figures['ratio_mid_small']:.2f}, t({large})/t({mid}) = "
        f"{figures['ratio_large_mid']:.2f}** (proportional to the runs: {mid / small:.1f} and {large / mid:.1f}; "
        f"in CPU seconds, which the load moves less, t({large})/t({mid}) = {figures['cpu_ratio_large_mid']:.2f}); "
        f"the line t = a + b*k through the three sizes: a = {fixed:.1f} s once (start-up, MLflow, plots), "
        f"b = {per_run:.2f} s per run. All pairs at {large} runs: {every.seconds:.1f} s, "
        f"{every.seconds / timed[large].seconds:.2f}x the default.",
    ]
    return Section("5. Compare at scale", COMMAND, body, figures)
