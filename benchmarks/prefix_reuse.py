"""2. Prefix reuse: condition-major against question-major order, and proof the responses do not move.

llama-cpp-python keeps the previous request's tokens in its KV cache and re-evaluates only what follows
the longest prefix the new prompt shares with them. PRISM sends prompts condition-major (every question
under P0, then P1, ...). Which order shares more depends on the templates: P0 starts with the question,
P1-P4 with an instruction, so question-major shares nothing after P0's question either. Both orders run
through the minimal llama.cpp script (nothing else in the loop), alternating; the responses of every
(question, condition) are compared across the orders.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.common import Context, Section
from benchmarks.embedded import agreement, prepare, read_responses


def tokens_to_evaluate(requests_file: Path, model_path: Path) -> tuple[int, int]:
    """Prompt tokens in all, and those not covered by the previous prompt's prefix, in file order.

    Counted on the user message with the model's own tokenizer (vocabulary only, no weights): the chat
    template puts the same header before every message, so it is shared in both orders alike.
    """
    from llama_cpp import Llama

    vocab = Llama(model_path=str(model_path), vocab_only=True, verbose=False)
    total = fresh = 0
    previous: list[int] = []
    with requests_file.open(encoding="utf-8") as handle:
        for line in handle:
            text = json.loads(line)["kwargs"]["messages"][-1]["content"]
            tokens = vocab.tokenize(text.encode("utf-8"), add_bos=False)
            shared = 0
            for a, b in zip(previous, tokens, strict=False):
                if a != b:
                    break
                shared += 1
            total += len(tokens)
            fresh += len(tokens) - shared
            previous = tokens
    return total, fresh


def run(ctx: Context) -> Section:
    """Measure and report."""
    n_questions = 4 if ctx.quick else 100
    bench = prepare(ctx, "prefix", n_questions, store=False)
    schedule = ("condition", "question") if ctx.quick else ("condition", "question", "question", "condition")
    rows, totals = [], {"condition": 0.0, "question": 0.0}
    for index, order in enumerate(schedule):
        timed = bench.raw(order, f"{order}-{index}")
        totals[order] += timed.seconds
        per_prompt_ms = timed.seconds / bench.n_prompts * 1000
        rows.append(f"| {index + 1} | {order}-major | {timed.seconds:.1f} | {per_prompt_ms:.0f} |")
    ratio = totals["question"] / totals["condition"]
    cm = read_responses(bench.workdir / "condition-0.jsonl")
    qm = read_responses(bench.workdir / "question-1.jsonl")
    counts = {order: tokens_to_evaluate(bench.requests_file(order), bench.model_path)
              for order in ("condition", "question")}
    section = Section(
        title="2. Prefix reuse: condition-major vs question-major order",
        command="python -m benchmarks --only prefix",
        figures={"question_over_condition": ratio},
    )
    section.body = [
        f"The minimal llama.cpp script over the same {bench.n_prompts} prompts in both orders, alternating.",
        "",
        "| run | order | wall s | ms per prompt |",
        "|---:|---|---:|---:|",
        *rows,
        "",
        "| order | prompt tokens (user message) | not shared with the previous prompt |",
        "|---|---:|---:|",
        *(f"| {order}-major | {total} | {fresh} ({fresh / total:.0%}) |" for order, (total, fresh) in counts.items()),
        "",
        f"Question-major / condition-major wall time: **{ratio:.3f}** "
        f"({'condition-major is faster' if ratio > 1 else 'condition-major is not faster'} by "
        f"{abs(ratio - 1):.1%}). Responses identical across the two orders: {agreement(cm, qm)} "
        "(question, condition) cells.",
    ]
    return section
