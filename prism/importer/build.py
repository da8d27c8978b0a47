"""Source cells -> an ordinary PRISM run: frozen question set, raw records, scored records, metrics, MLflow.

Every distinct prompt form of the log is a condition (its first the baseline); the prompts are the source's
own, so PRISM's parser reads each response against the labels and options the model saw, and scoring maps
its answer to the canonical option as in any run. Everything is read, checked, parsed, scored and written
to the output directory first; only then is the MLflow run started and filled, so a bad log leaves no run
at all and a run that fails on upload is marked FAILED, never FINISHED.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from prism import __version__
from prism.conditions import Condition, ConditionSet
from prism.importer.cells import SourceCell
from prism.importer.mapping import ImportLogError
from prism.names import (
    GENERATION_PARAMS,
    IMPORT_AGREEMENT_ARTIFACT,
    KIND_RUN,
    PARAM_CONDITION_NAMES,
    PARAM_CONDITIONS_NAME,
    PARAM_DATASET_N,
    PARAM_DATASET_NAME,
    PARAM_DATASET_SPLIT,
    PARAM_GENERATION_REPETITIONS,
    PARAM_MODEL_BACKEND,
    PARAM_MODEL_NAME,
    PARAM_PARSER_VERSION,
    PARAM_PROTOCOL_VERSION,
    PARAM_SCORER_VERSION,
    PARAM_SEED,
    PARAM_TEMPLATE_VERSION,
    TAG_IMPORT_SOURCE_FILE,
    TAG_IMPORT_SOURCE_MODEL,
    TAG_IMPORT_SOURCE_SHA256,
    TAG_IMPORT_TASK,
    TAG_IMPORT_TOOL_VERSION,
    TAG_IMPORTED_FROM,
)
from prism.names import run_tags as names_run_tags
from prism.parsing import PARSER_VERSION
from prism.questions import FrozenSet
from prism.questions.freezing import frozen_bytes
from prism.records import RawRecord, ScoredRecord
from prism.results.scoring import SCORER_VERSION
from prism.results.summary import score_records, write_results
from prism.types import PROTOCOL_VERSION, Prompt, Question, canonical_json, safe_filename, sha256_text

log = logging.getLogger(__name__)

# The tags and artifact an import adds are named in prism.names; these are its metric names.
TAG_SOURCE_VERSION, TAG_SOURCE_SHA256, TAG_SOURCE_FILE = (TAG_IMPORT_TOOL_VERSION, TAG_IMPORT_SOURCE_SHA256,
                                                          TAG_IMPORT_SOURCE_FILE)
TAG_SOURCE_TASK, TAG_SOURCE_MODEL = TAG_IMPORT_TASK, TAG_IMPORT_SOURCE_MODEL
AGREEMENT_ARTIFACT = IMPORT_AGREEMENT_ARTIFACT
METRIC_CLOZE_ACCURACY = "cloze_accuracy"
METRIC_CLOZE_NORM_ACCURACY = "cloze_norm_accuracy"
METRIC_SOURCE_PREFIX = "source/"
METRIC_AGREEMENT_PREFIX = "import_agreement/"
# What a log-likelihood cell's raw record says instead of a response: it generated no text to parse.
CLOZE_ONLY = "log-likelihood cell: the source scored each option's text, it generated no response"
VERDICTS = ("same", "differs", "prism_unknown", "source_unknown")
AGREEMENT_COLUMNS = ("question_id", "condition", "repetition", "verdict", "source_answer", "prism_answer",
                     "source_extracted", "prism_method", "correct_answer", "source_correct", "prism_correct",
                     "response")


@dataclass(frozen=True)
class Source:
    """A read log and the facts about it that the run records."""

    tool: str  # lm_eval or inspect_ai
    path: Path
    task: str
    version: str
    cells: tuple[SourceCell, ...]
    model: str
    generation: dict[str, Any]
    dataset: str
    split: str
    details: dict[str, str] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        """The source file's sha256."""
        digest = hashlib.sha256()
        with self.path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()


@dataclass(frozen=True)
class Imported:
    """What the run is made of, written to the output directory, before MLflow sees any of it."""

    frozen: FrozenSet
    condition_set: ConditionSet
    metrics: dict[str, float]
    params: dict[str, str]
    tags: dict[str, str]
    out: Path
    run_name: str


def condition_name(task: str, index: int) -> str:
    """The condition of a log's ``index``-th prompt form: the task's name, then ``<task>.2``, ``<task>.3``..."""
    base = "".join(c if c.isalnum() or c in "_-" else "_" for c in task) or "imported"
    return base if index == 0 else f"{base}.{index + 1}"


def questions_of(cells: Sequence[SourceCell]) -> list[Question]:
    """The log's questions in first-seen order; one id asked as two different questions is an error."""
    found: dict[str, tuple[Question, str]] = {}
    for cell in cells:
        seen = found.setdefault(cell.question.question_id, (cell.question, cell.where))
        if seen[0] != cell.question:
            raise ImportLogError(f"{cell.where}: question {cell.question.question_id!r} differs from the one at "
                                 f"{seen[1]} (another stem, options or key); ids must name one question.")
    return [question for question, _ in found.values()]


def prepare(source: Source, out: Path, config: Mapping[str, Any]) -> Imported:
    """Write the run's files (questions, prompts, responses, results) and compute its metrics and tags.

    Raises:
        ImportLogError: If the cells cannot make a run (no cells, a repeated cell, an id naming two questions).
    """
    if not source.cells:
        raise ImportLogError(f"{source.path} holds no cells to import.")
    forms: dict[str, str] = {}
    for cell in source.cells:
        forms.setdefault(cell.form, condition_name(source.task, len(forms)))
    questions = questions_of(source.cells)
    template_version = f"import.{source.tool}.{sha256_text(canonical_json(list(forms)))[:12]}"
    conditions = tuple(Condition(name=name, description=f"{source.tool} prompt form {i + 1} of task {source.task}",
                                 template=form, family="baseline" if i == 0 else "prompt_form")
                       for i, (form, name) in enumerate(forms.items()))
    condition_set = ConditionSet(name=f"import-{source.tool}", template_version=template_version, closing="",
                                 baseline=conditions[0].name, conditions=conditions)
    for sub in ("config", "questions", "prompts", "responses", "results"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    data = frozen_bytes(questions)
    frozen_path = out / "questions" / "frozen.jsonl"
    frozen_path.write_bytes(data)
    source_sha = source.sha256
    frozen = FrozenSet(questions=tuple(questions), sha256=hashlib.sha256(data).hexdigest(), path=frozen_path,
                       dataset=source.dataset, split=source.split, n=len(questions), seed=0,
                       dataset_version=f"sha256:{source_sha}", dropped={}, pool_size=len(questions))
    digest = sha256_text(canonical_json({"tool": source.tool, "model": source.model, "source": source_sha}))
    prompts: dict[tuple[str, str], Prompt] = {}
    cells: dict[tuple[str, str, int], tuple[RawRecord, SourceCell]] = {}
    timestamp = datetime.now(UTC).isoformat()
    for cell in source.cells:
        condition = forms[cell.form]
        prompt = Prompt(cell.question.question_id, condition, cell.text, cell.displayed_labels, cell.canonical_labels,
                        cell.displayed_options, template_version, cell.earlier_turns)
        prompts.setdefault((prompt.question_id, condition), prompt)
        key = (prompt.question_id, condition, cell.repetition)
        if key in cells:
            raise ImportLogError(f"{cell.where} repeats the cell {key} of {cells[key][1].where}; each question once "
                                 "per prompt form and repetition.")
        cells[key] = (raw_record(cell, prompt, source, digest, timestamp), cell)
    order = {name: i for i, name in enumerate(condition_set.names)}
    position = {q.question_id: i for i, q in enumerate(questions)}
    ordered = sorted(cells.values(), key=lambda rc: (order[rc[0].condition], position[rc[0].question_id],
                                                     rc[0].repetition))
    with (out / "responses" / "responses.jsonl").open("w", encoding="utf-8") as handle:
        for record, _ in ordered:
            handle.write(json.dumps(record.to_json(), ensure_ascii=False, sort_keys=True) + "\n")
    scored = list(score_records([r for r, _ in ordered], frozen, condition_set, prompts))
    repetitions = 1 + max(c.repetition for c in source.cells)
    metrics = write_results(out, scored, frozen, condition_set, repetitions)
    rows = agreement_rows(scored, [c for _, c in ordered])
    write_agreement(out / AGREEMENT_ARTIFACT, rows)
    metrics.update(agreement_metrics(rows))
    metrics.update(cloze_metrics([c for _, c in ordered], [r.condition for r, _ in ordered]))
    metrics.update(source_metrics([c for _, c in ordered]))
    write_inputs(out, config, condition_set, list(prompts.values()))
    params = run_params(source, frozen, condition_set, repetitions, config)
    tags = run_tags(source, frozen, digest, source_sha, out, params)
    return Imported(frozen, condition_set, metrics, params, tags, out,
                    run_name=f"{source.model}-{frozen.dataset}-{condition_set.name}")


def raw_record(cell: SourceCell, prompt: Prompt, source: Source, digest: str, timestamp: str) -> RawRecord:
    """The raw record of one source cell: its response (or, for a log-likelihood cell, its cloze reading)."""
    cloze = cell.cloze_logprobs is not None
    return RawRecord(
        question_id=prompt.question_id, dataset=cell.question.dataset, split=cell.question.split,
        condition=prompt.condition, repetition=cell.repetition, prompt=prompt.text, prompt_sha256=prompt.sha256,
        response=cell.response, model=source.model, model_digest=digest, backend=source.tool,
        generation=dict(source.generation), backend_options={}, latency_s=None, prompt_tokens=None,
        completion_tokens=None, timestamp=timestamp, template_version=prompt.template_version,
        protocol_version=PROTOCOL_VERSION, cached=False,
        error=CLOZE_ONLY if cloze and cell.response is None else (
            None if cell.response is not None else "the source recorded no response"),
        finish_reason=cell.finish_reason,
        turns=[t.to_dict() for t in prompt.earlier_turns] or None,
        cloze_logprobs=dict(cell.cloze_logprobs) if cell.cloze_logprobs is not None else None,
        cloze_chars=dict(cell.cloze_chars) if cell.cloze_chars is not None else None,
        cloze_source=source.tool if cloze else None,
    )


def verdict(source: str | None, prism: str | None) -> str:
    """How the source's extraction and PRISM's parse of one response compare (both UNKNOWN is ``same``)."""
    if source == prism:
        return "same"
    if prism is None:
        return "prism_unknown"
    if source is None:
        return "source_unknown"
    return "differs"


def agreement_rows(scored: Sequence[ScoredRecord], cells: Sequence[SourceCell]) -> list[dict[str, Any]]:
    """One row per response: the source's extracted answer beside PRISM's parse (canonical labels or UNKNOWN)."""
    rows = []
    for record, cell in zip(scored, cells, strict=True):
        if record.raw.response is None:  # a log-likelihood cell: no text was extracted by anyone
            continue
        key = record.correct_answer
        rows.append({
            "question_id": record.raw.question_id, "condition": record.raw.condition,
            "repetition": record.raw.repetition, "verdict": verdict(cell.source_answer, record.answer),
            "source_answer": cell.source_answer or "UNKNOWN", "prism_answer": record.answer or "UNKNOWN",
            "source_extracted": cell.source_extracted, "prism_method": record.method, "correct_answer": key,
            "source_correct": None if key is None else cell.source_answer == key,
            "prism_correct": record.correct, "response": record.raw.response,
        })
    return rows


def write_agreement(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """``results/import_agreement.csv`` (written with its header even when the log has no responses)."""
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=AGREEMENT_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def agreement_metrics(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The share of responses of each verdict, and both extractions' accuracy over the same responses."""
    if not rows:
        return {}
    n = len(rows)
    out = {f"{METRIC_AGREEMENT_PREFIX}{v}": sum(r["verdict"] == v for r in rows) / n for v in VERDICTS}
    keyed = [r for r in rows if r["correct_answer"] is not None]
    if keyed:
        out[f"{METRIC_AGREEMENT_PREFIX}source_accuracy"] = sum(bool(r["source_correct"]) for r in keyed) / len(keyed)
        out[f"{METRIC_AGREEMENT_PREFIX}prism_accuracy"] = sum(bool(r["prism_correct"]) for r in keyed) / len(keyed)
    out[f"{METRIC_AGREEMENT_PREFIX}n"] = float(n)
    return out


def cloze_answer(logprobs: Mapping[str, float], chars: Mapping[str, int] | None = None) -> str:
    """The likeliest option (per character with ``chars``: lm-eval's ``acc_norm``); a tie goes to the first."""
    labels = list(logprobs)

    def score(label: str) -> float:
        return logprobs[label] / chars[label] if chars is not None and chars.get(label) else logprobs[label]

    return max(labels, key=lambda label: (score(label), -labels.index(label)))


def cloze_metrics(cells: Sequence[SourceCell], conditions: Sequence[str]) -> dict[str, float]:
    """``cloze_accuracy`` (lm-eval's ``acc``) and ``cloze_norm_accuracy`` (``acc_norm``), pooled and per condition."""
    by: dict[str, list[tuple[bool, bool]]] = {}
    for cell, condition in zip(cells, conditions, strict=True):
        if cell.cloze_logprobs is None or cell.question.answer is None:
            continue
        key = cell.question.answer
        both = (cloze_answer(cell.cloze_logprobs) == key, cloze_answer(cell.cloze_logprobs, cell.cloze_chars) == key)
        by.setdefault(condition, []).append(both)
    if not by:
        return {}
    pooled = [v for values in by.values() for v in values]
    out = {METRIC_CLOZE_ACCURACY: sum(a for a, _ in pooled) / len(pooled),
           METRIC_CLOZE_NORM_ACCURACY: sum(b for _, b in pooled) / len(pooled)}
    for condition, values in by.items():
        out[f"{METRIC_CLOZE_ACCURACY}/{condition}"] = sum(a for a, _ in values) / len(values)
        out[f"{METRIC_CLOZE_NORM_ACCURACY}/{condition}"] = sum(b for _, b in values) / len(values)
    return out


def source_metrics(cells: Sequence[SourceCell]) -> dict[str, float]:
    """The mean of each per-sample score the source logged (lm-eval's ``acc``, ``exact_match``; inspect's score)."""
    sums: dict[str, list[float]] = {}
    for cell in cells:
        for name, value in cell.source_metrics.items():
            if math.isfinite(value):
                sums.setdefault(name, []).append(value)
    return {f"{METRIC_SOURCE_PREFIX}{name}": sum(v) / len(v) for name, v in sums.items()}


def write_inputs(out: Path, config: Mapping[str, Any], condition_set: ConditionSet, prompts: Sequence[Prompt]) -> None:
    """``config/resolved.yaml`` (the import's settings) and ``prompts/<set>.yaml`` (each condition's form)."""
    from prism.turns import write_conversations

    (out / "config" / "resolved.yaml").write_text(yaml.safe_dump(dict(config), sort_keys=False), encoding="utf-8")
    forms = {c.name: c.template for c in condition_set.conditions}
    (out / "prompts" / f"{safe_filename(condition_set.name)}.yaml").write_text(
        yaml.safe_dump({"conditions": forms}, sort_keys=False, allow_unicode=True, width=1000), encoding="utf-8")
    write_conversations(out / "prompts", condition_set.name, prompts)


def run_params(source: Source, frozen: FrozenSet, condition_set: ConditionSet, repetitions: int,
               config: Mapping[str, Any]) -> dict[str, str]:
    """The run's params: the names compare and publish read, as a PRISM run logs them, plus the import's own."""
    def text(value: Any) -> str:
        return "None" if value is None else str(value)

    params = {
        PARAM_MODEL_NAME: source.model, PARAM_MODEL_BACKEND: source.tool, PARAM_DATASET_NAME: frozen.dataset,
        PARAM_DATASET_SPLIT: frozen.split, PARAM_DATASET_N: str(frozen.n), PARAM_SEED: "0",
        PARAM_CONDITIONS_NAME: condition_set.name, PARAM_CONDITION_NAMES: ",".join(condition_set.names),
        PARAM_TEMPLATE_VERSION: condition_set.template_version, PARAM_PARSER_VERSION: PARSER_VERSION,
        PARAM_SCORER_VERSION: SCORER_VERSION, PARAM_PROTOCOL_VERSION: PROTOCOL_VERSION,
        PARAM_GENERATION_REPETITIONS: str(repetitions),
        **{name: text(source.generation.get(name.removeprefix("generation."))) for name in GENERATION_PARAMS},
        "import.format": str(config.get("format")), "import.path": str(source.path),
        "import.task": source.task,
    }
    for key in ("mapping", "filter", "scorer"):
        if config.get(key) is not None:
            params[f"import.{key}"] = str(config[key])
    return params


def run_tags(source: Source, frozen: FrozenSet, digest: str, source_sha: str, out: Path,
             params: Mapping[str, str]) -> dict[str, str]:
    """The tags of an imported run: a PRISM run's, and where it came from."""
    from prism.run.tracking import git_state

    commit, dirty = git_state(Path(__file__).resolve().parent)
    tags = names_run_tags(kind=KIND_RUN, digest=digest, question_set=frozen.sha256,
                          dataset_version=frozen.dataset_version, git_commit=commit, git_dirty=dirty,
                          version=__version__,
                          config_sha256=hashlib.sha256(canonical_json(dict(params)).encode()).hexdigest(),
                          output_dir=str(out.resolve()),
                          model_details={k: v for k, v in source.details.items() if k != "source_model"},
                          dropped={})
    return {
        **tags,
        TAG_IMPORTED_FROM: source.tool, TAG_SOURCE_VERSION: source.version, TAG_SOURCE_SHA256: source_sha,
        TAG_SOURCE_FILE: str(source.path.resolve()), TAG_SOURCE_TASK: source.task,
        **({TAG_SOURCE_MODEL: source.details["source_model"]} if source.details.get("source_model") else {}),
    }


def upload(imported: Imported, tracking_uri: str | None, experiment: str, require_server: bool = False) -> str:
    """Record the prepared run in MLflow; a failure marks it FAILED (never FINISHED) and re-raises.

    Returns:
        The run id.
    """
    from prism.run.offline import RecordingTracker
    from prism.run.tracking import MlflowTracker, resolve_tracking_uri

    out = imported.out
    tracker = RecordingTracker(MlflowTracker(resolve_tracking_uri(tracking_uri, require_server), experiment), out)
    run_id = tracker.start(imported.run_name, imported.tags)
    try:
        tracker.log_params(imported.params)
        frozen = imported.frozen
        tracker.log_question_set([q.to_dict() for q in frozen.questions],
                                 name=f"{frozen.dataset}-{frozen.split}-n{frozen.n}", digest=frozen.sha256,
                                 source=str(frozen.path.resolve()))
        tracker.log_metrics(imported.metrics)
        for sub in ("config", "questions", "prompts", "responses", "results"):
            for path in sorted((out / sub).glob("*")):
                tracker.log_artifact(path, sub)
    except BaseException:
        tracker.end("FAILED")
        raise
    tracker.end("FINISHED")
    if tracker.offline:
        from prism.run.tracking import TrackingError

        raise TrackingError(f"MLflow failed during the import ({tracker.failure}); the run's files are in {out}. "
                            f"When the tracking store is back, upload them with: python -m prism.upload {out}")
    return run_id
