"""1. Overhead: ``python -m prism`` over a minimal llama.cpp loop, same prompts, order and parameters.

Both sides are whole processes timed from spawn to exit, so interpreter start, imports and the model load
count on both. PRISM runs with the store off (every prompt goes to the model) against a migrated local
MLflow store. The sides alternate (baseline, PRISM, PRISM, baseline, ...) so a drift in machine speed
falls on both equally; the ratio is total PRISM time over total baseline time. Both sides' responses are
compared: identical text shows they really sent the same requests with the same parameters.
"""

from __future__ import annotations

import sys

from benchmarks.common import Context, Section, run_timed
from benchmarks.embedded import agreement, prepare, read_responses, run_responses

TARGET = 1.05


def run(ctx: Context) -> Section:
    """Measure and report."""
    n_questions, pairs = (4, 1) if ctx.quick else (100, 2)
    bench = prepare(ctx, "overhead", n_questions, store=False)
    rows, prism_total, raw_total = [], 0.0, 0.0
    same = ""
    for pair in range(pairs):
        order = ("raw", "prism") if pair % 2 == 0 else ("prism", "raw")
        for side in order:
            name = f"{side}-{pair}"
            timed = bench.raw("condition", name) if side == "raw" else bench.prism(name)
            label = "minimal llama.cpp script" if side == "raw" else "python -m prism"
            per_prompt_ms = timed.seconds / bench.n_prompts * 1000
            rss = timed.max_rss_mib
            rows.append(f"| {pair + 1} | {label} | {timed.seconds:.1f} | {per_prompt_ms:.0f} | {rss:.0f} |")
            if side == "raw":
                raw_total += timed.seconds
            else:
                prism_total += timed.seconds
        same = agreement(run_responses(bench.workdir, f"prism-{pair}"),
                         read_responses(bench.workdir / f"raw-{pair}.jsonl"))
    ratio = prism_total / raw_total
    # PRISM's own cost without any inference: the same cells answered by the replay backend from the
    # baseline's responses. Free of inference noise, it bounds what the side-by-side ratio can show.
    replay = bench.prism("replay", "model=replay", f"model.path={bench.workdir / 'raw-0.jsonl'}",
                         "model.name=smollm2-replay")
    bare = run_timed([sys.executable, "-c", "pass"]).seconds
    own = replay.seconds - bare
    section = Section(
        title="1. Overhead of `python -m prism` over raw llama.cpp",
        command="python -m benchmarks --only overhead",
        figures={"ratio": ratio, "prism_s": prism_total / pairs, "raw_s": raw_total / pairs,
                 "replay_s": replay.seconds},
    )
    section.body = [
        f"SmolLM2 (llama.cpp, n_ctx {bench.n_ctx}, {bench.n_threads} threads), {n_questions} ARC-Challenge "
        f"questions x P0-P4 = {bench.n_prompts} prompts, condition-major, greedy, max_tokens 64; PRISM with "
        f"`store.enabled=false` and a local SQLite MLflow store. {pairs} alternating pair(s), process start to exit.",
        "",
        "| pair | side | wall s | ms per prompt | peak RSS MiB |",
        "|---:|---|---:|---:|---:|",
        *rows,
        "",
        f"**Ratio PRISM / minimal script: {ratio:.3f}** "
        f"(target <= {TARGET}: {'met' if ratio <= TARGET else 'NOT met'}). "
        f"Mean {prism_total / pairs:.1f} s vs {raw_total / pairs:.1f} s, a difference of "
        f"{(prism_total - raw_total) / pairs:+.1f} s per run. Identical responses in the last pair: {same}.",
        "",
        f"PRISM without inference (the replay backend answering the same {bench.n_prompts} cells with the "
        f"baseline's responses, MLflow and all): {replay.seconds:.2f} s, {own:.2f} s more than a bare `python -c "
        f"pass`. Added to the baseline, that is a ratio of **{(raw_total / pairs + own) / (raw_total / pairs):.3f}**, "
        "the overhead without the noise of two inference runs.",
    ]
    return section
