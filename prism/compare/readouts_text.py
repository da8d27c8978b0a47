"""The read-outs (:mod:`prism.compare.readouts`) as text for the terminal, each under a heading that names its CSV."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from prism import formatting
from prism.stats.basics import SIGNIFICANCE

if TYPE_CHECKING:
    from prism.compare.comparison_tables import ReadoutTables

# Scorecard rows the terminal prints (the CSV has them all).
SCORECARD_ROWS = 40


def render_table(frame: pd.DataFrame) -> str:
    """A plain text table, every column left-aligned (pandas right-aligns text, which hides the intervals)."""
    columns = [str(c) for c in frame.columns]
    cells = [[str(v) for v in row] for row in frame.itertuples(index=False)]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines)


def _ci(value: Any, low: Any, high: Any, signed: bool = False) -> str:
    return formatting.with_interval(value, low, high, digits=3, signed=signed, dash="-")


def _notes(table: pd.DataFrame) -> list[str]:
    """Each distinct note of a table once, as indented lines."""
    notes = [str(n) for n in dict.fromkeys(table["note"].astype(object).fillna("")) if str(n)]
    return [f"  note: {n}" for n in notes]


def format_scorecard(table: pd.DataFrame, limit: int = SCORECARD_ROWS) -> str:
    """The scorecard, one column per metric, each value with its interval; the first ``limit`` rows."""
    shown = table.assign(cell=[_ci(v, lo, hi) for v, lo, hi in
                               zip(table["value"], table["ci_low"], table["ci_high"], strict=True)])
    wide = shown.pivot_table(index=["model", "condition"], columns="metric", values="cell", aggfunc="first",
                             sort=False).reset_index().rename_axis(columns=None).fillna("-")
    lines = [render_table(wide.head(limit))]
    if len(wide) > limit:
        lines.append(f"  ... {len(wide) - limit} more rows in comparison/scorecard.csv")
    return "\n".join(lines)


def format_axes(table: pd.DataFrame) -> str:
    """The axes of each model ranked by their largest excess (or between, without repetitions)."""
    shown = pd.DataFrame({
        "model": table["model"], "measure": table["measure"], "rank": table["rank"], "axis": table["axis"],
        "largest [95% CI]": [_ci(v, lo, hi, signed=s == "excess") + ("" if s == "excess" else " (between)")
                             for v, lo, hi, s in zip(table["largest"], table["ci_low"], table["ci_high"],
                                                     table["statistic"], strict=True)],
        "at step": table["from_condition"].astype(str) + " -> " + table["to_condition"].astype(str),
        "shifts": [f"{s}/{n}" for s, n in zip(table["n_shifts"], table["n_steps"], strict=True)],
    })
    return render_table(shown)


def format_measure_agreement(table: pd.DataFrame) -> str:
    """Both / only one / neither per pair of measures, with kappa; the notes beneath."""
    shown = pd.DataFrame({
        "model": table["model"], "measures": [f"{a} vs {b}" if isinstance(b, str) and b else str(a)
                                              for a, b in zip(table["measure_a"], table["measure_b"], strict=True)],
        "steps": table["steps"].map(lambda v: formatting.number(v, 0, dash="-")),
        "both/only a/only b/neither": [
            "-" if pd.isna(both) else f"{int(both)}/{int(a)}/{int(b)}/{int(n)}" for both, a, b, n in
            zip(table["both"], table["only_a"], table["only_b"], table["neither"], strict=True)],
        "shifts a/b": [f"{formatting.number(a, 0, dash='-')}/{formatting.number(b, 0, dash='-')}"
                       for a, b in zip(table["shifts_a"], table["shifts_b"], strict=True)],
        "kappa": table["kappa"].map(lambda v: formatting.number(v, 3, dash="-")),
    })
    return "\n".join([render_table(shown), *_notes(table)])


def format_divergence_noise(table: pd.DataFrame) -> str:
    """Per pair, condition and measure: between, each model's noise, the excess with its interval."""
    shown = pd.DataFrame({
        "pair": table["model_a"] + " vs " + table["model_b"], "condition": table["condition"],
        "measure": table["measure"], "between": table["between"].map(lambda v: formatting.number(v, 3, dash="-")),
        "noise a/b": [f"{formatting.number(a, 3, dash='-')}/{formatting.number(b, 3, dash='-')}"
                      for a, b in zip(table["within_a"], table["within_b"], strict=True)],
        "excess [95% CI]": [_ci(v, lo, hi, signed=True) if not pd.isna(v) else "-" for v, lo, hi in
                            zip(table["excess"], table["excess_ci_low"], table["excess_ci_high"], strict=True)],
        "p_holm": table["p_holm"].map(lambda v: formatting.p_value(v, sci_digits=2, dash="-")),
        "verdict": ["BEYOND NOISE" if v else "-" for v in table["beyond_noise"]],
    })
    return "\n".join([render_table(shown), *_notes(table)])


def format_readouts(tables: ReadoutTables, n_boot: int) -> list[str]:
    """The read-out sections of the terminal output, in order (empty for tables the comparison lacks)."""
    parts: list[str] = []
    if tables.scorecard is not None and len(tables.scorecard):
        parts += ["", f"Scorecard (comparison/scorecard.csv): each metric with its 95% bootstrap interval over "
                      f"questions (B={n_boot}); 'all' pools the conditions:", format_scorecard(tables.scorecard)]
    if tables.sensitivity_axes is not None and len(tables.sensitivity_axes):
        parts += ["", "Axes ranked by their largest excess (comparison/sensitivity_axes.csv), per model and measure; "
                      "shifts = steps that shift / steps:", format_axes(tables.sensitivity_axes)]
    if tables.measure_agreement is not None:
        parts += ["", "Do the measures find the same shifts? (comparison/measure_agreement.csv): steps both, only "
                      "one or neither measure call a shift, Cohen's kappa of the verdicts:",
                  format_measure_agreement(tables.measure_agreement)]
    if tables.divergence_noise is not None and len(tables.divergence_noise):
        parts += ["", "Divergence beyond noise (comparison/divergence_noise.csv): cross-model difference minus the "
                      "mean of both models' own difference between repetitions;\nBEYOND NOISE = excess > 0 with Holm p "
                      f"< {SIGNIFICANCE} over the pair's conditions:",
                  format_divergence_noise(tables.divergence_noise)]
    return parts
