"""4. Start-up: ``python -m prism --help`` and ``--cfg job`` against a bare ``python -c pass``.

Neither command may import mlflow, llama_cpp, datasets, ollama or openai (the test suite asserts that;
here the import log of each command is read once more under ``-X importtime``). Each command runs
``REPEATS`` times, interleaved, and the median is reported; for scale, the import time of each heavy
module alone is measured the same way.
"""

from __future__ import annotations

import re
import statistics
import sys

from benchmarks.common import REPO, Context, Section, run_timed

HEAVY = ("mlflow", "llama_cpp", "datasets", "ollama", "openai", "pandas")


def run(ctx: Context) -> Section:
    """Measure and report."""
    repeats = 3 if ctx.quick else 15
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -m prism --help": [sys.executable, "-m", "prism", "--help"],
        "python -m prism --cfg job": [sys.executable, "-m", "prism", "--cfg", "job"],
        **{f"python -c 'import {m}'": [sys.executable, "-c", f"import {m}"] for m in HEAVY},
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeats):
        for name, args in commands.items():
            times[name].append(run_timed(args, cwd=REPO).seconds)
    median = {name: statistics.median(values) for name, values in times.items()}
    bare = median["python -c pass"]
    imported = {}
    for name in ("python -m prism --help", "python -m prism --cfg job"):
        log = run_timed([sys.executable, "-X", "importtime", *commands[name][1:]], cwd=REPO).stderr
        imported[name] = [m for m in HEAVY if re.search(rf"\| +{m}$", log, re.M)]
    section = Section(
        title="4. Start-up",
        command="python -m benchmarks --only startup",
        figures={"help_s": median["python -m prism --help"], "cfg_job_s": median["python -m prism --cfg job"],
                 "bare_s": bare},
    )
    rows = [f"| `{name}` | {median[name] * 1000:.0f} | {min(times[name]) * 1000:.0f} | {median[name] / bare:.1f}x | "
            f"{', '.join(imported[name]) or 'none' if name in imported else ''} |" for name in commands]
    section.body = [
        f"Median of {repeats} interleaved runs each, from spawn to exit.",
        "",
        "| command | median ms | min ms | vs bare python | heavy modules imported |",
        "|---|---:|---:|---:|---|",
        *rows,
    ]
    return section
