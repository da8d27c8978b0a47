"""What a comparison report (and the published site) shows of each run, read through MLflow.

The report's types, :class:`RunEvidence` (one run as the page shows it) and :class:`ReportContext` (the
whole comparison), and the evidence gathering: params, tags, metrics and the ``prompts/``,
``results/question_metrics.csv`` and ``questions/frozen.jsonl`` artifacts, never local files, so runs
made on other machines are shown as they were logged. :mod:`prism.compare.report_sections`,
:mod:`prism.compare.report` and :mod:`prism.publish` use this module; it uses none of them.
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from prism.compare.artifact_cache import ArtifactCache, read_records
from prism.compare.readings import ModelNumbers, question_estimates_of
from prism.compare.select import CompareError
from prism.names import (
    METRIC_ACCURACY,
    METRIC_ANSWER_RECOVERY,
    METRIC_MEAN_AGREEMENT,
    METRIC_PROMPT_INVARIANT_INCORRECT,
    METRIC_QUESTION_MAJORITY_ACCURACY,
    QUESTION_METRICS_ARTIFACT,
    QUESTIONS_ARTIFACT,
    LoggedRun,
)
from prism.stats.basics import Estimate

log = logging.getLogger(__name__)

PROMPTS_ARTIFACT = "prompts"
READING_METRICS = (METRIC_QUESTION_MAJORITY_ACCURACY, METRIC_MEAN_AGREEMENT, METRIC_PROMPT_INVARIANT_INCORRECT)


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
        scored: Its scored records (``results/scored.jsonl``), when they were asked for and could be read.
    """

    run: LoggedRun
    metrics: Mapping[str, float]
    prompts: tuple[tuple[str, str], ...]
    question_metrics: pd.DataFrame | None
    questions: Mapping[str, Mapping[str, Any]]
    problems: tuple[str, ...] = ()
    scored: pd.DataFrame | None = None


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
        notes: Sentences the summary must carry (an ordered scale shown out of its order).
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
    notes: tuple[str, ...] = ()


def gather_evidence(client: Any, runs: Sequence[LoggedRun], uri: str | None,
                    cache: ArtifactCache | None = None) -> list[RunEvidence]:
    """Read each run's metrics, templates, question metrics and frozen questions through MLflow (or the cache).

    A missing artifact does not stop the comparison: the page says what is missing (old runs, or runs
    logged by hand, may lack one).
    """
    with tempfile.TemporaryDirectory(prefix="prism-report-") as tmp:
        return [read_evidence(run, {str(k): float(v) for k, v in client.get_run(run.run_id).data.metrics.items()},
                              uri, Path(tmp) / run.run_id, cache=cache) for run in runs]


def read_evidence(run: LoggedRun, metrics: Mapping[str, float], uri: str | None, dst: Path,
                  scored: bool = False, artifact_uri: str | None = None,
                  cache: ArtifactCache | None = None) -> RunEvidence:
    """One run's evidence: its artifacts downloaded into ``dst`` and read (``scored``: its scored records too).

    ``artifact_uri`` is the run's artifact root when the caller already has it (see
    :func:`prism.compare.select.download`). What cannot be read is named in :attr:`RunEvidence.problems`
    and logged, never raised.
    """
    kept = cache or ArtifactCache()

    def fetch(path: str) -> Path:
        return kept.fetch(run, path, uri, dst, artifact_uri)

    problems: list[str] = []
    prompts: list[tuple[str, str]] = []
    question_metrics = None
    questions: dict[str, dict[str, Any]] = {}
    records = None
    try:
        folder = fetch(PROMPTS_ARTIFACT)
        prompts = [(p.name, p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*")) if p.is_file()]
    except CompareError as exc:
        problems.append(f"the templates could not be read ({exc})")
    try:
        question_metrics = pd.read_csv(fetch(QUESTION_METRICS_ARTIFACT))
    except (CompareError, ValueError) as exc:  # ValueError: pandas on an empty or broken CSV
        problems.append(f"the question metrics could not be read, so the readings have no intervals ({exc})")
    try:
        questions = {str(q["question_id"]): q for q in _json_lines(fetch(QUESTIONS_ARTIFACT))}
    except (CompareError, ValueError, KeyError) as exc:  # ValueError: a line that is not JSON
        problems.append(f"the frozen questions could not be read, so question texts are not shown ({exc})")
    if scored:
        try:
            records = read_records(run, uri, dst, kept, artifact_uri)  # cells.parquet when logged
        except (CompareError, ValueError) as exc:
            problems.append(f"the scored records could not be read, so cell-level intervals and responses are not "
                            f"shown ({exc})")
    for problem in problems:
        log.warning("report, run %s: %s", run.run_id, problem)
    return RunEvidence(run, dict(metrics), tuple(prompts), question_metrics, questions, tuple(problems), records)


def _json_lines(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def model_numbers(item: RunEvidence, n_boot: int, seed: int) -> ModelNumbers:
    """The reading's numbers: logged metric values, with intervals bootstrapped from the question metrics."""
    return models_numbers([item], n_boot, seed)[0]


def models_numbers(items: Sequence[RunEvidence], n_boot: int, seed: int) -> list[ModelNumbers]:
    """:func:`model_numbers` of each run, every run's intervals drawn together (:func:`question_estimates_of`)."""
    frames = {i: item.question_metrics for i, item in enumerate(items)
              if item.question_metrics is not None and not item.question_metrics.empty}
    found = dict(zip(frames, question_estimates_of(list(frames.values()), n_boot=n_boot, seed=seed), strict=True))
    return [_numbers(item, found.get(i, {})) for i, item in enumerate(items)]


def _numbers(item: RunEvidence, intervals: dict[str, Estimate]) -> ModelNumbers:
    """The run's logged metric values with the intervals of its question metrics (none: undefined)."""
    values = []
    for name in READING_METRICS:
        value = item.metrics.get(name, math.nan)  # NaN metrics are not logged: undefined
        interval = intervals.get(name, Estimate.undefined())
        values.append(Estimate(value, interval.ci_low, interval.ci_high) if not math.isnan(value)
                      else Estimate.undefined())
    accuracy, agreement, invariant = values
    return ModelNumbers(item.run.label, accuracy, agreement, invariant,
                        item.metrics.get(METRIC_ANSWER_RECOVERY, math.nan), no_key=has_no_key(item))


def has_no_key(item: RunEvidence) -> bool:
    """Whether the run's items have no answer key: its keyed metrics are absent from MLflow by design.

    Read from the run's ``dataset.answer_format`` (``none``) or ``dataset.type`` (``subjective``) params,
    else from what it logged: no accuracy beside an answer recovery rate.
    """
    if item.run.answer_format == "none" or item.run.dataset_type == "subjective":
        return True
    return METRIC_ACCURACY not in item.metrics and METRIC_ANSWER_RECOVERY in item.metrics
