"""Which MLflow runs a comparison reads, whether they may be compared, and their scored records.

Runs are read from the tracking store (never from local files), so a comparison works on any store a
team shares. The selection rules and the mismatch check are pure functions over :class:`LoggedRun`
values; only :func:`search_candidates`, :func:`fetch_runs` and :func:`load_scored` talk to MLflow.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from prism.errors import PrismError
from prism.names import (
    FINISHED,
    KIND_RUN,
    PARAM_GENERATION_MAX_TOKENS,
    PARAM_GENERATION_SEED,
    PARAM_GENERATION_TEMPERATURE,
    PARAM_GENERATION_TOP_K,
    PARAM_GENERATION_TOP_P,
    PARAM_PARSER_VERSION,
    PARAM_TEMPLATE_VERSION,
    TAG_KIND,
    TAG_QUESTION_SET,
    LoggedRun,
)
from prism.stats.basics import answer_categories
from prism.turns import shown_prompt

if TYPE_CHECKING:
    from prism.conditions import ConditionSet

log = logging.getLogger(__name__)

# What a comparison may read: finished experiment runs (prism.names.KIND_RUN), never killed ones (they
# stay RUNNING), failed ones, or other comparisons.

# (label, where it is recorded, key): what must agree for results to be directly comparable.
# Generation parameters are the canonical ones (docs/architecture.md); backend-specific options are not checked.
COMPARABILITY: tuple[tuple[str, str, str], ...] = (
    ("frozen question set sha256", "tag", TAG_QUESTION_SET),
    ("condition template version", "param", PARAM_TEMPLATE_VERSION),
    ("parser version", "param", PARAM_PARSER_VERSION),
    (PARAM_GENERATION_TEMPERATURE, "param", PARAM_GENERATION_TEMPERATURE),
    (PARAM_GENERATION_MAX_TOKENS, "param", PARAM_GENERATION_MAX_TOKENS),
    (PARAM_GENERATION_SEED, "param", PARAM_GENERATION_SEED),
    (PARAM_GENERATION_TOP_P, "param", PARAM_GENERATION_TOP_P),
    (PARAM_GENERATION_TOP_K, "param", PARAM_GENERATION_TOP_K),
)

# Columns of the scored records a comparison uses (docs/architecture.md, "Scored record").
SCORED_COLUMNS = ("question_id", "condition", "repetition", "answer", "recovered", "correct", "correct_answer",
                  "error", "response", "prompt_sha256")
# The likelihood reading's columns (runs with generation.label_probs=true); empty for runs without it.
LIKELIHOOD_COLUMNS = ("option_probs", "likelihood_answer", "likelihood_correct", "label_mass")
# Read when present (the scorecard's compliance, the trace's parse method and displayed label; the cloze
# reading's answers, generation.cloze=true); empty otherwise.
OPTIONAL_COLUMNS = ("compliant", "method", "displayed", "cloze_answer", "cloze_norm_answer")


class CompareError(PrismError, ValueError):
    """The requested runs cannot be selected, read or compared."""


@dataclass(frozen=True)
class Selection:
    """Which runs to compare: explicit ids, or filters over the experiment's finished runs.

    Attributes:
        runs: Explicit run ids; when given, no filter may be.
        dataset: Only runs whose ``dataset.name`` is this.
        models: Only runs whose ``model.name`` is one of these (each must be found).
        conditions: Only runs whose condition set (``conditions.name``) is this.
        sweep: Only runs of this multirun sweep (tag ``prism.sweep``, the sweep directory).
    """

    runs: tuple[str, ...] = ()
    dataset: str | None = None
    models: tuple[str, ...] = ()
    conditions: str | None = None
    sweep: str | None = None

    def filters(self) -> dict[str, str]:
        """The filters in use, by config key, for messages and params."""
        named = {"dataset": self.dataset, "models": ",".join(self.models) or None, "conditions": self.conditions,
                 "sweep": self.sweep}
        return {k: v for k, v in named.items() if v}


def check_selectable(run: LoggedRun) -> str | None:
    """Return why a run may not be compared (not a FINISHED run of kind ``run``), or None when it may."""
    if run.kind != KIND_RUN:
        return f"run {run.run_id} is of kind {run.kind or 'unknown'!r}, not {KIND_RUN!r}"
    if run.status != FINISHED:
        return f"run {run.run_id} is {run.status}, not {FINISHED} (killed runs stay RUNNING)"
    return None


def choose_runs(candidates: Iterable[LoggedRun], selection: Selection) -> list[LoggedRun]:
    """Apply the selection rules to candidate runs (explicit ids are handled by :func:`fetch_runs`).

    Only FINISHED runs of kind ``run`` that pass the filters are considered. Among them, the newest
    question set is that of the latest run; for it, the latest run of each model is chosen.

    Returns:
        The chosen runs, ordered as ``selection.models`` when given, else by model name.

    Raises:
        CompareError: If nothing matches, or a model named in ``selection.models`` has no run for the
            newest question set.
    """
    eligible = [r for r in candidates if check_selectable(r) is None and passes_filters(r, selection)]
    if not eligible:
        return []
    latest_first = sorted(eligible, key=lambda r: (r.start_time, r.run_id), reverse=True)
    question_set = latest_first[0].question_set
    chosen: dict[str, LoggedRun] = {}
    for run in latest_first:
        if run.question_set == question_set and run.model not in chosen:
            chosen[run.model] = run
    if selection.models:
        missing = [m for m in selection.models if m not in chosen]
        if missing:
            raise CompareError(
                f"no FINISHED run of model {', '.join(missing)} for the newest question set "
                f"{question_set[:12]} (models with one: {', '.join(sorted(chosen)) or 'none'}); run it, or "
                "drop it from models=[...]."
            )
        return [chosen[m] for m in selection.models]
    return [chosen[m] for m in sorted(chosen)]


def passes_filters(run: LoggedRun, selection: Selection) -> bool:
    """Whether a run passes the selection's filters (dataset, models, condition set, sweep)."""
    if selection.dataset and run.dataset != selection.dataset:
        return False
    if selection.models and run.model not in selection.models:
        return False
    if selection.conditions and run.condition_set != selection.conditions:
        return False
    return not (selection.sweep and run.sweep != selection.sweep)


def label_runs(runs: Sequence[LoggedRun]) -> list[LoggedRun]:
    """Give each run its table label: the model name, plus ``@<dataset>`` when names repeat on other datasets.

    A model name that repeats gets ``@<dataset.name>`` when that tells its runs apart, else
    ``@<run id prefix>``.
    """
    names = [r.model for r in runs]
    keys = [(r.model, r.dataset or "?") for r in runs]

    def label(run: LoggedRun, key: tuple[str, str]) -> str:
        if names.count(run.model) == 1:
            return run.model
        return f"{run.model}@{key[1]}" if keys.count(key) == 1 else f"{run.model}@{run.run_id[:8]}"

    return [LoggedRun(r.run_id, r.status, r.start_time, r.params, r.tags, label=label(r, key))
            for r, key in zip(runs, keys, strict=True)]


def find_mismatches(runs: Sequence[LoggedRun], *, across_question_sets: bool = False) -> list[str]:
    """Name every comparability key on which the runs differ (empty when they may be compared).

    Numbers are compared as numbers (``0`` and ``0.0`` agree) and ``null``/``None``/missing as unset.

    Args:
        runs: The runs.
        across_question_sets: Runs on different frozen question sets may be compared (the paired tables
            then pair only runs on the same set, :mod:`prism.compare.groups`): the question set is not a
            key, and the template version is compared without its subjective suffix
            (:func:`template_base`) across sets, in full within each set.

    Returns:
        One line per differing key, e.g. ``parser version differs: '1' in run abc (m1); '2' in run def (m2)``.
    """
    lines = []
    for label, where, key in COMPARABILITY:
        if not across_question_sets:
            lines += _differing(label, where, key, runs, canonical_value)
        elif key == TAG_QUESTION_SET:
            continue
        elif key == PARAM_TEMPLATE_VERSION:
            found = _differing(label, where, key, runs, lambda raw: canonical_value(template_base(raw)))
            for question_set in dict.fromkeys(r.question_set for r in runs):
                found = found or _differing(label, where, key, [r for r in runs if r.question_set == question_set],
                                            canonical_value)
            lines += found
        else:
            lines += _differing(label, where, key, runs, canonical_value)
    return lines



def template_base(raw: str | None) -> str | None:
    """A template version without its subjective suffix: ``3+subjective.1`` -> ``3``.

    Items without a key are asked in the condition set's subjective wording, versioned
    ``<version>+subjective.<n>`` (:func:`prism.conditions.subjective_config`): the same condition set on
    an objective and a subjective dataset.
    """
    return raw.split("+subjective.", 1)[0] if raw is not None else None


def _differing(label: str, where: str, key: str, runs: Sequence[LoggedRun],
               canonical: Callable[[str | None], Any]) -> list[str]:
    """The mismatch line of one key over ``runs`` (empty when they agree on it)."""
    # Runs grouped by the canonical value; each group shown with the first run's value as logged.
    groups: dict[Any, tuple[str | None, list[LoggedRun]]] = {}
    for run in runs:
        raw = (run.tags if where == "tag" else run.params).get(key)
        groups.setdefault(canonical(raw), (raw, []))[1].append(run)
    if len(groups) < 2:
        return []
    parts = [f"{_show(raw)} in " + ", ".join(f"run {r.run_id} ({r.model})" for r in members)
             for raw, members in groups.values()]
    return [f"{label} ({where} {key}) differs: " + "; ".join(parts)]


def canonical_value(raw: str | None) -> Any:
    """A logged value as compared: a number as a number, and ``null``/``None``/missing as None."""
    if raw is None or raw.strip().lower() in ("", "null", "none"):
        return None
    try:
        return float(raw)
    except ValueError:
        return raw


def _show(raw: str | None) -> str:
    if canonical_value(raw) is None:
        return "unset"
    text = str(raw)
    return repr(text[:12] + "...") if len(text) > 16 else repr(text)


def search_candidates(client: Any, experiment_id: str) -> list[LoggedRun]:
    """Every FINISHED run of kind ``run`` in the experiment (the filters are applied by :func:`choose_runs`)."""
    query = f"tags.`{TAG_KIND}` = '{KIND_RUN}' and attributes.status = '{FINISHED}'"
    found: list[LoggedRun] = []
    token = None
    while True:
        page = client.search_runs([experiment_id], filter_string=query, max_results=1000,
                                  order_by=["attributes.start_time DESC"], page_token=token)
        found += [LoggedRun.from_mlflow(r) for r in page]
        token = page.token
        if not token:
            return found


def fetch_runs(client: Any, run_ids: Sequence[str]) -> list[LoggedRun]:
    """Look up explicitly named runs, refusing any that is missing, unfinished or not of kind ``run``.

    Raises:
        CompareError: Naming every run that cannot be used, and why.
    """
    runs, problems = [], []
    for run_id in dict.fromkeys(run_ids):  # keep the order, drop repeats
        try:
            run = LoggedRun.from_mlflow(client.get_run(run_id))
        except Exception as exc:  # MLflow raises MlflowException (or a REST error) for unknown ids
            problems.append(f"run {run_id} is not in this tracking store ({type(exc).__name__})")
            continue
        reason = check_selectable(run)
        if reason:
            problems.append(reason)
        runs.append(run)
    if problems:
        raise CompareError("cannot compare the runs given in runs=[...]:\n  - " + "\n  - ".join(problems)
                           + "\nOnly FINISHED runs of kind 'run' can be compared.")
    return runs


def download(run_id: str, artifact_path: str, tracking_uri: str | None, dst: Path,
             artifact_uri: str | None = None) -> Path:
    """Download one artifact of a run through MLflow (works for local stores and servers alike).

    Args:
        run_id: The run.
        artifact_path: The artifact, relative to the run's artifact root.
        tracking_uri: The tracking store.
        dst: Where to put it.
        artifact_uri: The run's artifact root (``run.info.artifact_uri``), when already known: the download
            then skips resolving ``runs:/`` through the store, two lookups of the run per artifact.

    Raises:
        CompareError: If the run has no such artifact.
    """
    import mlflow.artifacts

    dst.mkdir(parents=True, exist_ok=True)
    try:
        with _quiet_downloads():
            if artifact_uri:
                path = mlflow.artifacts.download_artifacts(artifact_uri=f"{artifact_uri.rstrip('/')}/{artifact_path}",
                                                           dst_path=str(dst), tracking_uri=tracking_uri)
            else:
                path = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=artifact_path,
                                                           dst_path=str(dst), tracking_uri=tracking_uri)
    except Exception as exc:  # MlflowException, OSError, or a REST error from a server
        raise CompareError(f"cannot download {artifact_path} of run {run_id}: {exc}") from exc
    return Path(path)


@contextmanager
def _quiet_downloads() -> Iterator[None]:
    """Turn off MLflow's per-file progress bar (a bar per small file buries the tables), unless set."""
    name = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    before = os.environ.get(name)
    if before is None:
        os.environ[name] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)


def load_scored(path: Path) -> pd.DataFrame:
    """Read a run's ``scored.jsonl`` into the observed cells a comparison uses.

    Failed requests (``error`` set) are not observed responses and are dropped. ``category`` is the
    answer with UNKNOWN as its own outcome (:func:`prism.stats.basics.answer_categories`).

    Raises:
        CompareError: If a line is not JSON or a required column is missing.
    """
    records = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise CompareError(f"{path}:{number} is not valid JSON ({exc.msg})") from exc
    return _observed(pd.DataFrame(records), path)


def load_scored_cells(path: Path) -> pd.DataFrame:
    """Read a run's ``cells.parquet`` (:mod:`prism.results.cells_file`) into the cells :func:`load_scored` gives.

    Only the columns a comparison uses are read.

    Raises:
        CompareError: If the file cannot be read as a cells file.
    """
    from prism.results.cells_file import read_cells

    try:
        frame = read_cells(path, [*SCORED_COLUMNS, *LIKELIHOOD_COLUMNS, *OPTIONAL_COLUMNS])
    except (OSError, ValueError) as exc:  # pyarrow's errors are OSError and ValueError subclasses
        raise CompareError(f"cannot read the cells of {path}: {exc}") from exc
    return _observed(frame, path)


def _observed(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """The observed cells of a frame of scored records, with the columns a comparison uses."""
    missing = [c for c in SCORED_COLUMNS if c not in frame.columns]
    if len(frame.columns) and missing:
        raise CompareError(f"{path} lacks the scored-record fields {missing}")
    frame = frame.reindex(columns=[*SCORED_COLUMNS, *LIKELIHOOD_COLUMNS, *OPTIONAL_COLUMNS])
    frame = frame[frame["error"].isna()].drop(columns="error").reset_index(drop=True)
    frame["repetition"] = frame["repetition"].astype("int64")
    frame["correct"] = frame["correct"].astype(bool)
    frame["recovered"] = frame["recovered"].astype(bool)
    frame["category"] = answer_categories(frame["answer"])
    return frame


def load_prompts(path: Path) -> dict[str, str]:
    """Map prompt sha256 to prompt text from a run's ``responses.jsonl`` (scored records drop the text).

    A prompt of several turns is shown whole, each turn under its role (:func:`prism.turns.shown_prompt`).
    """
    prompts: dict[str, str] = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                record = json.loads(line)
                if record.get("prompt_sha256") and record.get("prompt") is not None:
                    prompts[str(record["prompt_sha256"])] = shown_prompt(record)
    return prompts


def load_condition_set(path: Path) -> ConditionSet:
    """A run's condition set, rebuilt from its ``config/resolved.yaml``: families, axes and grid included.

    The set is rebuilt with :func:`prism.conditions.condition_set_from_config` so families and axes mean
    what they meant to the run (template conditions default to ``instruction``).

    Raises:
        CompareError: If the file cannot be read or its condition set cannot be rebuilt.
    """
    import yaml

    from prism.conditions import condition_set_from_config

    try:
        # libyaml's parser where PyYAML has it (the same safe constructor, so the same objects): the pure-Python
        # one took most of this function's time on a whole resolved config.
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        resolved = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
        conditions = resolved["conditions"]
        # Runs of one condition set log the same mapping: it is checked and rebuilt once (through OmegaConf's
        # schema, ~40 ms a run), and the frozen set shared. repr keeps the keys' order and types.
        key = repr(conditions)
        if key not in _CONDITION_SETS:
            if len(_CONDITION_SETS) >= _CONDITION_SETS_KEPT:
                _CONDITION_SETS.clear()
            _CONDITION_SETS[key] = condition_set_from_config(conditions)
        return _CONDITION_SETS[key]
    except (OSError, yaml.YAMLError, KeyError, TypeError, PrismError) as exc:
        raise CompareError(f"cannot read the condition families from {path}: {exc}") from exc


# load_condition_set's rebuilt sets by the repr of their logged mapping (a comparison holds a few at most).
_CONDITION_SETS: dict[str, ConditionSet] = {}
_CONDITION_SETS_KEPT = 64


def load_families(path: Path) -> dict[str, str]:
    """Condition name -> family, from a run's ``config/resolved.yaml`` (:func:`load_condition_set`)."""
    return dict(load_condition_set(path).families)
