"""Compare at the floor (issue 38): before and after side by side in one run, over 20, 40 and 100 runs.

``python -m benchmarks.compare_floor setup --runs 100 --work DIR`` makes the runs once (section 5's synthetic
replay models, :func:`benchmarks.compare_scale.make_runs`, 1,000 ARC-Challenge questions x P0-P4, logged by
this checkout's code, so each run has ``results/cells.parquet`` beside ``scored.jsonl``).

``python -m benchmarks.compare_floor measure --work DIR --before SRC --sizes 20,40,100`` then times, for each
size k, in this order and each in its own process: the floor (``python -c "import mlflow, pandas"`` and a
bare ``json.loads`` of the k runs' ``scored.jsonl`` lines), ``python -m prism.compare`` with the code at
``SRC`` (the before: a checkout of main without this change, given on ``PYTHONPATH``), and with this
checkout's code twice: with an empty artifact cache (every artifact downloaded) and with the cache the
first filled. It prints a Markdown table (wall s, CPU s, peak RSS MiB), the ratios t(k)/t(first size) and
after/floor, the pairs=all peak over the default's, and compares every CSV of the before
and the after: byte for byte, except the clustered model's tables (``gee_wald.csv``, ``gee_by_dataset.csv``),
whose numbers must agree to 1e-6.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
from pathlib import Path

from benchmarks.common import REPO, Context, Timed, run_timed
from benchmarks.compare_scale import compare_command, make_runs

GEE_TABLES = ("gee_wald.csv", "gee_by_dataset.csv")
# The after's stage timings, printed by the warm comparison (prism.config.CompareConfig.timings).
TIMINGS: tuple[str, ...] = tuple(os.environ.get("PRISM_FLOOR_TIMINGS", "").split())

FLOOR = """
import json, sys, time
import mlflow, pandas
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle]
"""


def scored_paths(db: Path, run_ids: list[str]) -> list[str]:
    """Each run's ``results/scored.jsonl`` in the store's local artifact root."""
    from urllib.parse import unquote, urlparse

    import mlflow

    client = mlflow.tracking.MlflowClient(f"sqlite:///{db}")
    return [str(Path(unquote(urlparse(client.get_run(r).info.artifact_uri).path)) / "results" / "scored.jsonl")
            for r in run_ids]


def same_tables(before: Path, after: Path) -> list[str]:
    """Every difference between two comparison directories' CSVs (empty: identical, GEE numbers to 1e-6)."""
    import pandas as pd

    problems = []
    names = sorted(p.name for p in before.glob("*.csv"))
    if names != sorted(p.name for p in after.glob("*.csv")):
        problems.append(f"different files: {names} vs {sorted(p.name for p in after.glob('*.csv'))}")
    for name in names:
        a, b = (before / name).read_bytes(), (after / name).read_bytes() if (after / name).exists() else b""
        if a == b:
            continue
        if name not in GEE_TABLES:
            problems.append(f"{name} differs")
            continue
        x, y = pd.read_csv(before / name), pd.read_csv(after / name)
        if list(x.columns) != list(y.columns) or len(x) != len(y):
            problems.append(f"{name}: different shape {x.shape} vs {y.shape}")
            continue
        for column in x.columns:
            if pd.api.types.is_numeric_dtype(x[column]) and pd.api.types.is_numeric_dtype(y[column]):
                gap = (x[column] - y[column]).abs().max()
                both_nan = (x[column].isna() == y[column].isna()).all()
                if not both_nan or (not math.isnan(gap) and gap > 1e-6):
                    problems.append(f"{name}.{column}: max difference {gap}")
            elif not x[column].fillna("").astype(str).equals(y[column].fillna("").astype(str)):
                problems.append(f"{name}.{column}: text differs")
    return problems


def row(label: str, t: Timed) -> str:
    """One Markdown row of a timed command."""
    return f"| {label} | {t.seconds:.1f} | {t.cpu_seconds:.1f} | {t.max_rss_mib:.0f} |"


def measure(work: Path, before: Path, sizes: list[int], all_pairs: bool) -> None:
    """Time the floor, the before and the after at each size; print the tables and the CSV check."""
    ids = json.loads((work / "runs.json").read_text(encoding="utf-8"))
    db = work / "mlflow.db"
    paths = scored_paths(db, ids)
    lines = ["| what | wall s | CPU s | peak RSS MiB |", "| --- | ---: | ---: | ---: |"]
    checks = []
    timed: dict[tuple[str, int], Timed] = {}
    for k in sizes:
        base = {"PYTHONPATH": str(before)}
        here = {"PYTHONPATH": str(REPO)}
        floor = run_timed([sys.executable, "-c", FLOOR, *paths[:k]], env=here, cwd=work)
        old = run_timed(compare_command(ids[:k], db, work / f"before-{k}"), env=base, cwd=work)
        cache = work / f"cache-{k}"
        shutil.rmtree(cache, ignore_errors=True)
        cold = run_timed(compare_command(ids[:k], db, work / f"after-{k}", [f"artifact_cache={cache}"]), env=here,
                         cwd=work)
        warm = run_timed(compare_command(ids[:k], db, work / f"warm-{k}", [f"artifact_cache={cache}", *TIMINGS]),
                         env=here, cwd=work)
        timed.update({("before", k): old, ("warm", k): warm, ("floor", k): floor})
        lines += [row(f"{k} runs: floor (import mlflow, pandas + json.loads)", floor),
                  row(f"{k} runs: before", old), row(f"{k} runs: after, cold cache", cold),
                  row(f"{k} runs: after, warm cache", warm)]
        print(warm.stdout[-3000:], warm.stderr[-1500:], flush=True)
        checks.append((k, same_tables(work / f"before-{k}" / "comparison", work / f"after-{k}" / "comparison")))
        print("\n".join(lines), flush=True)
    if all_pairs:
        k = sizes[0]
        extra = ["pairs=all", "differences.max_per_pair=null"]
        old = run_timed(compare_command(ids[:k], db, work / f"before-{k}-all", extra), env={"PYTHONPATH": str(before)},
                        cwd=work)
        new = run_timed(compare_command(ids[:k], db, work / f"after-{k}-all",
                                        [*extra, f"artifact_cache={work}/cache-{k}"]),
                        env={"PYTHONPATH": str(REPO)}, cwd=work)
        lines += [row(f"{k} runs, pairs=all max_per_pair=null: before", old),
                  row(f"{k} runs, pairs=all max_per_pair=null: after (warm cache)", new)]
        if ("warm", k) in timed:
            default = timed[("warm", k)]
            ratio = new.max_rss_mib / default.max_rss_mib
            lines.append(f"pairs=all peak / default peak at {k} runs (after): {ratio:.2f}")
        checks.append((-k, same_tables(work / f"before-{k}-all" / "comparison",
                                       work / f"after-{k}-all" / "comparison")))
    print("\n".join(lines))
    # The scaling targets: each size's time over the first size's, of the warm after (and of the before).
    first = sizes[0]
    for label in ("warm", "before"):
        for k in sizes[1:]:
            a, b = timed[(label, k)], timed[(label, first)]
            print(f"{label}: t({k})/t({first}) = {a.seconds / b.seconds:.2f} wall, "
                  f"{a.cpu_seconds / b.cpu_seconds:.2f} CPU")
    for k in sizes:
        warm, floor = timed[("warm", k)], timed[("floor", k)]
        print(f"after (warm) / floor at {k} runs: {warm.seconds / floor.seconds:.1f}x wall, "
              f"{warm.cpu_seconds / floor.cpu_seconds:.1f}x CPU")
    for k, problems in checks:
        print(f"CSV check at {abs(k)} runs{' (all pairs)' if k < 0 else ''}: "
              + ("identical (GEE tables to 1e-6)" if not problems else "; ".join(problems)))


def main() -> None:
    """``setup`` or ``measure`` (see the module's docstring)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare_floor")
    parser.add_argument("step", choices=("setup", "measure"))
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--before", type=Path)
    parser.add_argument("--sizes", default="20")
    parser.add_argument("--all-pairs", action="store_true")
    args = parser.parse_args()
    work = args.work.resolve()
    if args.step == "setup":
        data = Path(os.environ.get("PRISM_DATA_DIR", "/work/shared/data"))
        ctx = Context(workdir=work.parent, data_dir=data, quick=False)
        ids, seconds, db = make_runs(ctx, args.runs, args.questions)
        if db.parent != work:
            raise SystemExit(f"the runs were made in {db.parent}; pass --work {db.parent}")
        (work / "runs.json").write_text(json.dumps(ids), encoding="utf-8")
        print(f"{len(ids)} runs in {seconds:.0f} s")
        return
    if args.before is None:
        raise SystemExit("measure needs --before SRC: a checkout of the code to compare with")
    measure(work, args.before.resolve(), [int(k) for k in args.sizes.split(",")], args.all_pairs)


if __name__ == "__main__":
    main()
