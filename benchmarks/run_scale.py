"""A run at scale: replay runs of 10k, 100k and 1,002,204 cells, their reruns, and a run killed and resumed.

A run must not hold its cells' records in memory: the peak should stay flat as the cells grow, and the
time per cell constant. Each size is ``python -m prism`` with the replay backend over ARC-Challenge
questions x the 21 conditions of the ``robustness`` set x repetitions (1,164 x 21 x 41 = 1,002,204 at the
largest), from a fresh completion store, then the identical command again (every cell from the store).
Wall time, cells per second and peak RSS come from :func:`benchmarks.common.run_timed`.

Checks, at every size: the run and its rerun give the same results tables and the same scored records
byte for byte apart from ``cached`` (false when asked, true from the store), except that cells whose
conditions render the same prompt share one stored completion, so the rerun gives them its ``timestamp``
and ``latency_s`` (:func:`compare_records` counts them and accepts no other difference). At the largest size a
third run on a new store is killed with SIGKILL once the store holds half of the cells, and the same
command resumed: the resume must ask for exactly the cells the store did not hold (so at most the cells in
flight at the kill are asked twice: one, for the replay backend's single request in flight), every record
the killed run logged must be in the store (store first, then log), and the resumed run's scored records
must equal the first run's apart from ``cached``, ``timestamp`` and ``latency_s`` (when and how fast each
cell was answered).

Everything runs with ``store.sync_interval_s=1`` (fsync at most a second after a completion; see
``prism/run/store.py``): at the default (an fsync per completion, two per cell) a busy disk's fsync, several
milliseconds here, is the whole cost of a replayed cell; the smallest size is also run at the default to
show it. The free disk is checked before each size (the run writes about 8 KB a cell: records, store, the
MLflow artifacts, twice), and each size's files are removed once it is measured.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import Context, Section, Timed, run_timed
from prism.conditions import ConditionSet
from prism.types import Question

COMMAND = "python -m benchmarks --only run_scale"
DATASET = "arc_challenge"
CONDITIONS = "robustness"
SEED = 0
SYNC = "store.sync_interval_s=1"
# Disk a cell takes across a run and its rerun (responses, store, scored records, MLflow's copies), with room.
BYTES_PER_CELL = 8_000
# Fields of a scored record that say how and when a cell was answered, not what the answer was.
WHEN_FIELDS = ("cached", "timestamp", "latency_s")
# The largest first size also run at the default store.sync_interval_s=0 (two fsyncs a cell).
DEFAULT_SYNC_MAX_CELLS = 20_000


def sizes(quick: bool) -> list[tuple[int, int]]:
    """(questions, repetitions) per size: about 10k, 100k and 1M cells with the 21 robustness conditions.

    ``PRISM_RUN_SCALE_SIZES=1164x41`` (comma-separated ``QUESTIONSxREPETITIONS``) measures other sizes, e.g.
    only the largest on a machine where the whole benchmark takes too long; the last size is killed and
    resumed.

    Raises:
        SystemExit: If the variable is not of that form.
    """
    chosen = os.environ.get("PRISM_RUN_SCALE_SIZES")
    if chosen:
        try:
            return [(int(q), int(r)) for q, r in (size.split("x") for size in chosen.split(","))]
        except ValueError:
            raise SystemExit(f"PRISM_RUN_SCALE_SIZES={chosen!r}: give sizes as QUESTIONSxREPETITIONS separated by "
                             "commas, e.g. 476x1,1164x41") from None
    if quick:
        return [(20, 1), (40, 2)]
    return [(476, 1), (1164, 4), (1164, 41)]


def condition_set() -> ConditionSet:
    """The robustness condition set, as a run composes it."""
    from hydra import compose, initialize_config_dir

    from prism.conditions import condition_set_from_config
    from prism.conf import register_configs
    from prism.config import PrismConfig, to_schema

    register_configs()
    conf = Path(__file__).resolve().parent.parent / "prism" / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = to_schema(compose("config", [f"conditions={CONDITIONS}"]), PrismConfig)
    return condition_set_from_config(cfg.conditions)


def write_replay(path: Path, questions: Sequence[Question], conditions: ConditionSet, repetitions: int) -> int:
    """A synthetic model's answers to every cell, in the forms models write them; returns the cells.

    The answer is drawn from the prompt's text and the repetition, as a model's would be: two conditions
    that render a question identically (a shuffle that leaves the order as it was) get the same answer. The
    store is keyed by the prompt, so a file that answered such cells differently would give the rerun the
    first one's answer for both.
    """
    from prism.conditions import render_all

    prompts = render_all(questions, conditions)
    n = 0
    with path.open("w", encoding="utf-8") as handle:
        for repetition in range(repetitions):
            for prompt in prompts:
                rng = random.Random(f"{prompt.sha256}:{repetition}")
                label = rng.choice(prompt.displayed_labels)
                text = rng.choice([label, f"The answer is {label}.", f"({label})", f"Answer: {label}",
                                   "I cannot tell from the options given."])
                handle.write(json.dumps({"question_id": prompt.question_id, "condition": prompt.condition,
                                         "repetition": repetition, "response": text}) + "\n")
                n += 1
    return n


@dataclass(frozen=True)
class Setup:
    """One size's runs: where they work, the replay file, the data directory, questions and repetitions."""

    work: Path
    replay: Path
    data_dir: Path
    n: int
    repetitions: int


def _prism(setup: Setup, store: Path, name: str, *extra: str) -> list[str]:
    work, replay, data_dir, n, repetitions = setup.work, setup.replay, setup.data_dir, setup.n, setup.repetitions
    return [sys.executable, "-m", "prism", "model=replay", f"model.path={replay}", "model.name=scale",
            f"dataset={DATASET}", f"dataset.data_dir={data_dir}", f"dataset.n={n}", f"seed={SEED}",
            f"conditions={CONDITIONS}",
            f"generation.repetitions={repetitions}", f"dataset.cache_dir={work / 'frozen'}",
            f"store.path={store}", f"tracking.uri=sqlite:///{work / 'mlflow.db'}",
            f"hydra.run.dir={work / 'runs' / name}", *extra]


def _counts(stdout: str) -> tuple[int, int]:
    found = re.search(r"(\d+) responses from the store, (\d+) new", stdout)
    if found is None:
        raise SystemExit(f"the run did not say how many cells it reused:\n{stdout[-1500:]}")
    return int(found.group(1)), int(found.group(2))


def _lines(path: Path, drop: Sequence[str] = ()) -> Iterator[bytes]:
    """The file's lines; with ``drop`` = ``("cached",)`` that flag set to false, else the fields removed."""
    with path.open("rb") as handle:
        for line in handle:
            if tuple(drop) == ("cached",):  # a byte comparison: only the flag is rewritten
                yield line.replace(b'"cached": true', b'"cached": false')
                continue
            if not drop:
                yield line
                continue
            record = json.loads(line)
            for name in drop:
                record.pop(name, None)
            yield json.dumps(record, ensure_ascii=False, sort_keys=True).encode()


def compare_records(a: Path, b: Path, drop: Sequence[str]) -> tuple[int, int, int]:
    """Compare two scored files line by line, apart from the fields in ``drop``.

    The store keys a completion by its prompt, so two cells whose conditions render the same prompt (a
    shuffle that leaves the order as it was) share one stored completion: the rerun gives both the
    ``timestamp`` and ``latency_s`` of the one asked first. Such lines are counted apart.

    Returns:
        (lines identical as bytes once ``drop`` is removed, lines of a shared prompt that differ only in
        ``timestamp``/``latency_s``, other differing or missing lines).
    """
    shared = _shared_prompts(a)
    identical = timing = other = 0
    for x, y in zip(_lines(a, drop), _lines(b, drop), strict=False):
        if x == y:
            identical += 1
            continue
        left, right = json.loads(x), json.loads(y)
        fields = {k for k in set(left) | set(right) if left.get(k) != right.get(k)}
        if fields <= {"timestamp", "latency_s"} and left["prompt_sha256"] in shared:
            timing += 1
        else:
            other += 1
    return identical, timing, other + abs(_count_lines(a) - _count_lines(b))


def _shared_prompts(path: Path) -> set[str]:
    """The prompt hashes that more than one cell of a repetition has."""
    from collections import Counter

    counts = Counter(record["prompt_sha256"] for record in map(json.loads, _lines(path)) if record["repetition"] == 0)
    return {prompt for prompt, count in counts.items() if count > 1}


def same_records(a: Path, b: Path, drop: Sequence[str]) -> bool:
    """Whether :func:`compare_records` finds no line that differs in more than a shared prompt's timing."""
    return compare_records(a, b, drop)[2] == 0


def _count_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


def same_tables(a: Path, b: Path) -> bool:
    """Whether two runs' results tables (every CSV) are byte-identical."""
    names = sorted(p.name for p in a.glob("*.csv"))
    return names == sorted(p.name for p in b.glob("*.csv")) and all(
        (a / name).read_bytes() == (b / name).read_bytes() for name in names)


def _stored(store: Path) -> int:
    """Completions in the store (a row can serve several cells: those whose conditions render one prompt)."""
    try:
        db = sqlite3.connect(store, timeout=5)
    except sqlite3.Error:  # not created yet
        return 0
    try:
        (count,) = db.execute("SELECT count(*) FROM completions").fetchone()
        return int(count)
    except sqlite3.Error:  # no table yet
        return 0
    finally:
        db.close()


def _stored_keys(store: Path) -> set[str]:
    db = sqlite3.connect(store)
    try:
        return {key for (key,) in db.execute("SELECT key FROM completions")}
    finally:
        db.close()


def _key(record: dict[str, object]) -> str:
    from prism.run.store import store_key

    generation = record["generation"]
    assert isinstance(generation, dict)
    return store_key(str(record["backend"]), str(record["model_digest"]), str(record["prompt_sha256"]), generation,
                     int(str(record["repetition"])))


def kill_and_resume(setup: Setup, cells: int, first: Path) -> dict[str, float]:
    """Kill a fresh run (SIGKILL) once half of its cells are stored, resume it, and check what it asked.

    Raises:
        SystemExit: If the resume asked for other cells than the store lacked, lost a logged record, or its
            scored records differ from the uninterrupted run's.
    """
    from prism.run.store import read_jsonl

    work = setup.work
    store = work / "kill-store.sqlite"
    args = _prism(setup, store, "killed", SYNC)
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work,
                             start_new_session=True)
    while child.poll() is None and _stored(store) < cells // 2:
        time.sleep(0.2)
    if child.poll() is not None:
        raise SystemExit("the run to be killed finished before half of its cells were stored")
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    keys = _stored_keys(store)
    # Cells the store now serves: every cell of the uninterrupted run whose key is stored.
    stored = sum(_key(record) in keys for record in read_jsonl(first / "responses" / "responses.jsonl"))
    logged = unlogged = 0
    for record in read_jsonl(work / "runs" / "killed" / "responses" / "responses.jsonl"):
        logged += 1
        unlogged += _key(record) not in keys
    resumed = run_timed(_prism(setup, store, "resumed", SYNC), cwd=work)
    reused, asked = _counts(resumed.stdout)
    if unlogged or reused != stored or asked != cells - stored:
        raise SystemExit(f"resume after a kill: {stored} cells stored, {logged} logged ({unlogged} of them not "
                         f"stored), the resume reused {reused} and asked {asked} of {cells}")
    if not same_records(first / "results" / "scored.jsonl", work / "runs" / "resumed" / "results" / "scored.jsonl",
                        WHEN_FIELDS):
        raise SystemExit("the resumed run's scored records differ from the uninterrupted run's")
    return {"kill_stored": stored, "kill_logged": logged, "resume_asked": asked, "resume_s": resumed.seconds,
            "resume_peak_rss_mib": resumed.max_rss_mib}


def _progress(text: str) -> None:
    """Each figure as soon as it is measured (stderr), so a long benchmark cut short still leaves its numbers."""
    print(f"[run_scale {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def check_disk(work: Path, cells: int) -> None:
    """Refuse to start a size the free disk cannot hold.

    Raises:
        SystemExit: Naming the free and the needed space.
    """
    free = shutil.disk_usage(work).free
    need = cells * BYTES_PER_CELL
    if free < need:
        raise SystemExit(f"{work} has {free / 2**30:.1f} GiB free; the {cells:,}-cell runs need about "
                         f"{need / 2**30:.1f} GiB. Free disk space or pass --keep DIR on a larger disk.")


def measure(ctx: Context, n: int, repetitions: int, conditions: ConditionSet, kill: bool,
            default_sync: bool) -> dict[str, float]:
    """One size: the run, its rerun, the checks, and optionally the kill and resume; then its files removed."""
    from prism.questions import freeze_question_set

    work = ctx.workdir / f"run_scale-{n}x{repetitions}"
    work.mkdir(parents=True, exist_ok=True)
    try:
        frozen = freeze_question_set(DATASET, "test", n, SEED, ctx.data_dir, work / "frozen")
        check_disk(work, len(frozen.questions) * len(conditions.names) * repetitions * (2 if kill else 1))
        replay = work / "replay.jsonl"
        cells = write_replay(replay, list(frozen.questions), conditions, repetitions)
        setup = Setup(work, replay, ctx.data_dir, n, repetitions)
        figures: dict[str, float] = {"cells": cells}
        runs: dict[str, Timed] = {}
        if default_sync:  # the same run with an fsync per completion (the default), on its own store
            runs["default"] = run_timed(_prism(setup, work / "default.sqlite", "default"),
                                        cwd=work)
        runs["first"] = run_timed(_prism(setup, work / "store.sqlite", "first", SYNC),
                                  cwd=work)
        runs["rerun"] = run_timed(_prism(setup, work / "store.sqlite", "rerun", SYNC),
                                  cwd=work)
        for name, timed in runs.items():
            _progress(f"{cells:,} cells, {name}: {timed.seconds:.1f} s wall, {timed.cpu_seconds:.1f} s CPU, "
                      f"peak {timed.max_rss_mib:.0f} MiB")
            reused, asked = _counts(timed.stdout)
            if (reused, asked) != ((cells, 0) if name == "rerun" else (0, cells)):
                raise SystemExit(f"{name}: {reused} cells from the store and {asked} asked, of {cells}")
            figures.update({f"{name}_s": timed.seconds, f"{name}_cpu_s": timed.cpu_seconds,
                            f"{name}_cells_per_s": cells / timed.seconds, f"{name}_peak_rss_mib": timed.max_rss_mib})
        first, rerun = work / "runs" / "first", work / "runs" / "rerun"
        same, timing, other = compare_records(first / "results" / "scored.jsonl", rerun / "results" / "scored.jsonl",
                                              ("cached",))
        tables = same_tables(first / "results", rerun / "results")
        if other or not tables:
            raise SystemExit(f"the rerun of {cells} cells differs from the run ({other} records differ; tables "
                             f"identical: {tables})")
        figures.update({"rerun_identical": same, "rerun_shared_prompt_timing": timing})
        figures["scored_mib"] = (first / "results" / "scored.jsonl").stat().st_size / 2**20
        figures["responses_mib"] = (first / "responses" / "responses.jsonl").stat().st_size / 2**20
        if kill:
            figures.update(kill_and_resume(setup, cells, first))
            _progress(f"{cells:,} cells, kill and resume: {figures}")
        return figures
    finally:  # a size's files are gigabytes at the largest: removed even with --keep
        shutil.rmtree(work, ignore_errors=True)


def run(ctx: Context) -> Section:
    """Measure every size, smallest first, and report how time and memory grow."""
    conditions = condition_set()
    chosen = sizes(ctx.quick)
    results = []
    for i, (n, repetitions) in enumerate(chosen):
        # The default fsync per completion only at a small first size: at 1M cells it would take hours.
        at_default = i == 0 and n * repetitions * len(conditions.names) <= DEFAULT_SYNC_MAX_CELLS
        results.append(measure(ctx, n, repetitions, conditions, kill=i == len(chosen) - 1, default_sync=at_default))
    rows = ["| cells | run s | cells/s | peak RSS MiB | rerun s | rerun cells/s | rerun peak MiB | run CPU s | "
            "rerun CPU s | responses MiB | scored MiB |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    figures: dict[str, float] = {}
    for f in results:
        cells = int(f["cells"])
        rows.append(f"| {cells:,} | {f['first_s']:.1f} | {f['first_cells_per_s']:,.0f} | "
                    f"{f['first_peak_rss_mib']:.0f} | {f['rerun_s']:.1f} | {f['rerun_cells_per_s']:,.0f} | "
                    f"{f['rerun_peak_rss_mib']:.0f} | {f['first_cpu_s']:.1f} | {f['rerun_cpu_s']:.1f} | "
                    f"{f['responses_mib']:.0f} | "
                    f"{f['scored_mib']:.0f} |")
        figures.update({f"{k}_{cells}": v for k, v in f.items()})
    small, large = results[0], results[-1]
    spread = large["cells"] - small["cells"]
    growth = (large["first_peak_rss_mib"] - small["first_peak_rss_mib"]) / spread * 2**20 if spread else float("nan")
    body = [
        f"`python -m prism model=replay conditions={CONDITIONS} generation.repetitions=R {SYNC}` over "
        f"ARC-Challenge x {len(conditions.names)} conditions x R repetitions, fresh store, then the identical command "
        "(every cell from the store). Each run and its rerun: the same results tables byte for byte, and the "
        "same scored records byte for byte apart from `cached`, except that cells whose conditions render the "
        "same prompt share one stored completion and so its `timestamp` and `latency_s` "
        f"({int(large['rerun_shared_prompt_timing']):,} of {int(large['cells']):,} records at the largest size; "
        "no other field of any record differs).",
        "",
        *rows,
        "",
        f"Peak RSS grows by {growth:,.0f} bytes per cell from {int(small['cells']):,} to {int(large['cells']):,} "
        "cells (run).",
        f"At the default `store.sync_interval_s=0` (an fsync per completion, two per cell), the "
        f"{int(small['cells']):,}-cell run took {small['default_s']:.1f} s ({small['default_cells_per_s']:,.0f} "
        f"cells/s, CPU {small['default_cpu_s']:.1f} s) against {small['first_s']:.1f} s with `{SYNC}`."
        if "default_s" in small else "",
        f"Killed (SIGKILL) with {int(large['kill_stored']):,} of {int(large['cells']):,} cells in the store "
        f"({int(large['kill_logged']):,} logged, every one of them stored; a cell whose prompt another cell "
        "already stored is served by that completion); the resume asked for "
        f"{int(large['resume_asked']):,}, exactly the cells the store lacked, in {large['resume_s']:.1f} s "
        f"(peak {large['resume_peak_rss_mib']:.0f} MiB), and its scored records equal the uninterrupted run's "
        "apart from `cached`, `timestamp` and `latency_s`.",
    ]
    return Section("12. A run at scale", COMMAND, body, figures)
