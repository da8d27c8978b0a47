"""10. Label probabilities, whole runs: a default run with and without ``generation.label_probs=true``.

The default experiment (100 ARC-Challenge questions x P0-P4 on the embedded SmolLM2, one thread) is run
as two arms, ``text`` (as today) and ``probs`` (``generation.label_probs=true``), side by side in one
invocation, each run with a fresh completion store of its own so every cell goes to the model. The arms
alternate in pairs whose order flips (text, probs, probs, text, ...: ABBA), so a steady drift in machine
speed falls on both arms alike.

On a shared machine one run's wall time moves by several percent from the next for reasons that have
nothing to do with the arm, so the section reports, besides the ratio of total wall times, its spread over
the pairs and two readings that other jobs move less: the ratio of CPU seconds (user + system of the run's
process) and the per-cell ratio of the time inside llama.cpp (each record's ``latency_s``; both arms ask
exactly the same cells and, greedy, get the same responses, so cell by cell is a like-for-like pairing),
as a median with its interquartile range.
"""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import Context, Section, machine
from benchmarks.embedded import Embedded, agreement, prepare, run_responses

TARGET = 1.05
ARMS = ("text", "probs")


@dataclass(frozen=True)
class Timing:
    """One run of one arm."""

    pair: int
    arm: str
    name: str
    wall_s: float
    cpu_s: float
    model_s: float
    rss_mib: float


@dataclass
class Arms:
    """What the alternating runs measured, per arm and per pair."""

    n_questions: int
    n_prompts: int
    rows: list[Timing] = field(default_factory=list)
    latencies: dict[str, dict[tuple[str, str, int], list[float]]] = field(
        default_factory=lambda: {arm: {} for arm in ARMS})

    def total(self, arm: str, key: str) -> float:
        """The sum of ``key`` (``wall_s``, ``cpu_s``, ``model_s``) over the runs of ``arm``."""
        return sum(float(getattr(row, key)) for row in self.rows if row.arm == arm)

    def ratio(self, key: str) -> float:
        """Total of the probs arm over total of the text arm."""
        return self.total("probs", key) / self.total("text", key)

    def pair_ratios(self, key: str) -> list[float]:
        """The probs / text ratio of ``key`` within each pair: their spread is the run-to-run noise."""
        pairs = sorted({row.pair for row in self.rows})
        value = {(row.pair, row.arm): float(getattr(row, key)) for row in self.rows}
        return [value[(pair, "probs")] / value[(pair, "text")] for pair in pairs]

    def cell_ratios(self) -> list[float]:
        """Per cell, the mean latency of the probs arm over the text arm's (cells both arms asked)."""
        text, probs = self.latencies["text"], self.latencies["probs"]
        return [statistics.fmean(probs[key]) / statistics.fmean(text[key])
                for key in sorted(text.keys() & probs.keys()) if statistics.fmean(text[key]) > 0]


def read_records(bench: Embedded, name: str) -> list[dict[str, Any]]:
    """The raw records a run in ``runs/<name>`` wrote."""
    path = bench.workdir / "runs" / name / "responses" / "responses.jsonl"
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def alternate(ctx: Context, n_questions: int, pairs: int, threads: int = 1) -> tuple[Arms, Embedded]:
    """Run ``pairs`` pairs of the two arms, the order flipping each pair, each run with a fresh store.

    Raises:
        SystemExit: If a run served a cell from a store (the arms would not both have asked the model), or if
            the probs arm recorded no label probabilities, or the text arm did: either makes the ratio meaningless.
    """
    bench = prepare(ctx, "label_probs_run", n_questions, store=True)
    arms = Arms(n_questions=n_questions, n_prompts=bench.n_prompts)
    for pair in range(pairs):
        for arm in ARMS if pair % 2 == 0 else ARMS[::-1]:
            name = f"{arm}-{pair}"
            store = bench.workdir / "stores" / f"{name}.sqlite"
            if store.exists():
                raise SystemExit(f"{store} exists: the benchmark needs a fresh store per run (use a new --keep DIR)")
            extra = [f"model.n_threads={threads}", f"store.path={store}",
                     *(["generation.label_probs=true"] if arm == "probs" else [])]
            timed = bench.prism(name, *extra)
            records = read_records(bench, name)
            cached = sum(1 for r in records if r.get("cached"))
            with_probs = sum(1 for r in records if "label_probs_source" in r)
            if cached or with_probs != (len(records) if arm == "probs" else 0):
                raise SystemExit(f"run {name}: {cached} cells from a store and {with_probs} of {len(records)} records "
                                 "with label probabilities; the arms would not be what they claim")
            model_s = 0.0
            for r in records:
                key = (str(r["question_id"]), str(r["condition"]), int(r["repetition"]))
                arms.latencies[arm].setdefault(key, []).append(float(r["latency_s"]))
                model_s += float(r["latency_s"])
            arms.rows.append(Timing(pair, arm, name, timed.seconds, timed.cpu_seconds, model_s, timed.max_rss_mib))
            print(f"  {name}: wall {timed.seconds:.1f} s, CPU {timed.cpu_seconds:.1f} s, in llama.cpp "
                  f"{model_s:.1f} s", flush=True)
    return arms, bench


def spread(values: list[float]) -> str:
    """``min-max`` of a few ratios, or the one value."""
    return f"{min(values):.3f}-{max(values):.3f}" if len(values) > 1 else f"{values[0]:.3f}"


def run(ctx: Context, n_questions: int | None = None, pairs: int | None = None) -> Section:
    """Measure and report: by default 100 questions in two pairs (ABBA), 2 questions in one pair with ``quick``."""
    n_questions = n_questions or (2 if ctx.quick else 100)
    pairs = pairs or (1 if ctx.quick else 2)
    arms, bench = alternate(ctx, n_questions, pairs)
    same = agreement(run_responses(bench.workdir, "text-0"), run_responses(bench.workdir, "probs-0"))
    wall, cpu, model = arms.ratio("wall_s"), arms.ratio("cpu_s"), arms.ratio("model_s")
    cells = sorted(arms.cell_ratios())
    quartiles = statistics.quantiles(cells, n=4) if len(cells) > 1 else [cells[0]] * 3
    section = Section(
        title="10. Label probabilities, whole runs: the default run with and without generation.label_probs",
        command="python -m benchmarks --only label_probs_run" if (n_questions, pairs) == (100, 2) else
        f"python -m benchmarks.label_probs_run --questions {n_questions} --pairs {pairs}",
        figures={"wall_ratio": wall, "cpu_ratio": cpu, "model_ratio": model, "cell_median_ratio": quartiles[1],
                 "wall_ratio_min": min(arms.pair_ratios("wall_s")), "wall_ratio_max": max(arms.pair_ratios("wall_s"))},
    )
    order = ", ".join(row.arm for row in arms.rows)
    section.body = [
        f"`python -m prism dataset.n={n_questions} model.n_threads=1` (SmolLM2, ARC-Challenge x P0-P4 = "
        f"{arms.n_prompts} prompts, greedy, max_tokens 64), each run with a fresh completion store, without (`text`) "
        f"and with (`probs`) `generation.label_probs=true`, in the order {order}.",
        "",
        "| run | arm | wall s | CPU s | inside llama.cpp s | peak RSS MiB |",
        "|---|---|---:|---:|---:|---:|",
        *(f"| {row.name} | {row.arm} | {row.wall_s:.1f} | {row.cpu_s:.1f} | {row.model_s:.1f} | {row.rss_mib:.0f} |"
          for row in arms.rows),
        "",
        f"probs / text, totals over the arms: wall **{wall:.3f}** (per pair {spread(arms.pair_ratios('wall_s'))}), "
        f"CPU {cpu:.3f} (per pair {spread(arms.pair_ratios('cpu_s'))}), inside llama.cpp {model:.3f} "
        f"(per pair {spread(arms.pair_ratios('model_s'))}). Target <= {TARGET}: "
        f"{'met' if wall <= TARGET else 'NOT met'} on wall time.",
        "",
        f"Per cell ({len(cells)} cells, the same prompt in both arms), the probs arm's llama.cpp time over the "
        f"text arm's: median **{quartiles[1]:.3f}**, interquartile range {quartiles[0]:.3f}-{quartiles[2]:.3f}. "
        f"Responses of the two arms in the first pair identical: {same}.",
        "",
        "Load average (1, 5, 15 min) when the last run ended: " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + ".",
    ]
    return section



def main() -> None:
    """Run this benchmark alone at a chosen size (``python -m benchmarks`` runs it at the default run's)."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=100, help="ARC-Challenge questions per run (default 100)")
    parser.add_argument("--pairs", type=int, default=2, help="pairs of runs, the order flipping each pair (default 2)")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("PRISM_DATA_DIR") or "."))
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it (default: a temporary one)")
    args = parser.parse_args()
    if args.questions < 1 or args.pairs < 1:
        parser.error("--questions and --pairs must be at least 1")
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["PRISM_DATA_DIR"] = str(args.data_dir.resolve())
    with tempfile.TemporaryDirectory(prefix="prism-bench-") as tmp:
        workdir = args.keep.resolve() if args.keep else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        ctx = Context(workdir=workdir, data_dir=args.data_dir.resolve(), quick=False)
        print("\n".join(f"- {key}: {value}" for key, value in machine().items()), flush=True)
        print(run(ctx, args.questions, args.pairs).markdown(), flush=True)


if __name__ == "__main__":
    main()
