"""Parser time against response length: a 100 kB and a 1 MB response of each shape, parsed side by side.

The parser must stay linear in the length of a response (a model that loops until its output limit can
return megabytes). Each shape repeats what makes a pattern work hardest: many answer statements on one
line, many listed option lines, long runs of markdown wrappers, a long ``<think>`` block, a reply cut by
leaked template tokens. Linear time shows as a 1 MB / 100 kB ratio near 10; quadratic time as near 100.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from benchmarks.common import Context, Section
from prism.parsing import parse_response

LABELS = tuple("ABCDEFGHIJ")
OPTIONS = tuple(f"option text number {i}" for i in range(10))
SIZES = {"100 kB": 100_000, "1 MB": 1_000_000}

# Shape name -> the unit that is repeated up to the size, and what comes after it.
SHAPES: dict[str, tuple[str, str]] = {
    "reasoning with statements": ("If the answer is (B), then option C is correct; the answer is A or B. ", ""),
    "listed options": ("A. option text number 0\nB) option text number 1\n", "The answer is (C)."),
    "markdown runs": ("**(((*_[", "B"),
    "think block": ("<think>Maybe A. Maybe option B is correct. ", "</think>\n\n**Answer:** D"),
    "one long line of cues": ("Answer: answer is I choose correct option is \\boxed{", "C"),
    "leaked tokens": ("<|im_end|>The answer is A.\n", ""),
}


def response(shape: str, size: int) -> str:
    """A response of ``shape`` about ``size`` characters long."""
    unit, end = SHAPES[shape]
    return unit * (size // len(unit)) + end


def _median_seconds(call: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(ctx: Context) -> Section:
    """Parse each shape at 100 kB and 1 MB (median of a few runs, interleaved) and report the ratio."""
    sizes = {name: size // 100 for name, size in SIZES.items()} if ctx.quick else SIZES
    repeats = 1 if ctx.quick else 3
    section = Section(title="Parser time against response length", command="python -m benchmarks --only parser")
    rows = []
    for shape in SHAPES:
        texts = {name: response(shape, size) for name, size in sizes.items()}
        seconds = {name: _median_seconds(lambda t=text: parse_response(t, LABELS, OPTIONS), repeats)  # type: ignore[misc]
                   for name, text in texts.items()}
        small, large = seconds["100 kB"], seconds["1 MB"]
        ratio = large / small if small > 0 else float("nan")
        section.figures[f"{shape}/ratio"] = ratio
        rows.append(f"| {shape} | {small * 1000:.1f} | {large * 1000:.1f} | {ratio:.1f}x |")
    section.body = [
        f"Median of {repeats} runs of `parse_response` per size, ten labels with option texts, in one process.",
        "Linear time: the 1 MB response takes about 10x the 100 kB one (quadratic would be 100x). The machine",
        "is shared and noisy: read the ratios, not the milliseconds.",
        "",
        "| shape | 100 kB ms | 1 MB ms | 1 MB / 100 kB |",
        "|---|---:|---:|---:|",
        *rows,
    ]
    return section
