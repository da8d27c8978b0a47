"""``comparison/report.html``: the comparison as one self-contained page a person reads from top to bottom.

Order of the page: a short summary; per model, a descriptive reading of its question-level metrics
(:mod:`prism.compare.readings`); the result tables and figures; everything needed to reproduce or
compare the runs (ids, digests, dataset version, question set, seeds, templates, generation parameters,
versions); how the numbers were computed; and what PRISM does not claim. The page is the Jinja2
template ``prism/templates/report.html.j2`` over the section templates it shares with the published site;
:mod:`prism.compare.report_sections` turns the tables and the :class:`~prism.compare.evidence.ReportContext`
into the values they show, and :mod:`prism.render` renders them, escaping every value.

What the page shows of each compared run is read through MLflow (:mod:`prism.compare.evidence`), never
from local files, so a comparison of runs made on other machines reports them as they were logged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from prism.compare import report_sections as sections
from prism.compare.differences_file import listed_count
from prism.compare.evidence import ReportContext, models_numbers
from prism.compare.groups import coverage_lines
from prism.compare.readings import THRESHOLDS, ModelNumbers, Reading, read_patterns
from prism.compare.readout_sections import anchor, readout_context
from prism.compare.tables import cap_note, pairing_note
from prism.formatting import NO_KEY, number, p_value
from prism.names import (
    METRIC_ACCURACY,
    METRIC_N_QUESTIONS,
    PARSE_METHOD_PREFIX,
    LoggedRun,
)
from prism.parsing import UNKNOWN_METHODS
from prism.stats.basics import SIGNIFICANCE

if TYPE_CHECKING:
    from prism.compare.comparison_tables import ComparisonTables

REPORT_HTML = "report.html"
# A summary point is made of parts: ("text", s), ("strong", s) or ("ci", value, low, high, signed).
Part = tuple[Any, ...]


def unknown_methods(metrics: Mapping[str, float]) -> str:
    """Why responses were UNKNOWN, from the run's ``parse_method/<method>`` shares ("" if not logged).

    The rules that recover nothing, largest first: "; UNKNOWN as none 12%, enumeration 5%".
    """
    shares = sorted(((name.split("/", 1)[1], value) for name, value in metrics.items()
                     if name.startswith(PARSE_METHOD_PREFIX) and name.split("/", 1)[1] in UNKNOWN_METHODS
                     and value > 0),
                    key=lambda item: -item[1])
    return "; UNKNOWN as " + ", ".join(f"{name} {value:.0%}" for name, value in shares) if shares else ""


def run_description(runs: Sequence[LoggedRun]) -> str:
    """The comparison run's MLflow description (Markdown): what was compared and where the report is."""
    labels = [r.label for r in runs]
    named = " and ".join([", ".join(labels[:-1]), labels[-1]] if len(labels) > 2 else labels)
    return (f"PRISM comparison of {named} on {_common([r.dataset or '?' for r in runs])}. "
            f"The result page is **Artifacts → comparison/{REPORT_HTML}**: summary, readings per model, "
            "tables and figures, everything needed to reproduce the runs, and what PRISM does not claim.")


def write_report(out: Path, tables: ComparisonTables, figures: Sequence[Path],
                 context: ReportContext) -> Path:
    """Write ``report.html`` into ``out`` and return its path.

    Args:
        out: The comparison's output directory (``comparison/``).
        tables: The comparison tables (:func:`prism.compare.core.build_tables`).
        figures: The PNG figures to embed.
        context: The runs and settings behind them.
    """
    from prism.compare.power_section import power_section
    from prism.compare.profile_plot import PROFILE_PNG, profile_panels
    from prism.compare.role_tables import roles_note
    from prism.render import render

    numbers = models_numbers(context.evidence, context.n_boot, context.seed)
    readings = [read_patterns(n) for n in numbers]
    runs = [item.run for item in context.evidence]
    dataset = _common([r.dataset or "?" for r in runs])
    title = f"PRISM comparison: {' vs '.join(r.label for r in runs)} on {dataset}"
    probabilities = tables.readings is not None and len(tables.readings) > 0
    present = [anchor for anchor, _ in sections.SECTIONS
               if (anchor != "differences" or tables.differences is not None)
               and (anchor != "answer-readings" or probabilities)]
    groups = sections.difference_groups(tables.differences, {k: v for item in context.evidence
                                                                 for k, v in item.questions.items()}) \
        if tables.differences is not None else None
    text = render(
        "report.html.j2", title=title, csp=None, stylesheet=None,
        subtitle=f"Comparison run {context.run_id} · experiment {context.experiment_id} · made "
                 f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC by PRISM {context.prism_version} "
                 f"(commit {context.git_commit[:12]})",
        nav=sections.navigation(present), mismatches=context.mismatches,
        points=summary_points(tables, context, numbers, readings),
        coverage=coverage_lines(tables.question_sets), notes=context.notes,
        cards=sections.reading_cards(numbers, readings), rules=sections.pattern_rules(THRESHOLDS),
        sensitivity_models=sections.sensitivity_models(tables), baseline=context.baseline, significance=SIGNIFICANCE,
        figures={METRIC_ACCURACY: sections.figure_uri(figures, "accuracy_heatmap.png"),
                 "flip": sections.figure_uri(figures, "flip_rate_heatmap.png"),
                 "divergence": sections.figure_uri(figures, "divergence_matrix.png"),
                 "profile": sections.figure_uri(figures, PROFILE_PNG)},
        profile_panels=profile_panels(tables),
        role_rows=tables.roles.to_dict("records") if len(tables.roles) else [],
        role_note=roles_note(tables.roles) if len(tables.roles) else "",
        divergence_pairs=sections.divergence_pairs(tables) if tables.divergence is not None else None,
        no_pairs=("No two compared runs are on the same frozen question set, so no cells pair: see the summary "
                  "for which tables hold which runs." if len(runs) >= 2 else
                  "One run was compared: there is no other model to diverge from."),
        difference_groups=groups, listed=min(listed_count(tables), sections.TOP_DIFFERENCES),
        total_differences=listed_count(tables),
        pairing_note=pairing_note(tables), cap_note=cap_note(tables),
        runs=runs, setup_rows=sections.setup_rows(context.evidence), problems=sections.problems(context.evidence),
        settings=sections.comparison_settings(context), template_groups=sections.template_groups(context.evidence),
        method_items=sections.method_items(context.n_boot, context.seed), not_claimed=sections.NOT_CLAIMED,
        sampling=sections.sampling_used(context.evidence), run_id=context.run_id,
        readout=readout_context(tables.readouts()), anchor=anchor, power_rows=power_section(tables),
        two_readings=two_readings_section(tables, context) if probabilities else None,
    )
    path = out / REPORT_HTML
    path.write_text(text, encoding="utf-8")
    return path


def two_readings_section(tables: ComparisonTables, context: ReportContext) -> dict[str, Any]:
    """The readings section's values (:mod:`prism.compare.two_readings`), from readings.csv and its parted cells."""
    from prism.compare import two_readings

    parted = tables.reading_disagreements if tables.reading_disagreements is not None else pd.DataFrame()
    cloze = tables.cloze_disagreements
    questions = {k: v for item in context.evidence for k, v in item.questions.items()}
    rows = two_readings.report_rows(tables.readings if tables.readings is not None else pd.DataFrame())
    return {"rows": rows,
            "cells": two_readings.parted(parted.to_dict("records"), questions), "total": len(parted),
            "measures": two_readings.shown_measures(rows), "keyed": two_readings.KEYED, "baseline": context.baseline,
            "whole_in": "comparison/reading_disagreements.csv",
            "label_probs": any(r.n_label_probs for r in rows), "cloze": cloze is not None,
            "cloze_cells": two_readings.cloze_parted(cloze.to_dict("records"), questions) if cloze is not None else [],
            "cloze_total": len(cloze) if cloze is not None else 0,
            "cloze_whole_in": "comparison/cloze_disagreements.csv"}


def summary_points(tables: ComparisonTables, context: ReportContext, numbers: Sequence[ModelNumbers],
                   readings: Sequence[Reading]) -> list[list[Part]]:
    """The few sentences a reader needs first: what was compared, how each model reads, how they differ."""
    runs = [item.run for item in context.evidence]
    n_questions = int(max((item.metrics.get(METRIC_N_QUESTIONS, 0.0) for item in context.evidence), default=0))
    conditions = ", ".join(runs[0].conditions) if runs else ""
    question_sets = tables.question_sets if tables.question_sets is not None else pd.DataFrame()
    if len(question_sets) > 1:
        where = "; ".join(f"{row['dataset']} ({row['dataset_type']}, {row['n_questions']} questions): {row['runs']}"
                          for row in question_sets.to_dict("records"))
        opening = (f"{len(runs)} runs on {len(question_sets)} frozen question sets -- {where} -- each asked under "
                   f"the conditions {conditions}")
    else:
        dataset = _common([r.dataset or "?" for r in runs])
        opening = (f"{len(runs)} run(s) on the same {n_questions} frozen {dataset} questions, "
                   f"each asked under the conditions {conditions}")
    points: list[list[Part]] = [[("text", f"{opening}; {context.baseline} is the baseline. Numbers are proportions "
                                          "with 95% intervals in brackets.")]]
    sensitivity = tables.sensitivity
    for item, model, reading in zip(context.evidence, numbers, readings, strict=True):
        rows = sensitivity[sensitivity["model"] == model.label]
        others = rows[rows["condition"] != rows["baseline"]]
        base = rows[rows["condition"] == rows["baseline"]]
        pattern = (f"reads as {' and also '.join(f'“{p}”' for p in reading.patterns)}" if reading.patterns
                   else "fits none of the four patterns" if reading.gap else "cannot be read as a pattern")
        acc, agree = model.majority_accuracy, model.agreement
        parts: list[Part] = [("strong", model.label)]
        if model.no_key:
            parts.append(("text", f" {pattern}: its items have no answer key, so its accuracy is {NO_KEY}"))
        else:
            parts += [("text", f" {pattern}: the majority answer is right on "),
                      ("ci", acc.value, acc.ci_low, acc.ci_high, False), ("text", " of questions")]
        parts += ([("text", " and answers agree across conditions at "),
                   ("ci", agree.value, agree.ci_low, agree.ci_high, False), ("text", ".")]
                  if not math.isnan(agree.value) else [("text", "; no answer was recovered to compare across "
                                                                "conditions.")])
        if not math.isnan(model.recovery) and model.recovery < THRESHOLDS.recovery:
            parts.append(("text", f" Only {model.recovery:.0%} of its responses had a recoverable answer"
                                  f"{unknown_methods(item.metrics)}."))
        if not base.empty and not model.no_key:
            parts.append(("text", f" Accuracy under {context.baseline}: {number(base['accuracy'].iloc[0])}."))
        if not others.empty and float(others["flip_rate"].fillna(0).max()) == 0.0:
            parts.append(("text", f" No condition changed any answer given under {context.baseline}."))
        elif not others.empty and model.no_key:
            top = others.iloc[int(others["flip_rate"].fillna(-1.0).to_numpy().argmax())]
            parts += [("text", f" Largest change: {top['condition']}, flip rate "),
                      ("ci", top["flip_rate"], top["flip_ci_low"], top["flip_ci_high"], False), ("text", ".")]
        elif not others.empty:
            top = others.iloc[0]  # ranked by effect size
            parts += [("text", f" Largest change: {top['condition']}, accuracy "),
                      ("ci", top["delta_accuracy"], top["delta_ci_low"], top["delta_ci_high"], True),
                      ("text", ", flip rate "),
                      ("ci", top["flip_rate"], top["flip_ci_low"], top["flip_ci_high"], False),
                      ("text", f" (Holm-adjusted McNemar p = {p_value(top['mcnemar_p_holm'])}).")]
        points.append(parts)
    if tables.divergence is not None:
        pooled = tables.divergence[tables.divergence["condition"] == "all"]
        for row in pooled.itertuples(index=False):
            points.append([("text", f"{row.model_a} and {row.model_b} give different answers in "),
                           ("ci", row.disagreement, row.disagreement_ci_low, row.disagreement_ci_high, False),
                           ("text", " of paired cells; excess over each model's disagreement with itself across "
                                    "conditions: "),
                           ("ci", row.excess, row.excess_ci_low, row.excess_ci_high, True), ("text", ".")])
    if 0 < n_questions < 50:
        points.append([("text", f"With {n_questions} questions the 95% intervals are wide: a difference inside "
                                "them is not evidence of a difference.")])
    return points


def _common(names: Sequence[str]) -> str:
    """One name when every run has it, else each once, in order (``a / b``)."""
    values = list(dict.fromkeys(names))
    return values[0] if len(values) == 1 else " / ".join(values)
