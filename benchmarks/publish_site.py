"""Publish at scale: ``python -m prism.publish`` over 50 models x 3 datasets x 2 condition sets (300 runs).

A team publishing an experiment's results must not find the site build slowing down faster than the
number of runs. The store holds 300 runs of 50 synthetic models (:func:`benchmarks.compare_scale.replay_records`:
seeded accuracy, per-condition flips, the answer forms small models write) on ARC-Challenge (test), SciQ
(test) and ARC-Challenge's validation split (the site shows a split other than test as a dataset of its
own), each under the default condition set (``prism``, 5 conditions) and ``robustness`` (21 conditions,
every perturbation family).

Setup (reported apart, not timed): the first model's 6 runs are made by ``python -m prism`` with the replay
backend (two multiruns). A run through the whole pipeline costs tens of seconds on a loaded 2-core machine,
so the other 294 are logged from those 6: the same params and tags (model name and replay path changed),
the same ``config/``, ``questions/`` and ``prompts/`` artifacts, and ``results/`` written by PRISM's own
parser, scorer and metrics (:func:`prism.results.summary.score_all`,
:func:`prism.results.summary.write_results`) from each model's synthetic answers. They lack ``responses/``,
which the site does not read.

Then the real command, each build in its own child process, over the runs of the first 12, 25 and 50
models (72, 150 and 300 runs; ``filters.models``): wall time, peak resident memory, pages and bytes
written, and how the time grows (``t = a + b*runs`` through the smallest and largest size; the middle one
checks it).
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from benchmarks.common import Context, Section, run_timed
from benchmarks.compare_scale import replay_records
from benchmarks.prompts import condition_names

COMMAND = "python -m benchmarks --only publish"
SEED = 0
# (dataset config, split): three question sets; arc_challenge's validation split is a dataset of its own.
DATASETS = (("arc_challenge", "test"), ("sciq", "test"), ("arc_challenge", "validation"))
CONDITION_SETS = ("prism", "robustness")


def _template_runs(ctx: Context, work: Path, n_questions: int) -> tuple[list[str], float, Path]:
    """The first model's runs, one per dataset x condition set, made by ``python -m prism`` (replay)."""
    from prism.questions import freeze_question_set

    models_dir = work / "conf" / "model"
    models_dir.mkdir(parents=True, exist_ok=True)
    for dataset, split in DATASETS:
        frozen = freeze_question_set(dataset, split, n_questions, SEED, ctx.data_dir, work / "frozen")
        for conditions in CONDITION_SETS:
            records = replay_records(1, list(frozen.questions), condition_names(conditions))
            path = work / "replay" / f"m01-{dataset}-{split}-{conditions}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    replay = str(work / "replay" / "m01") + "-${dataset.name}-${dataset.split}-${conditions.name}.jsonl"
    # A lab's own model file names its backend's schema first, as prism/conf/model/*.yaml do.
    spec = {"defaults": ["/schema/model/replay@_here_", "_self_"], "name": "m01", "backend": "replay", "path": replay}
    (models_dir / "m01.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    db = work / "mlflow.db"
    seconds, run_ids = 0.0, []
    for index, (datasets, split) in enumerate((("arc_challenge,sciq", "test"), ("arc_challenge", "validation"))):
        done = run_timed(
            [sys.executable, "-m", "prism", "-m", f"hydra.searchpath=[file://{work / 'conf'}]", "model=m01",
             f"dataset={datasets}", f"dataset.split={split}", f"conditions={','.join(CONDITION_SETS)}",
             f"dataset.n={n_questions}", f"seed={SEED}", f"dataset.data_dir={ctx.data_dir}",
             f"dataset.cache_dir={work / 'frozen'}", "store.enabled=false", f"store.path={work / 'store.sqlite'}",
             f"tracking.uri=sqlite:///{db}", f"hydra.sweep.dir={work / f'sweep-{index}'}"],
            env={"PRISM_DATA_DIR": str(ctx.data_dir)}, cwd=work,
        )
        seconds += done.seconds
        run_ids += re.findall(r"^MLflow run ([0-9a-f]{32}) ", done.stdout, flags=re.MULTILINE)
    if len(run_ids) != len(DATASETS) * len(CONDITION_SETS):
        raise SystemExit(f"expected {len(DATASETS) * len(CONDITION_SETS)} template runs, found {len(run_ids)}")
    return run_ids, seconds, db


def _clone(client: Any, template: Any, model: int, work: Path, data_dir: Path) -> None:
    """Log model ``model``'s run of the template's dataset and condition set, scored by PRISM's own code."""
    import tempfile

    from mlflow.entities import Metric, Param, RunTag

    from prism.conditions import condition_set_from_config
    from prism.questions import freeze_question_set
    from prism.records import RawRecord
    from prism.results.summary import score_all, write_results

    params, tags = dict(template.data.params), dict(template.data.tags)
    output = Path(tags["prism.output_dir"])
    cfg = yaml.safe_load((output / "config" / "resolved.yaml").read_text(encoding="utf-8"))
    condition_set = condition_set_from_config(cfg["conditions"])
    frozen = freeze_question_set(params["dataset.name"], params["dataset.split"], int(params["dataset.n"]), SEED,
                                 data_dir, work / "frozen")
    name = f"m{model:02d}"
    # The template's raw records as the pipeline wrote them, each with this model's answer instead.
    asked = {}
    with (output / "responses" / "responses.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            record = RawRecord.from_json(json.loads(line))
            asked[(record.question_id, record.condition, record.repetition)] = record
    raw = [dataclasses.replace(asked[(str(r["question_id"]), str(r["condition"]), 0)], response=str(r["response"]),
                               model=name)
           for r in replay_records(model, list(frozen.questions), list(condition_set.names))]
    with tempfile.TemporaryDirectory(prefix="prism-bench-clone-") as tmp:
        metrics = write_results(Path(tmp), score_all(raw, frozen, condition_set), frozen, condition_set, 1)
        params.update({"model.name": name, "model.path": f"{name}-{params['dataset.name']}.jsonl"})
        tags.update({"mlflow.runName": f"{name}-{params['dataset.name']}", "prism.output_dir": str(Path(tmp))})
        made = client.create_run(template.info.experiment_id, tags=tags)
        run_id = made.info.run_id
        items = [Param(k, v) for k, v in params.items()]
        for start in range(0, len(items), 100):
            client.log_batch(run_id, params=items[start:start + 100])
        finite = [Metric(k, float(v), 0, 0) for k, v in metrics.items() if v == v]  # NaN: not logged, as PRISM
        for start in range(0, len(finite), 500):
            client.log_batch(run_id, metrics=finite[start:start + 500])
        client.log_batch(run_id, tags=[RunTag("prism.cloned_from", template.info.run_id)])
        for sub in ("config", "questions", "prompts"):
            client.log_artifacts(run_id, str(output / sub), sub)
        client.log_artifacts(run_id, str(Path(tmp) / "results"), "results")
    client.set_terminated(run_id, "FINISHED")


def make_runs(ctx: Context, n_models: int, n_questions: int) -> tuple[int, float, float, Path]:
    """The 6 template runs, then the other models' runs logged from them.

    Returns:
        The number of runs, the seconds the template runs took, the seconds the rest took, and the store.
    """
    import time

    import mlflow

    work = ctx.workdir / "publish_site"
    template_ids, template_s, db = _template_runs(ctx, work, n_questions)
    client = mlflow.tracking.MlflowClient(f"sqlite:///{db}")
    templates = [client.get_run(run_id) for run_id in template_ids]
    started = time.perf_counter()
    for model in range(2, n_models + 1):
        for template in templates:
            _clone(client, template, model, work, ctx.data_dir)
    return len(templates) * n_models, template_s, time.perf_counter() - started, db


def publish_command(models: list[str], db: Path, out: Path) -> list[str]:
    """The measured command: ``python -m prism.publish`` over these models' runs, defaults otherwise."""
    return [sys.executable, "-m", "prism.publish", f"tracking.uri=sqlite:///{db}",
            f"filters.models=[{','.join(models)}]", f"publish.out={out}",
            f"hydra.run.dir={out.parent / (out.name + '-hydra')}"]


def _memory(timed: dict[int, Any], per_model: int) -> str:
    """What the peak memory did across the sizes, in words that fit the numbers."""
    peaks = [t.max_rss_mib for t in timed.values()]
    sizes = [k * per_model for k in timed]
    if max(peaks) <= 1.1 * min(peaks):
        return (f"Peak memory stays at {min(peaks):.0f}-{max(peaks):.0f} MiB from {sizes[0]} to {sizes[-1]} runs: "
                "the runs' records are small beside the interpreter with MLflow, pandas and Jinja2 loaded.")
    return (f"Peak memory grows from {peaks[0]:.0f} to {peaks[-1]:.0f} MiB ({sizes[0]} to {sizes[-1]} runs): every "
            "run's scored records and question metrics are held at once, since the leaderboard is drawn from all.")


def _size(site: Path) -> tuple[int, float]:
    files = [p for p in site.rglob("*") if p.is_file()]
    return sum(1 for p in files if p.suffix == ".html"), sum(p.stat().st_size for p in files) / 2**20


def run(ctx: Context) -> Section:
    """Make the runs, then time ``prism.publish`` over the runs of the first k models for each k."""
    sizes, n_questions = ((2, 3, 4), 5) if ctx.quick else ((12, 25, 50), 10)
    per_model = len(DATASETS) * len(CONDITION_SETS)
    n_runs, template_s, clone_s, db = make_runs(ctx, max(sizes), n_questions)
    work = db.parent
    names = [f"m{i:02d}" for i in range(1, max(sizes) + 1)]
    # One small build first, untimed: the interpreter, pandas, MLflow and Jinja2 are read from disk once.
    run_timed(publish_command(names[:1], db, work / "site-warmup"), cwd=work)
    timed = {k: run_timed(publish_command(names[:k], db, work / f"site-{k}"), cwd=work) for k in sizes}

    small, mid, large = sizes
    per_run = (timed[large].seconds - timed[small].seconds) / ((large - small) * per_model)
    fixed = timed[small].seconds - per_run * small * per_model
    predicted_mid = fixed + per_run * mid * per_model
    figures: dict[str, float] = {"template_runs_s": template_s, "logged_runs_s": clone_s, "n_runs": float(n_runs),
                                 "n_questions": float(n_questions), "fixed_s": fixed, "per_run_s": per_run,
                                 "ratio_large_mid": timed[large].seconds / timed[mid].seconds,
                                 "mid_predicted_s": predicted_mid}
    rows = ["| models | runs | wall s | s per run | peak RSS MiB | pages | site MiB |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for k, t in timed.items():
        pages, mib = _size(work / f"site-{k}")
        runs = k * per_model
        rows.append(f"| {k} | {runs} | {t.seconds:.1f} | {t.seconds / runs:.3f} | {t.max_rss_mib:.0f} | {pages} | "
                    f"{mib:.1f} |")
        figures.update({f"wall_s_{runs}": t.seconds, f"peak_rss_mib_{runs}": t.max_rss_mib,
                        f"pages_{runs}": float(pages), f"site_mib_{runs}": mib})
    body = [
        f"{n_runs} replay runs ({max(sizes)} models x {len(DATASETS)} datasets x {len(CONDITION_SETS)} condition "
        f"sets, {n_questions} questions each; prism has 5 conditions, robustness 21): the first model's 6 by "
        f"`python -m prism` in {template_s:.0f} s, the other {n_runs - 6} logged from them with PRISM's scoring in "
        f"{clone_s:.0f} s (setup, not timed below); then `python -m prism.publish` with its "
        "defaults (2000 bootstrap resamples per interval) over the runs of the first k models, each build in its "
        "own process.",
        "",
        *rows,
        "",
        f"Through the smallest and largest builds, t = a + b*runs with a = {fixed:.1f} s once (start-up, MLflow, "
        f"the search) and b = {per_run:.3f} s per run (four artifact downloads, eight bootstrap intervals, a run "
        f"page, a row on every pre-rendered sort page); it predicts {predicted_mid:.1f} s for {mid * per_model} "
        f"runs, measured {timed[mid].seconds:.1f} s. t({large * per_model})/t({mid * per_model}) = "
        f"{figures['ratio_large_mid']:.2f} for {large / mid:.1f} times the runs. " + _memory(timed, per_model)
        + " The machine is shared (2 cores, other work running): read ratios, not absolute seconds.",
    ]
    return Section("7. Publish at scale", COMMAND, body, figures)
