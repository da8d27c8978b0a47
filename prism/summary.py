"""From raw records to results: parse, score, tabulate, write the result files, print the summary.

Parsing sees only the response and the labels and option texts as displayed; the answer key enters at
scoring, one step later.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from prism.conditions import ConditionSet, render
from prism.metrics import condition_table, question_table, summary_metrics
from prism.parsing import PARSER_VERSION, parse_response
from prism.questions import FrozenSet
from prism.scoring import score_record
from prism.types import Prompt


def score_all(
    records: Sequence[Mapping[str, Any]], frozen: FrozenSet, condition_set: ConditionSet
) -> list[dict[str, Any]]:
    """Parse and score every raw record, in (condition, question, repetition) order.

    Args:
        records: Raw records of the run (any order; reused and fresh mixed).
        frozen: The frozen question set (the answer key lives here).
        condition_set: The conditions the prompts were rendered with.

    Returns:
        Scored records (DESIGN.md), without the prompt text, which stays in ``responses.jsonl``.
    """
    questions = {q.question_id: q for q in frozen.questions}
    conditions = {c.name: c for c in condition_set.conditions}
    prompts: dict[tuple[str, str], Prompt] = {}
    order = {name: i for i, name in enumerate(condition_set.names)}
    position = {q.question_id: i for i, q in enumerate(frozen.questions)}
    scored = []
    for raw in sorted(records, key=lambda r: (order[r["condition"]], position[r["question_id"]], r["repetition"])):
        key = (raw["question_id"], raw["condition"])
        if key not in prompts:
            prompts[key] = render(questions[key[0]], conditions[key[1]], condition_set)
        prompt = prompts[key]
        parsed = None
        if raw.get("error") is None and raw.get("response") is not None:
            parsed = parse_response(raw["response"], prompt.displayed_labels, prompt.displayed_options)
        record = score_record(raw, prompt, parsed, questions[key[0]].answer, PARSER_VERSION)
        record.pop("prompt", None)
        scored.append(record)
    return scored


def write_results(out: Path, scored: Sequence[Mapping[str, Any]], frozen: FrozenSet, condition_set: ConditionSet,
                  repetitions: int) -> dict[str, float]:
    """Write ``results/`` (scored.jsonl, question_metrics.csv, condition_metrics.csv) and return metrics."""
    results = out / "results"
    results.mkdir(parents=True, exist_ok=True)
    with (results / "scored.jsonl").open("w", encoding="utf-8") as handle:
        for record in scored:
            handle.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
    frame = pd.DataFrame(list(scored))
    ids = [q.question_id for q in frozen.questions]
    names = condition_set.names
    question_table(frame, names, ids, repetitions).to_csv(results / "question_metrics.csv", index=False)
    condition_table(frame, names).to_csv(results / "condition_metrics.csv", index=False)
    return summary_metrics(frame, names, ids, repetitions)


def _pct(value: float) -> str:
    return "   n/a" if value is None or math.isnan(value) else f"{100 * value:5.1f}%"


def format_summary(metrics: Mapping[str, float], conditions: Sequence[str]) -> str:
    """The terminal summary: a per-condition table, then the question-level metrics."""
    lines = [f"{'condition':<10} {'accuracy':>9} {'recovered':>10} {'compliant':>10}"]
    for name in conditions:
        lines.append(
            f"{name:<10} {_pct(metrics[f'accuracy/{name}']):>9} {_pct(metrics[f'answer_recovery_rate/{name}']):>10} "
            f"{_pct(metrics[f'instruction_compliance_rate/{name}']):>10}"
        )
    lines.append(
        f"{'all':<10} {_pct(metrics['accuracy']):>9} {_pct(metrics['answer_recovery_rate']):>10} "
        f"{_pct(metrics['instruction_compliance_rate']):>10}"
    )
    lines += [
        "",
        f"questions: {int(metrics['n_questions'])} frozen, {int(metrics['complete_questions'])} complete; "
        f"responses observed: {int(metrics['n_responses'])}",
        f"question majority accuracy:        {_pct(metrics['question_majority_accuracy'])}",
        f"mean agreement across conditions:  {_pct(metrics['mean_agreement'])}",
        f"mean prompt sensitivity:           {_pct(metrics['mean_prompt_sensitivity'])}",
        f"answer unanimous across conditions:{_pct(metrics['answer_unanimous_rate'])}",
        f"prompt-invariant incorrect:        {_pct(metrics['prompt_invariant_incorrect_rate'])}",
    ]
    return "\n".join(lines)
