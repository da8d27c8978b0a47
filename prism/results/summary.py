"""From raw records to results: parse, score, tabulate, write the result files, print the summary.

Parsing sees only the response and the labels and option texts as displayed; the answer key enters at
scoring, one step later.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from prism.cloze import cloze_fields
from prism.conditions import Condition, ConditionSet, render, render_keyed
from prism.conditions.perturbations.missing import RemoveAnswer
from prism.formatting import percent
from prism.label_probs import likelihood_fields
from prism.names import (
    CAUSAL_PREFIX,
    CONSISTENCY_PREFIX,
    METRIC_ACCURACY,
    METRIC_ANSWER_RECOVERY,
    METRIC_ANSWER_UNANIMOUS,
    METRIC_CLOZE_ACCURACY,
    METRIC_CLOZE_AGREEMENT,
    METRIC_CLOZE_NORM_ACCURACY,
    METRIC_COMPLETE_QUESTIONS,
    METRIC_COST_USD,
    METRIC_INSTRUCTION_COMPLIANCE,
    METRIC_LABEL_PROBS_MISSING,
    METRIC_LIKELIHOOD_ACCURACY,
    METRIC_MEAN_AGREEMENT,
    METRIC_MEAN_LABEL_MASS,
    METRIC_MEAN_PROB_TV,
    METRIC_MEAN_PROMPT_SENSITIVITY,
    METRIC_N_CLOZE,
    METRIC_N_QUESTIONS,
    METRIC_N_RESPONSES,
    METRIC_PROMPT_INVARIANT_INCORRECT,
    METRIC_QUESTION_MAJORITY_ACCURACY,
    METRIC_READING_AGREEMENT,
    METRIC_TOKENS_COMPLETION,
    METRIC_TOKENS_FROM_STORE_COMPLETION,
    METRIC_TOKENS_FROM_STORE_PROMPT,
    METRIC_TOKENS_PROMPT,
    METRIC_TOKENS_PROVIDER_CACHED,
    PARSE_METHOD_PREFIX,
    condition_metric,
)
from prism.parsing import METHODS, PARSER_VERSION, parse_response
from prism.questions import FrozenSet
from prism.records import RawRecord, ScoredRecord
from prism.results.cells_file import CELLS_FILE, CellsWriter
from prism.results.cloze_metrics import cloze_condition_table, cloze_frame, cloze_metrics, cloze_row
from prism.results.consistency import consistency_metrics, consistency_summary, question_consistency
from prism.results.metric_columns import MetricColumns
from prism.results.metrics import (
    NO_KEY,
    condition_table,
    parse_method_shares,
    question_table,
    summary_metrics,
)
from prism.results.roles import CAUSAL, invariant_conditions, role_table
from prism.results.scoring import score_record
from prism.types import Prompt


def score_all(records: Sequence[RawRecord], frozen: FrozenSet, condition_set: ConditionSet) -> list[ScoredRecord]:
    """Parse and score every raw record, in (condition, question, repetition) order.

    Args:
        records: Raw records of the run (any order; reused and fresh mixed).
        frozen: The frozen question set (the answer key lives here).
        condition_set: The conditions the prompts were rendered with; a causal step's prompt is scored
            against the key it moved to (:func:`prism.conditions.render_keyed`).

    Returns:
        Scored records (docs/architecture.md); their JSON leaves out the prompt text, which stays in
        ``responses.jsonl``.
    """
    order = {name: i for i, name in enumerate(condition_set.names)}
    position = {q.question_id: i for i, q in enumerate(frozen.questions)}
    ordered = sorted(records, key=lambda r: (order[r.condition], position[r.question_id], r.repetition))
    return list(score_records(ordered, frozen, condition_set))


def score_records(records: Iterable[RawRecord], frozen: FrozenSet, condition_set: ConditionSet,
                  prompts: Mapping[tuple[str, str], Prompt] | None = None) -> Iterator[ScoredRecord]:
    """Parse and score raw records one at a time, in the order given (:func:`score_all` sorts first).

    Args:
        records: Raw records of the run.
        frozen: The frozen question set (the answer key lives here).
        condition_set: The conditions the prompts were rendered with.
        prompts: The run's rendered prompts by (question id, condition), so they are not rendered twice;
            a prompt not in it is rendered here.

    Yields:
        Each record's scored record.

    Raises:
        ValueError: If a record's prompt renders differently now than when it was asked.
    """
    questions = {q.question_id: q for q in frozen.questions}
    conditions = {c.name: c for c in condition_set.conditions}
    rendered: dict[tuple[str, str], Prompt] = dict(prompts or {})
    # The key of each prompt: the question's own, or the option a causal step moved it to.
    answers: dict[tuple[str, str], str | None] = {}
    for raw in records:
        key = (raw.question_id, raw.condition)
        if key not in answers:  # once per prompt, not per cell
            condition = conditions[key[1]]
            if key not in rendered or _may_move_key(condition):  # a causal step's key comes from rendering
                keyed, answers[key] = render_keyed(questions[key[0]], condition, condition_set)
                rendered.setdefault(key, keyed)
            else:
                answers[key] = questions[key[0]].answer
        prompt, correct_answer = rendered[key], answers[key]
        if raw.prompt_sha256 != prompt.sha256:
            # Labels are mapped back through the re-rendered prompt: it must be the prompt the model saw.
            raise ValueError(f"question {key[0]!r}, condition {key[1]!r}: the prompt renders differently now "
                             "than when it was asked; the labels cannot be mapped back safely")
        parsed = None
        if raw.error is None and raw.response is not None:
            parsed = parse_response(raw.response, prompt.displayed_labels, prompt.displayed_options,
                                    finish_reason=raw.finish_reason)
        record = score_record(raw, prompt, parsed, correct_answer, PARSER_VERSION)
        likelihood = likelihood_fields({"label_probs": raw.label_probs} if raw.error is None else {}, prompt,
                                       correct_answer)
        cloze = cloze_fields({"cloze_logprobs": raw.cloze_logprobs, "cloze_chars": raw.cloze_chars,
                               "error": raw.error}, prompt, correct_answer) if raw.cloze_logprobs else {}
        extra = {**likelihood, **cloze}
        yield dataclasses.replace(record, **extra) if extra else record


def _may_move_key(condition: Condition) -> bool:
    """Whether a condition has a step that may move the correct option (a causal step, attribute ``answer``)."""
    steps = [*(condition.steps or ()), *(step for part in condition.parts for step in part.steps)]
    return any(isinstance(step, RemoveAnswer) for step in steps)


def write_results(out: Path, scored: Iterable[ScoredRecord], frozen: FrozenSet, condition_set: ConditionSet,
                  repetitions: int) -> dict[str, float]:
    """Write ``results/`` (scored.jsonl, cells.parquet, question and condition metrics, consistency), return metrics.

    The scored records are written one at a time as they come; what the metrics read of each (its cell,
    answer and flags, :data:`prism.results.metric_columns.METRIC_COLUMNS`) is kept in columns, never the records.

    Consistency with the baseline (``prism.results.consistency``) goes to ``consistency.csv`` (per family and
    variant) and ``consistency_questions.csv`` (per question and family), and into the metrics as
    ``consistency/<family>`` and ``consistency/<family>/<variant>``.
    """
    results = out / "results"
    results.mkdir(parents=True, exist_ok=True)
    columns = MetricColumns()
    cloze_rows: list[dict[str, Any]] = []  # generation.cloze=true: a few columns per cell (prism.results.cloze_metrics)
    # The same records as columns beside the evidence (prism.results.cells_file), written as they come.
    with (results / "scored.jsonl").open("w", encoding="utf-8") as handle, CellsWriter(results / CELLS_FILE) as cells:
        for scored_record in scored:
            record = scored_record.to_json()
            handle.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
            cells.add(record)
            columns.add(record)
            row = cloze_row(record) if "cloze_source" in record else None
            if row is not None:
                cloze_rows.append(row)
    frame = columns.frame()
    ids = [q.question_id for q in frozen.questions]
    names = condition_set.names
    # Answers are compared across conditions only where they share one key: the invariant conditions.
    roles = role_table(frame, names, condition_set.baseline)
    roles.to_csv(results / "roles.csv", index=False)
    invariant = invariant_conditions(roles)
    shared = frame[frame["condition"].isin(invariant)] if len(frame) else frame
    question_table(shared, invariant, ids, repetitions).to_csv(results / "question_metrics.csv", index=False)
    condition_table(frame, names).to_csv(results / "condition_metrics.csv", index=False)
    metrics = summary_metrics(frame, names, ids, repetitions, question_conditions=invariant)
    metrics.update(parse_method_shares(frame, METHODS))
    # Consistency with the baseline, per perturbation family.
    families, baseline = condition_set.families, condition_set.baseline
    question_consistency(frame, families, baseline, ids).to_csv(results / "consistency_questions.csv", index=False)
    consistency = consistency_summary(frame, families, baseline, ids)
    consistency.to_csv(results / "consistency.csv", index=False)
    metrics.update(consistency_metrics(consistency))
    if columns.label_probs:  # a run with generation.label_probs=true
        metrics.update(write_likelihood_results(results, frame, columns.bias_records, frozen, condition_set,
                                                repetitions, invariant))
    if cloze_rows:  # a run with generation.cloze=true: the third reading
        cloze = cloze_frame(cloze_rows)
        cloze_condition_table(cloze, names).to_csv(results / "cloze.csv", index=False)
        metrics.update(cloze_metrics(cloze, names))
    # Only a run with causal conditions logs these, so every other run keeps exactly the metrics it had.
    metrics.update({CAUSAL_PREFIX + name: float(count) for name, role, count in
                    zip(roles["condition"], roles["role"], roles["moved_questions"], strict=True) if role == CAUSAL})
    return metrics


def write_likelihood_results(results: Path, frame: pd.DataFrame, scored: Sequence[Mapping[str, Any]],
                             frozen: FrozenSet, condition_set: ConditionSet, repetitions: int,
                             invariant: Sequence[str] | None = None) -> dict[str, float]:
    """Write ``likelihood.csv`` (both readings per condition) and ``position_bias.csv``; return the metrics."""
    from prism.results.label_prob_metrics import bias_table, likelihood_condition_table, likelihood_metrics

    ids = [q.question_id for q in frozen.questions]
    names, baseline = condition_set.names, condition_set.baseline
    likelihood_condition_table(frame, names, baseline).to_csv(results / "likelihood.csv", index=False)
    bias_table(bias_cells(scored, frozen, condition_set)).to_csv(results / "position_bias.csv", index=False)
    return likelihood_metrics(frame, names, ids, repetitions, baseline, question_conditions=invariant)


def bias_cells(scored: Sequence[Mapping[str, Any]], frozen: FrozenSet, condition_set: ConditionSet) -> pd.DataFrame:
    """One row per (record with probabilities, displayed position).

    The cells :func:`prism.results.label_prob_metrics.bias_table` reads.
    """
    questions = {q.question_id: q for q in frozen.questions}
    conditions = {c.name: c for c in condition_set.conditions}
    prompts: dict[tuple[str, str], Prompt] = {}
    rows = []
    for record in scored:
        if record.get("error") is not None or record.get("likelihood_answer") is None:
            continue
        key = (record["question_id"], record["condition"])
        if key not in prompts:
            prompts[key] = render(questions[key[0]], conditions[key[1]], condition_set)
        prompt = prompts[key]
        baseline = prompts.setdefault((key[0], condition_set.baseline),
                                      render(questions[key[0]], conditions[condition_set.baseline], condition_set))
        for position, (label, option) in enumerate(zip(prompt.displayed_labels, prompt.canonical_labels,
                                                       strict=True), start=1):
            rows.append({"condition": key[1], "question_id": key[0], "repetition": record["repetition"],
                         "position": position, "label": label, "option": option,
                         "prob": float(record["label_probs"].get(label, 0.0)),
                         "likelihood": record["likelihood_answer"] == option, "parsed": record.get("answer") == option,
                         "correct": record["correct_answer"] == option,
                         "baseline_labels": prompt.displayed_labels == baseline.displayed_labels})
    return pd.DataFrame(rows)


def _pct(value: float | None) -> str:
    """A rate as a percentage; a metric absent because the items have no answer key says so."""
    if value is None:
        return NO_KEY
    return percent(value, 1, dash="n/a").rjust(6)


def _cell(value: float | None) -> str:
    """A rate in a table column: the header already says why a keyless run's accuracy is absent."""
    return "n/a" if value is None else _pct(value)


def format_summary(metrics: Mapping[str, float], conditions: Sequence[str]) -> str:
    """The terminal summary: a per-condition table, then the question-level metrics."""
    width = max([10, *(len(name) for name in conditions)])  # perturbation variants have long names
    lines = [f"{'condition':<{width}} {'accuracy':>9} {'recovered':>10} {'compliant':>10}"]
    if METRIC_ACCURACY not in metrics:
        lines[0] += f"   (accuracy: {NO_KEY})"
    for name in conditions:
        lines.append(
            f"{name:<{width}} {_cell(metrics.get(condition_metric(METRIC_ACCURACY, name))):>9} "
            f"{_pct(metrics[condition_metric(METRIC_ANSWER_RECOVERY, name)]):>10} "
            f"{_pct(metrics[condition_metric(METRIC_INSTRUCTION_COMPLIANCE, name)]):>10}"
        )
    lines.append(
        f"{'all':<{width}} {_cell(metrics.get(METRIC_ACCURACY)):>9} {_pct(metrics[METRIC_ANSWER_RECOVERY]):>10} "
        f"{_pct(metrics[METRIC_INSTRUCTION_COMPLIANCE]):>10}"
    )
    causal = [name for name in conditions if CAUSAL_PREFIX + name in metrics]
    lines += [""]
    if causal:  # question-level metrics compare answers that share one key: the invariant conditions only
        invariant = [name for name in conditions if name not in causal]
        lines += [f"causal conditions (a step moved the correct answer): {', '.join(causal)}; their accuracy is "
                  "against the moved key, and prism-compare reads them through their roles (comparison/roles.csv).",
                  f"the question-level metrics below are over the invariant conditions only: {', '.join(invariant)}"
                  + (" (one condition: agreement across it is complete by construction)" if len(invariant) == 1
                     else "")]
    lines += [
        f"questions: {int(metrics[METRIC_N_QUESTIONS])} frozen, {int(metrics[METRIC_COMPLETE_QUESTIONS])} complete; "
        f"responses observed: {int(metrics[METRIC_N_RESPONSES])}",
        f"question majority accuracy:        {_pct(metrics.get(METRIC_QUESTION_MAJORITY_ACCURACY))}",
        f"mean agreement across conditions:  {_pct(metrics[METRIC_MEAN_AGREEMENT])}",
        f"mean prompt sensitivity:           {_pct(metrics[METRIC_MEAN_PROMPT_SENSITIVITY])}",
        f"answer unanimous across conditions:{_pct(metrics[METRIC_ANSWER_UNANIMOUS])}",
        f"prompt-invariant incorrect:        {_pct(metrics.get(METRIC_PROMPT_INVARIANT_INCORRECT))}",
    ]
    methods = sorted(((name.split("/", 1)[1], value) for name, value in metrics.items()
                      if name.startswith(PARSE_METHOD_PREFIX) and value > 0), key=lambda item: -item[1])
    if methods:
        lines += ["", "how the parser read the responses: " + ", ".join(f"{m} {_pct(v).strip()}" for m, v in methods)]
    if METRIC_LIKELIHOOD_ACCURACY in metrics:  # generation.label_probs=true: the second reading, per condition
        lines += ["", "label probabilities (the first token's likeliest option beside the parsed answer):",
                  f"{'condition':<{width}} {'parsed':>9} {'likelihood':>11} {'agree':>7} {'mass':>7}"]
        for name in [*conditions, "all"]:
            suffix = "" if name == "all" else f"/{name}"
            lines.append(f"{name:<{width}} {_pct(metrics[METRIC_ACCURACY + suffix]):>9} "
                         f"{_pct(metrics[METRIC_LIKELIHOOD_ACCURACY + suffix]):>11} "
                         f"{_pct(metrics[METRIC_READING_AGREEMENT + suffix]):>7} "
                         f"{_pct(metrics[METRIC_MEAN_LABEL_MASS + suffix]):>7}")
        lines.append(f"mean TV distance to the baseline's option distribution:{_pct(metrics[METRIC_MEAN_PROB_TV])}; "
                     f"cells without label probabilities: {int(metrics[METRIC_LABEL_PROBS_MISSING])}")
    if METRIC_N_CLOZE in metrics:  # generation.cloze=true: the third reading, per condition
        lines += ["", "cloze reading (each option's continuation log-likelihood, as lm-evaluation-harness scores it):",
                  f"{'condition':<{width}} {'parsed':>9} {'acc':>7} {'acc_norm':>9} {'agree':>7}"]
        for name in [*conditions, "all"]:
            suffix = "" if name == "all" else f"/{name}"
            lines.append(f"{name:<{width}} {_cell(metrics.get(METRIC_ACCURACY + suffix)):>9} "
                         f"{_cell(metrics.get(METRIC_CLOZE_ACCURACY + suffix)):>7} "
                         f"{_cell(metrics.get(METRIC_CLOZE_NORM_ACCURACY + suffix)):>9} "
                         f"{_cell(metrics.get(METRIC_CLOZE_AGREEMENT + suffix)):>7}")
    consistency = [(name.split("/")[1:], value) for name, value in metrics.items()
                   if name.startswith(CONSISTENCY_PREFIX)]
    if consistency:
        lines += ["", "consistency with the baseline (same canonical answer; UNKNOWN is an answer of its own):"]
        lines += [f"  {parts[0]:<14} {_pct(value)}" if len(parts) == 1 else f"    {parts[1]:<16} {_pct(value)}"
                  for parts, value in consistency]
        if causal:
            lines.append(f"  ({', '.join(causal)}: causal, so a model that follows the moved answer differs from "
                         "the baseline by design)")
    lines += format_usage(metrics)
    return "\n".join(lines)


def format_usage(metrics: Mapping[str, float]) -> list[str]:
    """The summary's token and cost lines (``prism.run.usage``), or none for metrics without them."""
    if METRIC_TOKENS_PROMPT not in metrics:
        return []
    lines = ["", f"tokens asked in this run: {int(metrics[METRIC_TOKENS_PROMPT])} prompt, "
                 f"{int(metrics[METRIC_TOKENS_COMPLETION])} completion"
                 + (f" ({int(metrics[METRIC_TOKENS_PROVIDER_CACHED])} prompt tokens from the provider's cache)"
                    if METRIC_TOKENS_PROVIDER_CACHED in metrics else ""),
             f"tokens of cells from the store: {int(metrics[METRIC_TOKENS_FROM_STORE_PROMPT])} prompt, "
             f"{int(metrics[METRIC_TOKENS_FROM_STORE_COMPLETION])} completion"]
    if METRIC_COST_USD in metrics:
        lines.append(f"cost of this run at model.pricing: ${metrics[METRIC_COST_USD]:.4f}")
    return lines
