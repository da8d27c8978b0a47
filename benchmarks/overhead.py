"""1. Overhead: ``python -m prism`` over a minimal llama.cpp loop, same prompts, order and parameters.

Both sides are whole processes timed from spawn to exit, so interpreter start, imports and the model load
count on both. PRISM runs with the store off (every prompt goes to the model) against a migrated local
MLflow store. The sides alternate (baseline, PRISM, PRISM, baseline) so a steady drift in machine speed
falls on both equally; the ratio is total PRISM time over total baseline time.

On a shared virtual machine the same 500 prompts can take 10% longer from one run to the next, which is
more than the overhead being measured. So each side's wall time is also split into the time spent inside
``create_chat_completion`` (the baseline prints its loop time; PRISM records every call's ``latency_s``)
and the time around it. The time around the model is what PRISM adds, measured in the same runs; the
replay backend answering the same cells from the baseline's responses gives it a third time, with no model
loaded at all. Both sides' responses are compared: identical text shows they sent the same requests.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from benchmarks.common import Context, Section, Timed, run_timed
from benchmarks.embedded import agreement, prepare, read_responses

TARGET = 1.05


def model_seconds(side: str, timed: Timed, records: list[dict[str, Any]]) -> float:
    """Seconds spent inside llama.cpp's chat completion calls during one side's run."""
    if side == "raw":
        return float(json.loads(timed.stdout.strip().splitlines()[-1])["loop_s"])
    return sum(float(r["latency_s"]) for r in records)


def run(ctx: Context) -> Section:
    """Measure and report."""
    n_questions, pairs = (4, 1) if ctx.quick else (100, 2)
    bench = prepare(ctx, "overhead", n_questions, store=False)
    rows: list[str] = []
    wall = {"raw": 0.0, "prism": 0.0}
    around = {"raw": 0.0, "prism": 0.0}
    same = ""
    for pair in range(pairs):
        order = ("raw", "prism") if pair % 2 == 0 else ("prism", "raw")
        for side in order:
            name = f"{side}-{pair}"
            timed = bench.raw("condition", name) if side == "raw" else bench.prism(name)
            output = (bench.workdir / f"{name}.jsonl" if side == "raw"
                      else bench.workdir / "runs" / name / "responses" / "responses.jsonl")
            records = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines() if line]
            inside = model_seconds(side, timed, records)
            wall[side] += timed.seconds
            around[side] += timed.seconds - inside
            label = "minimal llama.cpp script" if side == "raw" else "python -m prism"
            rows.append(f"| {pair + 1} | {label} | {timed.seconds:.1f} | {inside:.1f} | {timed.seconds - inside:.2f} | "
                        f"{timed.max_rss_mib:.0f} |")
        same = agreement(read_responses(bench.workdir / "runs" / f"prism-{pair}" / "responses" / "responses.jsonl"),
                         read_responses(bench.workdir / f"raw-{pair}.jsonl"))
    ratio = wall["prism"] / wall["raw"]
    added = (around["prism"] - around["raw"]) / pairs
    baseline = wall["raw"] / pairs
    ratio_around = (baseline + added) / baseline
    # PRISM with no model at all: the replay backend answers the same cells from the baseline's responses.
    replay = bench.prism("replay", "model=replay", f"model.path={bench.workdir / 'raw-0.jsonl'}",
                         "model.name=smollm2-replay")
    bare = run_timed([sys.executable, "-c", "pass"]).seconds
    own = replay.seconds - bare
    section = Section(
        title="1. Overhead of `python -m prism` over raw llama.cpp",
        command="python -m benchmarks --only overhead",
        figures={"ratio_wall": ratio, "ratio_around_model": ratio_around, "added_s": added,
                 "prism_s": wall["prism"] / pairs, "raw_s": baseline, "replay_s": replay.seconds},
    )
    section.body = [
        f"SmolLM2 (llama.cpp, n_ctx {bench.n_ctx}, {bench.n_threads} threads), {n_questions} ARC-Challenge "
        f"questions x P0-P4 = {bench.n_prompts} prompts, condition-major, greedy, max_tokens 64; PRISM with "
        f"`store.enabled=false` and a local SQLite MLflow store. {pairs} alternating pair(s), process start to exit.",
        "",
        "| pair | side | wall s | in the model s | around it s | peak RSS MiB |",
        "|---:|---|---:|---:|---:|---:|",
        *rows,
        "",
        f"Wall time, PRISM / minimal script: **{ratio:.3f}** (mean {wall['prism'] / pairs:.1f} s vs {baseline:.1f} s). "
        f"Identical responses in the last pair: {same}.",
        "",
        f"Time around the model: PRISM adds **{added:.2f} s** per run to the script's (start-up, imports, MLflow, "
        f"question-set checks, records, scoring, artifacts); on the baseline's {baseline:.1f} s that is a ratio of "
        f"**{ratio_around:.3f}** (target <= {TARGET}: {'met' if ratio_around <= TARGET else 'NOT met'}). "
        "This is the overhead; the rest of the wall-time difference is the model itself running faster or slower "
        "from one run to the next.",
        "",
        f"PRISM with no model at all (the replay backend answering the same {bench.n_prompts} cells with the "
        f"baseline's responses): {replay.seconds:.2f} s, {own:.2f} s more than a bare `python -c pass`.",
    ]
    return section
