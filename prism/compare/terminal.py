"""The comparison as text for the terminal: the runs, the tables of the CSV files, the top differences.

Each value is printed with its interval beside it so a row reads on its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from prism.compare.core import ComparisonResult
from prism.compare.select import RunSummary

# How many rows of the differences table the terminal shows (the CSV has them all).
TOP_DIFFERENCES = 8


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _num(value: Any, digits: int = 3, signed: bool = False) -> str:
    if _missing(value):
        return "-"
    return f"{float(value):{'+' if signed else ''}.{digits}f}"


def _p(value: Any) -> str:
    if _missing(value):
        return "-"
    number = float(value)
    return f"{number:.2e}" if number < 1e-3 else f"{number:.3f}"


def _with_ci(value: Any, low: Any, high: Any, signed: bool = False) -> str:
    """``value [low, high]``; differences (which can be negative) are signed so the columns line up."""
    if _missing(value):
        return "-"
    return f"{_num(value, signed=signed)} [{_num(low, signed=signed)}, {_num(high, signed=signed)}]"


def _snippet(text: Any, width: int = 40) -> str:
    if not isinstance(text, str):
        return "-"
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= width else flat[: width - 3] + "...")


def render(frame: pd.DataFrame) -> str:
    """A plain text table, every column left-aligned (pandas right-aligns text, which hides the intervals)."""
    columns = [str(c) for c in frame.columns]
    cells = [[str(v) for v in row] for row in frame.itertuples(index=False)]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines)


def format_runs(runs: Sequence[RunSummary]) -> str:
    """One line per compared run: label, id, dataset, question set, conditions."""
    lines = []
    for run in runs:
        lines.append(f"  {run.label:<20} {run.run_id}  {run.params.get('dataset.name', '?')}"
                     f" n={run.params.get('dataset.n', '?')}  question set {run.question_set[:12] or '?'}"
                     f"  conditions {','.join(run.conditions) or '?'}")
    return "\n".join(lines)


def format_sensitivity(table: pd.DataFrame) -> str:
    """The sensitivity table with intervals inline."""
    shown = pd.DataFrame({
        "model": table["model"], "condition": table["condition"],
        "accuracy": table["accuracy"].map(_num),
        "delta_accuracy [95% CI]": [_with_ci(*r, signed=True) for r in
                                    zip(table["delta_accuracy"], table["delta_ci_low"], table["delta_ci_high"],
                                        strict=True)],
        "mcnemar_p": table["mcnemar_p"].map(_p), "p_holm": table["mcnemar_p_holm"].map(_p),
        "flip_rate [95% CI]": [_with_ci(*r) for r in
                               zip(table["flip_rate"], table["flip_ci_low"], table["flip_ci_high"], strict=True)],
    })
    return render(shown)


def format_divergence(table: pd.DataFrame) -> str:
    """The divergence table with intervals inline and the four counts as correct-both/a/b/neither."""
    shown = pd.DataFrame({
        "model_a": table["model_a"], "model_b": table["model_b"], "condition": table["condition"],
        "disagreement [95% CI]": [_with_ci(*r) for r in zip(table["disagreement"], table["disagreement_ci_low"],
                                                            table["disagreement_ci_high"], strict=True)],
        "answered": table["disagreement_answered"].map(_num),
        "kappa": table["kappa"].map(_num),
        "both/only_a/only_b/neither": [f"{a}/{b}/{c}/{d}" for a, b, c, d in
                                       zip(table["both_correct"], table["only_a"], table["only_b"],
                                           table["both_wrong"], strict=True)],
        "excess [95% CI]": [_with_ci(*r, signed=True) for r in
                            zip(table["excess"], table["excess_ci_low"], table["excess_ci_high"], strict=True)],
    })
    return render(shown)


def format_differences(table: pd.DataFrame, limit: int = TOP_DIFFERENCES) -> str:
    """The first rows of the differences table, responses shortened."""
    head = table.head(limit)
    shown = pd.DataFrame({
        "models": head["model_a"] + " vs " + head["model_b"], "question_id": head["question_id"],
        "q_disagree": head["question_disagreement"].map(lambda v: _num(v, 2)),
        "condition": head["condition"], "key": head["correct_answer"],
        "a": head["answer_a"], "b": head["answer_b"],
        "response_a": head["response_a"].map(_snippet), "response_b": head["response_b"].map(_snippet),
    })
    return render(shown)


def format_comparison(result: ComparisonResult) -> str:
    """Everything the terminal shows after a comparison."""
    tables = result.tables
    parts = [f"Compared {len(result.runs)} run(s):", format_runs(result.runs)]
    if result.mismatches:
        parts += ["", "WARNING: compared despite mismatches (allow_mismatch=true):",
                  *[f"  - {m}" for m in result.mismatches]]
    parts += ["", f"Condition sensitivity against {result.baseline}: 95% paired bootstrap intervals over questions "
                  f"(B={result.n_boot}),\nexact McNemar p with Holm within each model, conditions ranked by effect:",
              format_sensitivity(tables["sensitivity"])]
    if "divergence" in tables:
        parts += ["", "Cross-model divergence: UNKNOWN is an answer of its own, 'all' pools the shared conditions,\n"
                      "excess = disagreement - mean of the models' own across-condition disagreement:",
                  format_divergence(tables["divergence"])]
        differences = tables["differences"]
        parts += ["", f"Where the models differ most ({len(differences)} differing cells; all in "
                      "comparison/differences.csv with prompts and full responses):"]
        parts.append(format_differences(differences) if len(differences) else "  (nowhere: every answer agrees)")
    parts += ["", f"Comparison run {result.run_id} (experiment id {result.experiment_id}); files in "
                  f"{result.output_dir / 'comparison'}",
              f"Open it: mlflow ui --backend-store-uri {result.tracking_uri}",
              f"         then http://127.0.0.1:5000/#/experiments/{result.experiment_id}/runs/{result.run_id}"]
    return "\n".join(parts)
