"""``run(cfg)``: one PRISM experiment from a composed config to a finished MLflow run.

questions -> conditions -> prompts -> backend -> store -> parse -> score -> metrics -> tracking.
No Hydra import below the entry point: tests call :func:`run` on a composed config turned into its schema.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from collections.abc import Iterable, Iterator, Mapping
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from prism import __version__
from prism.backends.base import Backend, Request
from prism.backends.pool import EndpointCount, EndpointPool
from prism.backends.registry import context_limits, create_backend, keyed_settings, require_capabilities
from prism.conditions import (
    ConditionSet,
    check_option_counts,
    condition_set_from_config,
    render_all,
    reordering_conditions,
)
from prism.config import GenerationConfig, PrismConfig
from prism.errors import ConfigError
from prism.names import (
    FINISHED,
    KIND_RUN,
    PARAM_CONDITION_NAMES,
    PARAM_MODEL_BACKEND,
    PARAM_MODEL_NAME,
    PARAM_PARSER_VERSION,
    PARAM_PROTOCOL_VERSION,
    PARAM_SCORER_VERSION,
    PARAM_TEMPLATE_VERSION,
    RUN_ARTIFACT_DIRS,
    TAG_DEMONSTRATIONS,
    TAG_EXECUTION,
    TAG_MODEL_DIGEST_CHANGED_FROM,
    TAG_RESUMED_FROM,
    TAG_SWEEP,
    run_tags,
)
from prism.parsing import PARSER_VERSION
from prism.questions import DROP_TEXT, FrozenSet, freeze_dataset
from prism.questions.demonstrations import DemonstrationDraw
from prism.questions.freezing import frozen_cache_dir
from prism.results.scoring import SCORER_VERSION
from prism.results.summary import score_records, write_results
from prism.run.budget import BudgetGuard, budget_guard
from prism.run.cells import CellGrid, RecordOffsets, records_in_scored_order, reuse_stored
from prism.run.context import check_context
from prism.run.fewshot import with_demonstrations, write_demonstrations
from prism.run.generation import repetition_params, repetition_seed  # noqa: F401  (re-exported)
from prism.run.identities import record_identity
from prism.run.inference import Cell, ask_each
from prism.run.lock import experiment_lock
from prism.run.offline import RecordingTracker
from prism.run.sharding import RayExecution, merge_shards, shard_directory
from prism.run.store import CompletionStore, ResponseLog, open_store, store_directory, sync_interval
from prism.run.tracking import MlflowTracker, TrackingError, git_state, resolve_tracking_uri
from prism.run.usage import Usage
from prism.run.writable import check_writable_dirs
from prism.turns import turn_roles, write_conversations
from prism.types import PROTOCOL_VERSION, ModelIdentity, Prompt, canonical_json, safe_filename

log = logging.getLogger(__name__)

# Config keys that are not run parameters: templates go to prompts/ artifacts, paths are per-machine,
# execution (where the cells are asked) is tagged prism.execution instead: a local and a sharded run are one experiment.
# The perturbation sets' data (steps, formats, label sets, texts, word lists) goes there too;
# conditions.seed stays a param.
_UNLOGGED_PARAMS: tuple[str, ...] = (
    "defaults", "output_dir", "dry_run", "conditions.conditions", "dataset.cache_dir", "execution",
    *(f"conditions.{key}" for key in ("base_format", "variants", "formats", "label_sets", "instructions",
                                      "synonyms", "protected_words", "draws")),
)


@dataclass(frozen=True)
class RunResult:
    """What a finished run produced."""

    run_id: str
    tracking_uri: str
    experiment_id: str
    metrics: dict[str, float]
    output_dir: Path
    n_cached: int
    n_fresh: int
    endpoints: tuple[EndpointCount, ...] = ()
    """With ``model.endpoints``: what each endpoint of the pool answered (printed at the end of a run)."""


def build_requests(frozen: FrozenSet, condition_set: ConditionSet,
                   generation: GenerationConfig) -> list[Request]:
    """Every (condition, question, repetition) cell, condition-major (see ``render_all``), as a list.

    A run makes the same cells one at a time instead (:class:`prism.run.cells.CellGrid`).
    """
    prompts = render_all(frozen.questions, condition_set)
    return [Request(prompt=p, params=params, repetition=repetition)
            for repetition, params in enumerate(repetition_params(generation)) for p in prompts]


def label_sets(requests: Iterable[Request] | Iterable[Prompt]) -> dict[str, tuple[str, ...]]:
    """Condition name -> every label its prompts display (in first-seen order), for the label_probs check."""
    found: dict[str, dict[str, None]] = {}
    for item in requests:
        prompt = item.prompt if isinstance(item, Request) else item
        found.setdefault(prompt.condition, {}).update(dict.fromkeys(prompt.displayed_labels))
    return {condition: tuple(labels) for condition, labels in found.items()}


def run_params(cfg: PrismConfig, condition_set: ConditionSet) -> dict[str, str]:
    """The flattened resolved config as MLflow params, plus every version that can change results."""
    from prism.run.tracking import flatten

    params = {
        k: v for k, v in flatten(cfg.resolved()).items()
        if not any(k == u or k.startswith(u + ".") for u in _UNLOGGED_PARAMS)
        and not (k == "model.endpoints" and not v)  # unset: a one-endpoint run's params are what they were
    }
    params.update(
        {
            PARAM_CONDITION_NAMES: ",".join(condition_set.names),
            PARAM_TEMPLATE_VERSION: condition_set.template_version,
            PARAM_PARSER_VERSION: PARSER_VERSION,
            PARAM_SCORER_VERSION: SCORER_VERSION,
            PARAM_PROTOCOL_VERSION: PROTOCOL_VERSION,
        }
    )
    return params


def default_output_dir() -> Path:
    """``outputs/<date>/<time>`` under the launch directory, like Hydra's own layout."""
    return Path("outputs") / datetime.now().strftime("%Y-%m-%d/%H-%M-%S-%f")


def write_run_inputs(out: Path, cfg: PrismConfig, frozen: FrozenSet, condition_set: ConditionSet) -> None:
    """Write the resolved config, frozen questions and templates that the run's artifacts are made of."""
    plain = cfg.resolved()
    (out / "config").mkdir(parents=True, exist_ok=True)
    hydra_dir = out / ".hydra"
    if hydra_dir.is_dir():  # Hydra's own config.yaml, overrides.yaml and hydra.yaml
        for name in ("config.yaml", "overrides.yaml", "hydra.yaml"):
            if (hydra_dir / name).is_file():
                shutil.copy(hydra_dir / name, out / "config" / name)
    (out / "config" / "resolved.yaml").write_text(yaml.safe_dump(plain, sort_keys=False), encoding="utf-8")
    (out / "questions").mkdir(exist_ok=True)
    shutil.copy(frozen.path, out / "questions" / "frozen.jsonl")
    (out / "prompts").mkdir(exist_ok=True)
    # The condition set as configured: templates, or the steps and the data they name.
    templates = {k: v for k, v in plain["conditions"].items() if v not in (None, {}, [])}
    # The set's name is config text: safe_filename keeps conditions.name=../x from writing outside prompts/.
    (out / "prompts" / f"{safe_filename(condition_set.name)}.yaml").write_text(
        yaml.safe_dump(templates, sort_keys=False, allow_unicode=True), encoding="utf-8"
    )


def run(
    cfg: PrismConfig,
    output_dir: str | Path | None = None,
    sweep_dir: str | None = None,
    extra_tags: Mapping[str, str] | None = None,
) -> RunResult:
    """Run one experiment and record it as one MLflow run.

    Args:
        cfg: The experiment (the composed config as :class:`PrismConfig`, see ``prism.config.to_schema``).
        output_dir: Where the run's files go; defaults to ``cfg.output_dir`` or ``outputs/<time>``.
        sweep_dir: The multirun sweep directory when this run is one job of a sweep (tagged
            ``prism.sweep`` so the MLflow UI selects a sweep's runs together).
        extra_tags: Tags set last, e.g. ``prism.kind=reproduction`` and ``prism.reproduces`` for a
            reproduction.

    Returns:
        The finished run's id and metrics.

    Raises:
        PrismError: For any input, file or service that cannot be used; the MLflow run, if started,
            is marked FAILED with what was collected so far. If MLflow itself fails mid-run, inference
            still finishes and a TrackingError says how to upload the kept results.
    """
    if cfg.dry_run:
        raise ConfigError("dry_run=true asks nothing, so it is not a run: call prism.run.dry_run.plan_run(cfg), as "
                          "python -m prism does, or set dry_run=false.")
    from prism.run.dry_run import plan_run

    pricing = cfg.model.pricing
    # Before any request, the identity probe included; the guard then holds cells back during the run.
    guard = budget_guard(cfg.budget, pricing, lambda: plan_run(cfg))
    out = Path(output_dir or cfg.output_dir or default_output_dir())
    check_writable_dirs(out, frozen_cache_dir(cfg.dataset), store_directory(cfg.store))
    out.mkdir(parents=True, exist_ok=True)
    plan = prepare(cfg, out)
    with ExitStack() as resources:
        resources.callback(plan.backend.close)
        store = open_store(cfg.store)
        if store is not None:
            resources.enter_context(closing(store))
            resources.enter_context(experiment_lock(store.path, plan.experiment_sha256))
            merge_shards(store, shard_directory(cfg.execution, store))  # what killed sharded runs' actors answered
        executor = None
        if cfg.execution.kind == "ray":  # actors started and checked before the MLflow run starts
            executor = resources.enter_context(closing(RayExecution.start(cfg.execution, cfg.model, plan.identity,
                                                                          store)))
        tags = {**experiment_run_tags(plan, out), **({TAG_SWEEP: sweep_dir} if sweep_dir else {}), **(extra_tags or {}),
                **({TAG_EXECUTION: executor.describe()} if executor is not None else {})}
        run_id = plan.tracker.start(plan.run_name, tags)
        if store is not None:  # what a dry run of this model reads to count the cells the store holds
            record_identity(store, plan.backend, plan.identity)
        with _failing_run(plan.tracker, out):
            offsets, n_fresh = ask(plan, store, out, run_id, sync_interval(cfg.store), guard, executor)
    with _failing_run(plan.tracker, out):
        # One record at a time, from the file just written, in scored order: nothing per cell is held.
        usage = Usage()  # tokens and cost, counted as the records pass on their way to scoring
        records = usage.through(records_in_scored_order(out / "responses" / "responses.jsonl", plan.cells, offsets))
        prompts = {(p.question_id, p.condition): p for p in plan.cells.prompts}
        scored = score_records(records, plan.frozen, plan.condition_set, prompts)
        metrics = write_results(out, scored, plan.frozen, plan.condition_set, len(plan.cells.params))
        metrics.update(usage.metrics(plan.condition_set.names, pricing))
        plan.tracker.log_metrics(metrics)
        for sub in RUN_ARTIFACT_DIRS:
            for path in sorted((out / sub).glob("*")):
                plan.tracker.log_artifact(path, sub)
    plan.tracker.end(FINISHED)
    if plan.tracker.offline:
        raise TrackingError(
            f"MLflow failed during the run ({plan.tracker.failure}). Inference finished and nothing is lost: the "
            f"responses, results and a manifest of every tracking call are in {out}. When the tracking store "
            f"is back, upload them with: python -m prism.upload {out}"
        )
    pool = tuple(plan.backend.counts()) if isinstance(plan.backend, EndpointPool) else ()
    return RunResult(run_id, plan.tracker.uri, plan.tracker.experiment_id, metrics, out,
                     n_cached=len(plan.cells) - n_fresh, n_fresh=n_fresh, endpoints=pool)


@dataclass(frozen=True)
class Plan:
    """Everything a run needs before its MLflow run starts: checked inputs, the model, the cells."""

    condition_set: ConditionSet
    frozen: FrozenSet
    backend: Backend
    identity: ModelIdentity
    cells: CellGrid
    tracker: RecordingTracker
    params: dict[str, str]
    experiment_sha256: str
    run_name: str
    demonstrations: DemonstrationDraw | None = None


def prepare(cfg: PrismConfig, out: Path) -> Plan:
    """Check every input and connect to the model and MLflow; nothing is asked yet.

    The backend comes first, so a wrong model path or name is reported before any data is loaded; an
    unreachable tracking store stops the run here, before any inference.
    """
    # Items without a key are asked in the set's subjective wording: no prompt speaks of a correct option.
    condition_set = condition_set_from_config(cfg.conditions, subjective=cfg.dataset.subjective)
    reordered = reordering_conditions(condition_set) if cfg.dataset.ordinal else []
    backend: Backend = create_backend(cfg.model)
    try:
        frozen = freeze_dataset(cfg.dataset)
        if reordered:
            log.warning("dataset %s is an ordered scale (dataset.ordinal=true): conditions %s show its options out "
                        "of their order, so their answers also measure the effect of a broken scale", frozen.dataset,
                        ", ".join(reordered))
        report_dropped(frozen)
        check_option_counts(condition_set, frozen.questions)
        frozen, demonstrations = with_demonstrations(cfg.dataset, frozen, condition_set)
        prompts = render_all(frozen.questions, condition_set)
        # The checks read what the requests will carry (the same in every repetition but for the seed).
        settings = repetition_params(cfg.generation)
        # Before the identity: a backend without label probabilities is refused before any request (a hosted
        # backend's identity probe is a request); one with them reads its identity inside the check.
        require_capabilities(backend, cfg.model, settings[0],
                             label_sets(prompts) if settings[0].label_probs else {}, turn_roles(prompts))
        identity = backend.identity()
        limits = context_limits(backend, cfg.model)
        check_context(limits.window, limits.counter, prompts, settings[0].max_tokens, limits.where)
        cells = CellGrid(prompts, settings, [q.question_id for q in frozen.questions],
                         condition_set.names, identity, frozen.dataset, frozen.split, keyed_settings(cfg.model))
        write_run_inputs(out, cfg, frozen, condition_set)
        write_conversations(out / "prompts", condition_set.name, prompts)
        write_demonstrations(out, demonstrations, frozen, condition_set)
        tracker = RecordingTracker(
            MlflowTracker(
                resolve_tracking_uri(cfg.tracking.uri, cfg.tracking.require_server),
                cfg.tracking.experiment,
            ),
            out,
        )
    except BaseException:
        backend.close()  # nothing was asked yet; release the model or connections before reporting
        raise
    params = run_params(cfg, condition_set)
    return Plan(
        condition_set=condition_set, frozen=frozen, backend=backend, identity=identity, cells=cells,
        tracker=tracker, params=params,
        experiment_sha256=hashlib.sha256(canonical_json(params).encode()).hexdigest(),
        run_name=f"{identity.name}-{frozen.dataset}-{condition_set.name}-seed{cfg.seed}",
        demonstrations=demonstrations,
    )


def report_dropped(frozen: FrozenSet) -> None:
    """Say how many source questions were left out of the pool and why (bad data is an error before this).

    Counts per reason are also tagged on the run (``prism.dropped.<reason>``, see :func:`run_tags`).
    """
    dropped = {reason: count for reason, count in frozen.dropped.items() if count}
    if not dropped:
        return
    log.info("%d question(s) of %s/%s left out of the pool the sample is drawn from (%d eligible): %s",
              sum(dropped.values()), frozen.dataset, frozen.split, frozen.pool_size,
             "; ".join(f"{count} {DROP_TEXT.get(reason, reason)}" for reason, count in dropped.items()))


def experiment_run_tags(plan: Plan, out: Path) -> dict[str, str]:
    """The run tags of docs/reference/mlflow.md: identity, versions, experiment hash, output dir, model details."""
    commit, dirty = git_state(Path(__file__).resolve().parent)
    tags = run_tags(kind=KIND_RUN, digest=plan.identity.digest, question_set=plan.frozen.sha256,
                    dataset_version=plan.frozen.dataset_version, git_commit=commit, git_dirty=dirty,
                    version=__version__, config_sha256=plan.experiment_sha256, output_dir=str(out.resolve()),
                    model_details=plan.identity.details, dropped=plan.frozen.dropped)
    if plan.demonstrations is not None:
        tags[TAG_DEMONSTRATIONS] = plan.demonstrations.sha256
    return tags


def ask(plan: Plan, store: CompletionStore | None, out: Path, run_id: str,
        sync_interval_s: float = 0.0, guard: BudgetGuard | None = None,
        executor: RayExecution | None = None) -> tuple[RecordOffsets, int]:
    """Log the run's inputs, reuse stored cells, ask the model (or ``executor``'s Ray actors) for the rest.

    Within ``guard``'s budget; with actors, up to each actor's concurrency plus two batches are in flight.

    Returns:
        Where each cell's raw record starts in ``responses.jsonl``, and how many cells were asked.

    Raises:
        BudgetReached: When the guard held cells back; every answered cell is kept.
    """
    from tqdm import tqdm

    tracker, frozen, identity, grid = plan.tracker, plan.frozen, plan.identity, plan.cells
    tracker.log_params(plan.params)
    _warn_on_digest_change(tracker, identity, run_id)
    tracker.log_question_set([q.to_dict() for q in frozen.questions],
                             name=f"{frozen.dataset}-{frozen.split}-n{frozen.n}", digest=frozen.sha256,
                             source=str(frozen.path.resolve()))
    offsets = RecordOffsets(len(grid))
    producers: set[str] = set()
    with closing(ResponseLog(out / "responses" / "responses.jsonl", sync_interval_s)) as response_log:
        missing = reuse_stored(grid, store, response_log, offsets, producers.add)
        _tag_resumed(tracker, producers, run_id)
        log.info("%d of %d cells from the store; asking %s for %d", len(grid) - len(missing), len(grid),
                 identity.name, len(missing))
        with tqdm(total=len(missing), desc=f"{identity.name} x {frozen.dataset}", unit="prompt",
                  disable=not missing) as bar:
            cells: Iterator[Cell] = (grid.cell(i) for i in missing)
            if guard is not None:
                cells = guard.cells(cells)
            answered = 0
            try:
                asked = (executor.ask_each(identity, cells, response_log, store, run_id) if executor is not None
                         else ask_each(plan.backend, identity, cells, response_log, store, run_id))
                for record in asked:
                    offsets.note(grid.index(record.cell), response_log.last_offset)
                    answered += 1
                    if guard is not None:
                        guard.spend(record)
                    bar.update()
            finally:
                _log_endpoints(plan.backend)
    if guard is not None and guard.stopped:
        raise guard.reached(len(missing) - answered)
    return offsets, len(missing)


def _log_endpoints(backend: Backend) -> None:
    """With an endpoint pool, one line per endpoint: what it answered and, if it left the pool, why."""
    if isinstance(backend, EndpointPool):
        for count in backend.counts():
            log.info("endpoint %s", count.line())


@contextmanager
def _failing_run(tracker: RecordingTracker, out: Path) -> Iterator[None]:
    """On any error, upload what was collected and mark the MLflow run FAILED, then re-raise."""
    try:
        yield
    except BaseException:
        _log_partial(tracker, out)
        tracker.end("FAILED")
        raise


def _tag_resumed(tracker: Any, reused_from: set[str], run_id: str) -> None:
    """Tag ``prism.resumed_from`` with the killed or failed runs whose stored cells this run reuses."""
    producers = {r for r in reused_from if r != run_id}
    if not producers:
        return
    unfinished = sorted(r for r, status in tracker.statuses(sorted(producers)).items()
                        if status in ("RUNNING", "FAILED", "KILLED"))
    if unfinished:
        tracker.set_tags({TAG_RESUMED_FROM: ",".join(unfinished)})


def _log_partial(tracker: Any, out: Path) -> None:
    """Upload whatever the failed run collected; a failure here must not hide the original error."""
    for sub in RUN_ARTIFACT_DIRS[:-1]:  # not results: a failed run has none
        for path in sorted((out / sub).glob("*")):
            try:
                tracker.log_artifact(path, sub)
            except Exception as exc:  # the tracking store itself may be what failed
                log.warning("could not upload %s to MLflow (%s); it is kept at %s", path.name, exc, path)


def _warn_on_digest_change(tracker: Any, identity: ModelIdentity, run_id: str) -> None:
    """Warn loudly when earlier runs of this model name and backend recorded other weights.

    A tag such as Ollama's ``llama3`` can be re-pulled onto new weights between a run and its resume or
    reproduction. Completions of two digests never mix in one run (the store key includes the digest, so
    nothing stored under the old one is reused); this says so, names both digests, and tags the run
    ``prism.model_digest_changed_from``. A tracking store that cannot be searched skips the check.
    """
    try:
        earlier = tracker.earlier_digests({PARAM_MODEL_NAME: identity.name, PARAM_MODEL_BACKEND: identity.backend},
                                          exclude_run_id=run_id)
    except Exception as exc:  # a warning must never be what fails a run
        log.warning("could not compare the model digest with earlier runs (%s)", exc)
        return
    others = {digest: runs for digest, runs in earlier.items() if digest != identity.digest}
    if not others:
        return
    before = "; ".join(f"{digest} (runs {', '.join(runs[:3])}{', ...' if len(runs) > 3 else ''})"
                       for digest, runs in others.items())
    log.warning(
        "MODEL DIGEST CHANGED: %s (%s) now answers with digest %s, but earlier runs in this experiment "
        "recorded %s. The name points at different weights than before. Completions are never mixed: this "
        "run reuses nothing stored under the earlier digest and its results may differ from those runs. To "
        "reproduce them, serve the weights with the earlier digest.",
        identity.name, identity.backend, identity.digest, before,
    )
    tracker.set_tags({TAG_MODEL_DIGEST_CHANGED_FROM: ",".join(others)})
