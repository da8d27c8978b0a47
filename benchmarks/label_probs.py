"""7. Label probabilities: what ``generation.label_probs=true`` costs on the embedded model.

Every side is timed in wall seconds and in CPU seconds (user + system of the process): on a machine
shared with other jobs, wall time moves with their load while CPU time barely does. Three comparisons,
each side by side in one invocation:

- whole runs: ``python -m prism`` with and without ``generation.label_probs=true`` on the same questions,
  alternating (text, probs, probs, text), store off, one thread; wall time and the time inside llama.cpp
  (the summed latency of the records), and whether the two runs' responses are identical;
- per prompt, in one process: each prompt generated once without and once with the first-position
  logits processor, the order alternating from prompt to prompt, so drift on a shared machine falls on
  both sides alike;
- ``logits_all``: llama-cpp-python's own route to log-probabilities keeps the logits of every prompt
  position (``Llama(logits_all=True)``); the same prompts with it on and off, alternating.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Context, Section
from benchmarks.embedded import agreement, prepare, run_responses

THREADS = "model.n_threads=1"


def model_seconds(workdir: Path, name: str) -> float:
    """The summed latency of a run's records: the time spent inside llama.cpp."""
    path = workdir / "runs" / name / "responses" / "responses.jsonl"
    with path.open(encoding="utf-8") as handle:
        return sum(float(json.loads(line)["latency_s"]) for line in handle if line.strip())


def per_prompt(model_path: Path, prompts: list[str]) -> tuple[dict[str, float], dict[str, float]]:
    """Wall and CPU seconds of generation over ``prompts`` for three sides, in rotating order per prompt.

    ``plain``: ``logits_all=False``, nothing kept; ``processor``: the same model with PRISM's first-position
    logits processor; ``logits_all``: a ``logits_all=True`` model asked for ``logprobs`` / ``top_logprobs=20``.
    Every generation starts from an empty cache (``reset``), so no side reuses another's prompt prefix.
    """
    from llama_cpp import Llama

    from prism.backends.llamacpp import FirstLogits

    models = {flag: Llama(model_path=str(model_path), n_ctx=2048, n_threads=1, logits_all=flag, verbose=False)
              for flag in (False, True)}
    sides = ("plain", "processor", "logits_all")
    totals, cpu = dict.fromkeys(sides, 0.0), dict.fromkeys(sides, 0.0)
    try:
        for index, text in enumerate(prompts):
            for side in sides[index % 3:] + sides[: index % 3]:
                kwargs: dict[str, Any] = {"messages": [{"role": "user", "content": text}], "temperature": 0.0,
                                "max_tokens": 64, "seed": 0}
                if side == "processor":
                    kwargs["logits_processor"] = [FirstLogits()]
                if side == "logits_all":
                    kwargs.update(logprobs=True, top_logprobs=20)
                llm = models[side == "logits_all"]
                llm.reset()  # type: ignore[no-untyped-call]
                start, start_cpu = time.perf_counter(), time.process_time()
                llm.create_chat_completion(**kwargs)
                totals[side] += time.perf_counter() - start
                cpu[side] += time.process_time() - start_cpu
            if (index + 1) % 6 == 0:  # progress, for a machine too loaded to wait for the end
                print(f"  per prompt, {index + 1} prompts, CPU s: " + ", ".join(f"{k} {v:.1f}" for k, v in cpu.items()),
                      flush=True)
    finally:
        for llm in models.values():
            llm.close()
    return totals, cpu


def run(ctx: Context) -> Section:
    """Measure and report."""
    n_questions = 1 if ctx.quick else 4
    bench = prepare(ctx, "label_probs", n_questions, store=False)
    with bench.requests_file("condition").open(encoding="utf-8") as handle:
        prompts = [json.loads(line)["kwargs"]["messages"][-1]["content"] for line in handle]
    prompts = prompts[: 3 if ctx.quick else 12]
    sides, cpu_sides = per_prompt(bench.model_path, prompts)
    plain, processed, kept_all = cpu_sides["plain"], cpu_sides["processor"], cpu_sides["logits_all"]

    schedule = ("text", "probs") if ctx.quick else ("text", "probs", "probs", "text")
    rows, wall, inside = [], {"text": 0.0, "probs": 0.0}, {"text": 0.0, "probs": 0.0}
    cpu = {"text": 0.0, "probs": 0.0}
    for index, side in enumerate(schedule):
        name = f"{side}-{index}"
        extra = [THREADS, *(["generation.label_probs=true"] if side == "probs" else [])]
        timed = bench.prism(name, *extra)
        seconds = model_seconds(bench.workdir, name)
        wall[side] += timed.seconds
        inside[side] += seconds
        cpu[side] += timed.cpu_seconds
        rows.append(f"| {index + 1} | {side} | {timed.seconds:.1f} | {seconds:.1f} | {timed.cpu_seconds:.1f} |")
        print(f"  whole runs: {rows[-1]}", flush=True)
    same = agreement(run_responses(bench.workdir, f"text-{0}"), run_responses(bench.workdir, f"probs-{1}"))

    ratio, model_ratio, cpu_ratio = wall["probs"] / wall["text"], inside["probs"] / inside["text"], \
        cpu["probs"] / cpu["text"]
    section = Section(title="7. Label probabilities: generation.label_probs on the embedded model",
                      command="python -m benchmarks --only label_probs",
                      figures={"wall_ratio": ratio, "model_ratio": model_ratio, "cpu_ratio": cpu_ratio,
                               "per_prompt_ratio": processed / plain, "logits_all_ratio": kept_all / plain})
    section.body = [
        f"Whole runs: `python -m prism dataset.n={n_questions} {THREADS}` ({bench.n_prompts} prompts, store off) "
        "without and with `generation.label_probs=true`, alternating.",
        "",
        "| run | side | wall s | inside llama.cpp s (wall) | CPU s |",
        "|---:|---|---:|---:|---:|",
        *rows,
        "",
        f"With / without label_probs: CPU **{cpu_ratio:.3f}**, wall {ratio:.3f}, inside llama.cpp (wall) "
        f"{model_ratio:.3f}. Responses of the two sides identical: {same}.",
        "",
        f"Per prompt, one process, {len(prompts)} prompts, each generated from an empty cache three ways in "
        "rotating order: plain, with PRISM's first-position logits processor, and with llama-cpp-python's own "
        "route (`logits_all=True`, `logprobs`, `top_logprobs=20`).",
        "",
        "| side | CPU s | / plain | wall s | / plain |",
        "|---|---:|---:|---:|---:|",
        *(f"| {side} | {cpu_sides[side]:.1f} | {cpu_sides[side] / plain:.3f} | {value:.1f} | "
          f"{value / sides['plain']:.3f} |" for side, value in sides.items()),
    ]
    return section
