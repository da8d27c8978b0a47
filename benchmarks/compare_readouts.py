"""The read-out tables of a comparison (issue 38), before and after side by side, on the floor benchmark's runs.

``python -m benchmarks.compare_readouts --work DIR --before SRC --sizes 20,100`` times, for each size k and
each code (``SRC``, a checkout without the change, given on ``PYTHONPATH``; then this checkout), in its own
process: the four read-out tables of :func:`prism.compare.readouts.readout_tables` (scorecard,
sensitivity_axes, measure_agreement, divergence_noise), each alone, on the first k runs of ``DIR/runs.json``
(made by ``python -m benchmarks.compare_floor setup``), with the comparison's defaults (B = 2,000 bootstrap
resamples and 2,000 permutations, seed 0, the ``answer`` measure, each run paired with the first). The
runs' cells are read and the shifts table built first, untimed (through the artifact cache ``DIR/cache-K``
that ``compare_floor measure`` fills, or a new one). It prints wall and CPU seconds per table and checks
that each table's CSV is byte for byte the before's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.common import REPO, run_timed

TABLES = ("scorecard", "sensitivity_axes", "measure_agreement", "divergence_noise")

# Only what the code before the change has too: the same calls, their times, the CSVs.
CHILD = """
import json, sys, time
from pathlib import Path
import mlflow
from prism.compare.artifact_cache import ArtifactCache
from prism.compare.core import load_models
from prism.compare.divergence_noise import divergence_noise_table
from prism.compare.groups import group_pairs
from prism.compare.measure_agreement import measure_agreement_table
from prism.compare.noise import shifts_table
from prism.compare.scorecard import scorecard_table
from prism.compare.select import fetch_runs, label_runs
from prism.compare.sensitivity_axes import sensitivity_axes_table

db, cache, out = sys.argv[1:4]
ids = sys.argv[4:]
uri = f"sqlite:///{db}"
models = load_models(label_runs(fetch_runs(mlflow.tracking.MlflowClient(uri), ids)), uri, ArtifactCache(Path(cache)))
pairs = group_pairs(models, "reference", {models[0].question_set: models[0].run_id})
shifts = shifts_table(models, "P0", ["answer"], n_boot=2000, n_permutations=2000, seed=0)
calls = {"scorecard": lambda: scorecard_table(models, "P0", n_boot=2000, seed=0),
         "sensitivity_axes": lambda: sensitivity_axes_table(models, shifts),
         "measure_agreement": lambda: measure_agreement_table(shifts, ["answer"]),
         "divergence_noise": lambda: divergence_noise_table(pairs, ["answer"], n_boot=2000, n_permutations=2000,
                                                            seed=0)}
Path(out).mkdir(parents=True, exist_ok=True)
times = {}
for name, call in calls.items():
    wall, cpu = time.perf_counter(), time.process_time()
    table = call()
    times[name] = (time.perf_counter() - wall, time.process_time() - cpu)
    table.to_csv(Path(out) / f"{name}.csv", index=False, float_format="%.10g")
print(json.dumps(times))
"""


def measure(work: Path, before: Path, sizes: list[int]) -> None:
    """Time the four read-outs with each code at each size; print the table and the CSV check."""
    ids = json.loads((work / "runs.json").read_text(encoding="utf-8"))
    lines = ["| runs | table | before wall s | before CPU s | after wall s | after CPU s |",
             "| ---: | --- | ---: | ---: | ---: | ---: |"]
    checks = []
    for k in sizes:
        found = {}
        for label, source in (("before", before), ("after", REPO)):
            out = work / f"readouts-{label}-{k}"
            timed = run_timed([sys.executable, "-c", CHILD, str(work / "mlflow.db"), str(work / f"cache-{k}"),
                               str(out), *ids[:k]], env={"PYTHONPATH": str(source)}, cwd=work)
            found[label] = json.loads(timed.stdout.strip().splitlines()[-1])
        for label in ("before", "after"):
            found[label]["all four"] = [sum(found[label][t][i] for t in TABLES) for i in (0, 1)]
        for name in (*TABLES, "all four"):
            (bw, bc), (aw, ac) = found["before"][name], found["after"][name]
            lines.append(f"| {k} | {name} | {bw:.2f} | {bc:.2f} | {aw:.2f} | {ac:.2f} |")
        differ = [t for t in TABLES if (work / f"readouts-before-{k}" / f"{t}.csv").read_bytes()
                  != (work / f"readouts-after-{k}" / f"{t}.csv").read_bytes()]
        checks.append(f"CSV check at {k} runs: " + (f"{', '.join(differ)} differ" if differ else
                                                     "all four byte for byte the before's"))
        print("\n".join(lines), flush=True)
    print("\n".join(checks))


def main() -> None:
    """Parse the arguments and measure (see the module's docstring)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare_readouts")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--sizes", default="20")
    args = parser.parse_args()
    measure(args.work, args.before, [int(k) for k in args.sizes.split(",")])


if __name__ == "__main__":
    main()
