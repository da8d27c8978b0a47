"""``comparison/report.html``: the comparison as one self-contained page a person reads from top to bottom.

Order of the page: a short summary; per model, a descriptive reading of its question-level metrics
(:mod:`prism.compare.readings`); the result tables and figures; everything needed to reproduce or
compare the runs (ids, digests, dataset version, question set, seeds, templates, generation parameters,
versions); how the numbers were computed; and what PRISM does not claim. The sections are drawn in
:mod:`prism.compare.report_sections` from the :class:`ReportContext` built here.

What the page shows of each compared run is read through MLflow (params, tags, metrics, and the
``prompts/`` and ``results/question_metrics.csv`` artifacts), never from local files, so a comparison of
runs made on other machines reports them as they were logged.
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from prism.compare.readings import THRESHOLDS, ModelNumbers, Reading, question_estimates, read_patterns
from prism.compare.report_html import Html, el, num, p_value, page, with_ci
from prism.compare.select import CompareError, RunSummary, download
from prism.parsing import UNKNOWN_METHODS
from prism.stats import Estimate

log = logging.getLogger(__name__)

REPORT_HTML = "report.html"
PROMPTS_ARTIFACT = "prompts"
QUESTION_METRICS_ARTIFACT = "results/question_metrics.csv"
QUESTIONS_ARTIFACT = "questions/frozen.jsonl"
READING_METRICS = ("question_majority_accuracy", "mean_agreement", "prompt_invariant_incorrect_rate")


@dataclass(frozen=True)
class RunEvidence:
    """One compared run as the report shows it.

    Attributes:
        run: Its params, tags and table label.
        metrics: Its logged metrics.
        prompts: (file name, text) of each file in its ``prompts/`` artifact: the condition set as run.
        question_metrics: Its ``results/question_metrics.csv`` (None when it could not be read).
        questions: Its frozen questions by id (stem, options, labels, answer), to show what was asked.
        problems: What could not be read, said on the page rather than hidden.
    """

    run: RunSummary
    metrics: Mapping[str, float]
    prompts: tuple[tuple[str, str], ...]
    question_metrics: pd.DataFrame | None
    questions: Mapping[str, Mapping[str, Any]]
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportContext:
    """Everything the page says besides the tables and figures.

    Attributes:
        run_id: The comparison run's id.
        experiment_id: Its experiment.
        evidence: The compared runs, in table order.
        mismatches: Comparability keys on which they differ (only with allow_mismatch).
        baseline: The baseline condition.
        n_boot: Bootstrap resamples of every interval.
        seed: Bootstrap seed.
        allow_mismatch: Whether mismatched runs were allowed.
        git_commit: PRISM's commit that made the comparison.
        prism_version: PRISM's version that made the comparison.
    """

    run_id: str
    experiment_id: str
    evidence: tuple[RunEvidence, ...]
    mismatches: tuple[str, ...]
    baseline: str
    n_boot: int
    seed: int
    allow_mismatch: bool
    git_commit: str
    prism_version: str


def gather_evidence(client: Any, runs: Sequence[RunSummary], uri: str | None) -> list[RunEvidence]:
    """Read each run's metrics, templates, question metrics and frozen questions through MLflow.

    A missing artifact does not stop the comparison: the page says what is missing (old runs, or runs
    logged by hand, may lack one).
    """
    evidence = []
    with tempfile.TemporaryDirectory(prefix="prism-report-") as tmp:
        for run in runs:
            problems: list[str] = []
            metrics = {str(k): float(v) for k, v in client.get_run(run.run_id).data.metrics.items()}
            prompts: list[tuple[str, str]] = []
            question_metrics = None
            questions: dict[str, dict[str, Any]] = {}
            dst = Path(tmp) / run.run_id
            try:
                folder = download(run.run_id, PROMPTS_ARTIFACT, uri, dst)
                prompts = [(p.name, p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*")) if p.is_file()]
            except CompareError as exc:
                problems.append(f"the templates could not be read ({exc})")
            try:
                question_metrics = pd.read_csv(download(run.run_id, QUESTION_METRICS_ARTIFACT, uri, dst))
            except (CompareError, ValueError) as exc:  # ValueError: pandas on an empty or broken CSV
                problems.append(f"the question metrics could not be read, so the readings have no intervals ({exc})")
            try:
                with download(run.run_id, QUESTIONS_ARTIFACT, uri, dst).open(encoding="utf-8") as handle:
                    records = [json.loads(line) for line in handle if line.strip()]
                questions = {str(q["question_id"]): q for q in records}
            except (CompareError, ValueError, KeyError) as exc:  # ValueError: a line that is not JSON
                problems.append(f"the frozen questions could not be read, so question texts are not shown ({exc})")
            for problem in problems:
                log.warning("report, run %s: %s", run.run_id, problem)
            evidence.append(RunEvidence(run, metrics, tuple(prompts), question_metrics, questions, tuple(problems)))
    return evidence


def model_numbers(item: RunEvidence, n_boot: int, seed: int) -> ModelNumbers:
    """The reading's numbers: logged metric values, with intervals bootstrapped from the question metrics."""
    intervals: dict[str, Estimate] = {}
    if item.question_metrics is not None and not item.question_metrics.empty:
        intervals = question_estimates(item.question_metrics, n_boot=n_boot, seed=seed)
    values = []
    for name in READING_METRICS:
        value = item.metrics.get(name, math.nan)  # NaN metrics are not logged: undefined
        interval = intervals.get(name, Estimate.undefined())
        values.append(Estimate(value, interval.ci_low, interval.ci_high) if not math.isnan(value)
                      else Estimate.undefined())
    accuracy, agreement, invariant = values
    return ModelNumbers(item.run.label, accuracy, agreement, invariant,
                        item.metrics.get("answer_recovery_rate", math.nan))


def unknown_methods(metrics: Mapping[str, float]) -> str:
    """Why responses were UNKNOWN, from the run's ``parse_method/<method>`` shares ("" if not logged).

    The rules that recover nothing, largest first: "; UNKNOWN as none 12%, enumeration 5%".
    """
    shares = sorted(((name.split("/", 1)[1], value) for name, value in metrics.items()
                     if name.split("/", 1)[-1] in UNKNOWN_METHODS and name.startswith("parse_method/")
                     and value > 0), key=lambda item: -item[1])
    return "; UNKNOWN as " + ", ".join(f"{name} {value:.0%}" for name, value in shares) if shares else ""


def run_description(runs: Sequence[RunSummary]) -> str:
    """The comparison run's MLflow description (Markdown): what was compared and where the report is."""
    labels = [r.label for r in runs]
    named = " and ".join([", ".join(labels[:-1]), labels[-1]] if len(labels) > 2 else labels)
    return (f"PRISM comparison of {named} on {_common(runs, 'dataset.name')}. "
            f"The result page is **Artifacts → comparison/{REPORT_HTML}**: summary, readings per model, "
            "tables and figures, everything needed to reproduce the runs, and what PRISM does not claim.")


def write_report(out: Path, tables: Mapping[str, pd.DataFrame], figures: Sequence[Path],
                 context: ReportContext) -> Path:
    """Write ``report.html`` into ``out`` and return its path.

    Args:
        out: The comparison's output directory (``comparison/``).
        tables: The comparison tables (:func:`prism.compare.core.build_tables`).
        figures: The PNG figures to embed.
        context: The runs and settings behind them.
    """
    from prism.compare import report_sections as sections

    numbers = [model_numbers(item, context.n_boot, context.seed) for item in context.evidence]
    readings = [read_patterns(n) for n in numbers]
    runs = [item.run for item in context.evidence]
    dataset = _common(runs, "dataset.name")
    title = f"PRISM comparison: {' vs '.join(r.label for r in runs)} on {dataset}"
    body = [
        el("h1", title),
        el("p", f"Comparison run {context.run_id} · experiment {context.experiment_id} · made "
                f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC by PRISM {context.prism_version} "
                f"(commit {context.git_commit[:12]})", cls="sub"),
        sections.navigation(),
        summary(tables, context, numbers, readings),
        sections.readings_section(numbers, readings, THRESHOLDS),
        sections.sensitivity_section(tables, figures, context.baseline),
        sections.divergence_section(tables, figures),
        sections.differences_section(tables, {k: v for item in context.evidence for k, v in item.questions.items()}),
        sections.setup_section(context),
        sections.templates_section(context.evidence),
        sections.method_section(context),
        sections.claims_section(context.evidence),
        el("footer", f"Written by prism.compare into the artifacts of MLflow run {context.run_id}. "
                     "The tables are also in this run's CSV files, with every digit."),
    ]
    path = out / REPORT_HTML
    path.write_text(page(title, body), encoding="utf-8")
    return path


def summary(tables: Mapping[str, pd.DataFrame], context: ReportContext, numbers: Sequence[ModelNumbers],
            readings: Sequence[Reading]) -> Html:
    """The few sentences a reader needs first: what was compared, how each model reads, how they differ."""
    runs = [item.run for item in context.evidence]
    n_questions = int(max((item.metrics.get("n_questions", 0.0) for item in context.evidence), default=0))
    conditions = ", ".join(runs[0].conditions) if runs else ""
    points = [el("li", f"{len(runs)} run(s) on the same {n_questions} frozen {_common(runs, 'dataset.name')} "
                       f"questions, each asked under the conditions {conditions}; {context.baseline} is the baseline. "
                       "Numbers are proportions with 95% intervals in brackets.")]
    sensitivity = tables["sensitivity"]
    for item, number, reading in zip(context.evidence, numbers, readings, strict=True):
        rows = sensitivity[sensitivity["model"] == number.label]
        others = rows[rows["condition"] != rows["baseline"]]
        base = rows[rows["condition"] == rows["baseline"]]
        pattern = (f"reads as {' and also '.join(f'“{p}”' for p in reading.patterns)}" if reading.patterns
                   else "fits none of the four patterns" if reading.gap else "cannot be read as a pattern")
        acc, agree = number.majority_accuracy, number.agreement
        parts: list[Any] = [el("strong", number.label), f" {pattern}: the majority answer is right on ",
                            with_ci(acc.value, acc.ci_low, acc.ci_high), " of questions"]
        parts += ([" and answers agree across conditions at ", with_ci(agree.value, agree.ci_low, agree.ci_high), "."]
                  if not math.isnan(agree.value) else ["; no answer was recovered to compare across conditions."])
        if not math.isnan(number.recovery) and number.recovery < THRESHOLDS.recovery:
            parts.append(f" Only {number.recovery:.0%} of its responses had a recoverable answer"
                         f"{unknown_methods(item.metrics)}.")
        if not base.empty:
            parts.append(f" Accuracy under {context.baseline}: {num(base['accuracy'].iloc[0])}.")
        if not others.empty and float(others["flip_rate"].fillna(0).max()) == 0.0:
            parts.append(f" No condition changed any answer given under {context.baseline}.")
        elif not others.empty:
            top = others.iloc[0]  # ranked by effect size
            parts += [f" Largest change: {top['condition']}, accuracy ",
                      with_ci(top["delta_accuracy"], top["delta_ci_low"], top["delta_ci_high"], signed=True),
                      ", flip rate ", with_ci(top["flip_rate"], top["flip_ci_low"], top["flip_ci_high"]),
                      f" (Holm-adjusted McNemar p = {p_value(top['mcnemar_p_holm'])})."]
        points.append(el("li", *parts))
    if "divergence" in tables:
        pooled = tables["divergence"][tables["divergence"]["condition"] == "all"]
        for row in pooled.itertuples(index=False):
            points.append(el("li", f"{row.model_a} and {row.model_b} give different answers in ",
                             with_ci(row.disagreement, row.disagreement_ci_low, row.disagreement_ci_high),
                             " of paired cells; excess over each model's disagreement with itself across conditions: ",
                             with_ci(row.excess, row.excess_ci_low, row.excess_ci_high, signed=True), "."))
    if 0 < n_questions < 50:
        points.append(el("li", f"With {n_questions} questions the 95% intervals are wide: a difference inside "
                               "them is not evidence of a difference."))
    warning = None
    if context.mismatches:
        warning = el("div", el("strong", "These runs differ in their configuration "
                                         "(compared with allow_mismatch=true): "),
                     el("ul", *(el("li", m) for m in context.mismatches)), cls="warning")
    return el("section", el("h2", "Summary", id="summary"), warning, el("ul", *points), cls="summary")


def _common(runs: Sequence[RunSummary], key: str) -> str:
    values = list(dict.fromkeys(r.params.get(key, "?") for r in runs))
    return values[0] if len(values) == 1 else " / ".join(values)
