"""``compare(cfg)``: from MLflow runs to a comparison run with tables, plots and headline metrics.

select (MLflow) -> refuse mismatches -> download scored records -> tables -> CSV + PNG -> comparison run.
No Hydra import here: the entry point and the sweep callback call :func:`compare` on a :class:`CompareConfig`.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from prism.compare.artifact_cache import ArtifactCache, load_cells
from prism.compare.build import build_tables
from prism.compare.comparison_plan import ComparisonPlan
from prism.compare.comparison_tables import ComparisonTables
from prism.compare.evidence import ReportContext, gather_evidence
from prism.compare.headline import headline_metrics
from prism.compare.report import run_description
from prism.compare.select import (
    CompareError,
    Selection,
    choose_runs,
    fetch_runs,
    find_mismatches,
    label_runs,
    load_condition_set,
    load_prompts,
    search_candidates,
)
from prism.compare.tables import DIVERGENCE_COLUMNS, ModelCells, ordered_scale_notes
from prism.compare.timings import Stopwatch
from prism.config import CompareConfig
from prism.config.choices import ComparePairs
from prism.names import (
    COMPARISON_ARTIFACT_DIR,
    CONFIG_ARTIFACT,
    FINISHED,
    KIND_COMPARISON,
    PARAM_COMPARE_ALLOW_MISMATCH,
    PARAM_COMPARE_BASELINE,
    PARAM_COMPARE_BOOTSTRAP,
    PARAM_COMPARE_FILTER_PREFIX,
    PARAM_COMPARE_MAX_PER_PAIR,
    PARAM_COMPARE_MEASURES,
    PARAM_COMPARE_PAIRS,
    PARAM_COMPARE_PERMUTATIONS,
    PARAM_COMPARE_POWER_SIMULATIONS,
    PARAM_COMPARE_REFERENCE,
    PARAM_COMPARE_SEED,
    PARAM_COMPARE_SELECTION,
    PARAM_COMPARED_MODELS,
    PARAM_COMPARED_RUN_IDS,
    RESPONSES_ARTIFACT,
    TAG_ALLOW_MISMATCH,
    TAG_COMPARED_RUNS,
    TAG_GIT_COMMIT,
    TAG_GIT_DIRTY,
    TAG_KIND,
    TAG_MISMATCHES,
    TAG_OUTPUT_DIR,
    TAG_QUESTION_SET,
    TAG_SWEEP,
    TAG_VERSION,
    LoggedRun,
)
from prism.stats.shifts import DEFAULT_MEASURE, EMBEDDING_MEASURES

if TYPE_CHECKING:
    from prism.compare.embedding import TextEmbeddings
    from prism.conditions import ConditionSet

log = logging.getLogger(__name__)

# Most differing cells the differences table lists per pair of runs (the rest are counted).


@dataclass
class ComparisonResult:
    """What a comparison produced.

    Attributes:
        run_id: The comparison's MLflow run id.
        tracking_uri: The tracking store it was written to.
        experiment_id: Its experiment.
        runs: The compared runs, labelled, in table order.
        mismatches: The comparability keys on which they differ (non-empty only with allow_mismatch).
        tables: Every table (:class:`prism.compare.comparison_tables.ComparisonTables`). ``differences``
            holds the table's first rows (:data:`prism.compare.differences_file.HEAD_ROWS`): the whole
            table is in ``comparison/differences.csv``, written as it was made.
        files: Every file uploaded under ``comparison/`` (``report.html`` last).
        metrics: The headline metrics logged to the run.
        output_dir: Where the files were written before upload.
        baseline: The baseline condition.
        n_boot: Bootstrap resamples used for every interval.
        notes: Sentences a reader must see beside the tables (an ordered scale shown out of its order).
    """

    run_id: str
    tracking_uri: str
    experiment_id: str
    runs: list[LoggedRun]
    mismatches: list[str]
    tables: ComparisonTables
    files: list[Path]
    metrics: dict[str, float]
    output_dir: Path
    baseline: str
    n_boot: int
    notes: list[str] = field(default_factory=list)
    # With embedding_cosine: the embedding model's identity and cache, as logged (prism.compare.embedding).
    embedding: dict[str, str] = field(default_factory=dict)


def selection_from_config(cfg: CompareConfig) -> Selection:
    """Build the run selection from a compare config (``runs`` or the filters, not both).

    Raises:
        CompareError: If both explicit runs and filters are given.
    """
    filters = cfg.filters
    selection = Selection(
        runs=tuple(cfg.runs),
        dataset=filters.dataset or None,
        models=tuple(filters.models),
        conditions=filters.conditions or None,
        sweep=filters.sweep or None,
    )
    if selection.runs and selection.filters():
        raise CompareError(f"runs=[...] names the runs to compare; drop the filters {selection.filters()} "
                           "or the run ids.")
    return selection


def select(client: Any, experiment_id: str, experiment: str, uri: str, selection: Selection) -> list[LoggedRun]:
    """Resolve a selection against the tracking store (see docs/architecture.md and :func:`choose_runs`).

    Raises:
        CompareError: If no run qualifies, naming the experiment, store and filters.
    """
    if selection.runs:
        return label_runs(fetch_runs(client, selection.runs))
    runs = choose_runs(search_candidates(client, experiment_id), selection)
    if not runs:
        filters = f" matching {selection.filters()}" if selection.filters() else ""
        raise CompareError(f"no FINISHED run of kind 'run'{filters} in experiment {experiment!r} of the tracking "
                           f"store {uri}; run `python -m prism` first, or set tracking.uri / tracking.experiment.")
    return label_runs(runs)


def load_models(runs: Sequence[LoggedRun], uri: str | None, cache: ArtifactCache | None = None) -> list[ModelCells]:
    """Download each run's cells (and prompts) through MLflow, or from the cache, and keep the observed cells.

    A run's ``results/cells.parquet`` is read when it logged one, else its ``results/scored.jsonl``
    (:func:`prism.compare.artifact_cache.load_cells`).
    """
    cache = cache or ArtifactCache()
    models = []
    # One copy of each prompt text: runs on one question set and condition set show the same prompts (20 runs
    # held 20 copies of 5,000 prompts, 52 MiB; BENCHMARKS.md section 21).
    texts: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="prism-compare-") as tmp:
        for run in runs:
            dst = Path(tmp) / run.run_id
            cells = load_cells(run, uri, dst, cache)
            try:
                prompts = {sha: texts.setdefault(text, text)
                           for sha, text in load_prompts(cache.fetch(run, RESPONSES_ARTIFACT, uri, dst)).items()}
            except CompareError as exc:  # prompts only enrich the differences table
                log.warning("%s; the differences table will lack prompt texts for it", exc)
                prompts = {}
            design = _condition_set(run, uri, dst, cache)
            # The rebuilt set's names, when there is one: a large grid's names outgrow MLflow's param length.
            conditions = (tuple(design.names) if design is not None else run.conditions) or tuple(
                dict.fromkeys(cells["condition"]))
            models.append(ModelCells(run.label, run.run_id, conditions, cells, prompts, model=run.model,
                                     axis=run.condition_set,
                                     dataset=run.dataset,
                                     question_set=run.question_set,
                                     dataset_type=run.dataset_type,
                                     reordered=_reordered(run, design),
                                     families=design.families if design is not None else {},
                                     axes=design.axes if design is not None else (),
                                     grid=design.grid if design is not None else (),
                                     levels=design.levels if design is not None else {}))
    return models


def _reordered(run: LoggedRun, design: ConditionSet | None) -> tuple[str, ...]:
    """The run's conditions that reorder its ordered scale (``dataset.ordinal``), or ``()``."""
    from prism.conditions import reordering_conditions

    if design is None or not run.ordinal:
        return ()
    return tuple(reordering_conditions(design))


def _condition_set(run: LoggedRun, uri: str | None, dst: Path, cache: ArtifactCache) -> ConditionSet | None:
    """The run's condition set with its families and axes; a run without it falls back, with a warning."""
    try:
        return load_condition_set(cache.fetch(run, CONFIG_ARTIFACT, uri, dst))
    except CompareError as exc:
        log.warning("%s; the clustered model uses the condition set's name as the family of %s, and its steps "
                    "are all tested from the baseline, with no profile", exc, run.label)
        return None


def baseline_of(tables: ComparisonTables, model: str) -> str:
    """The baseline condition of a model, as the sensitivity table names it."""
    rows = tables.sensitivity[tables.sensitivity["model"] == model]
    return str(rows["baseline"].iloc[0]) if not rows.empty else ""


def write_tables(out: Path, tables: ComparisonTables) -> list[Path]:
    """Write each table as ``<name>.csv`` in ``out`` (empty cells for undefined values).

    A table already streamed to its file (the differences: :func:`prism.compare.differences_file.written_to`)
    holds only its first rows; that file is kept (copied here when it was written elsewhere).
    """
    import shutil

    from prism.compare.differences_file import written_to

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, table in tables.items():
        path = out / f"{name}.csv"
        streamed = written_to(table)
        if streamed is not None:
            if streamed.resolve() != path.resolve():
                shutil.copyfile(streamed, path)
            paths.append(path)
            continue
        # Ten significant digits: exact enough to recompute anything, without float noise in every cell.
        table.to_csv(path, index=False, float_format="%.10g")
        paths.append(path)
    return paths


def write_outputs(out: Path, tables: ComparisonTables, report: ReportContext,
                  watch: Stopwatch | None = None) -> list[Path]:
    """Write every file of the comparison into ``out``: the tables as CSV, the plots as PNG, the report page.

    Everything returned is uploaded under ``comparison/``; a new output (another table) is added here.
    ``watch`` times the three stages (CSV, figures, page).
    """
    watch = watch or Stopwatch()
    with watch.stage("write CSV"):
        files = write_tables(out, tables)
    with watch.stage("figures"):
        figures = _figures(out, tables)
    files += figures
    # The page embeds the figures and reads the tables, so it is written last.
    with watch.stage("report page"):
        from prism.compare.report import write_report

        files.append(write_report(out, tables, figures, report))
    return files


def _figures(out: Path, tables: ComparisonTables) -> list[Path]:
    """The PNG figures the report embeds."""
    from prism.compare.plots import write_plots

    # Runs on different question sets have no divergence table: the matrix then shows its diagonal only.
    divergence = tables.divergence if tables.divergence is not None else pd.DataFrame(
        columns=list(DIVERGENCE_COLUMNS))
    disagreement = tables.condition_disagreement if tables.condition_disagreement is not None else pd.DataFrame()
    figures = write_plots(out, tables.accuracy, tables.sensitivity, divergence, disagreement)
    if len(tables.profile):
        from prism.compare.profile_plot import write_profile_plot

        profile = write_profile_plot(out, tables.profile)
        figures += [profile] if profile is not None else []
    return figures


def compare(cfg: CompareConfig, output_dir: str | Path | None = None) -> ComparisonResult:
    """Compare finished runs and record the comparison as a new MLflow run.

    Args:
        cfg: The compare config (``prism/conf/compare.yaml`` as :class:`prism.config.CompareConfig`).
        output_dir: Where the tables and plots are written before upload; defaults to ``cfg.output_dir``
            or ``outputs/compare/<time>``.

    Returns:
        The comparison run and everything in it.

    Raises:
        CompareError: If no run qualifies, a named run cannot be used, the runs differ on a comparability
            key (unless ``allow_mismatch``), or an artifact cannot be read. The message names each problem.
        TrackingError: If the tracking store cannot be used.
    """
    watch = Stopwatch()
    with watch.stage("import mlflow"):
        import mlflow

        from prism.run.tracking import MlflowTracker, resolve_tracking_uri

    measures = list(cfg.measures) or [DEFAULT_MEASURE]
    wants_embeddings = bool(set(measures) & set(EMBEDDING_MEASURES))
    if wants_embeddings:  # refused with the install command before any run is read
        from prism.compare import embedding

        embedding.require()
    allow_mismatch = cfg.allow_mismatch
    selection = selection_from_config(cfg)
    experiment = cfg.tracking.experiment
    uri = resolve_tracking_uri(cfg.tracking.uri, cfg.tracking.require_server) or mlflow.get_tracking_uri()
    client = mlflow.tracking.MlflowClient(uri)
    with watch.stage("select runs"):
        runs = select(client, _experiment_id(client, experiment, uri), experiment, uri, selection)

    # Runs on different question sets are compared (the paired tables pair within a set); nothing else may differ.
    mismatches = find_mismatches(runs, across_question_sets=True)
    if mismatches and not allow_mismatch:
        raise CompareError(
            "refusing to compare runs whose results are not directly comparable:\n  - " + "\n  - ".join(mismatches)
            + "\nCompare runs of one configuration (runs on different datasets or question sets may be compared: "
            "only the parser, the generation settings and the condition set must agree), or pass "
            "allow_mismatch=true to compare them knowingly (recorded on the comparison run)."
        )
    for line in mismatches:
        log.warning("comparing despite a mismatch (allow_mismatch=true): %s", line)

    plan = plan_for(cfg, runs, selection)  # checked here, before any run's cells are downloaded
    cache = ArtifactCache(Path(cfg.artifact_cache).expanduser() if cfg.artifact_cache else None)
    with watch.stage("read runs' cells"):
        models = load_models(runs, uri, cache)
    embed: TextEmbeddings | None = None
    embedding_params: dict[str, str] = {}
    if wants_embeddings:
        embed, _, embedding_params = embedding.embeddings_for([m.cells for m in models], cfg.embedding.cache,
                                                              cfg.embedding.batch_size)
    out = Path(output_dir or cfg.output_dir or _default_output_dir())
    with watch.stage("tables"):
        # The differences table goes to its file as it is made (never whole in memory: pairs=all uncapped).
        tables = build_tables(models, plan, embed, differences_csv=out / COMPARISON_ARTIFACT_DIR / "differences.csv")
    # Each run's distinct ids, not an iteration over every cell (of a pyarrow-backed column: a call per cell).
    n_questions = len(set().union(*(m.cells["question_id"].unique().tolist() for m in models)))
    notes = ordered_scale_notes(models)
    metrics = headline_metrics(tables, n_questions)

    with watch.stage("report evidence"):
        evidence = gather_evidence(client, runs, uri, cache)  # what the report shows of each run, through MLflow

    tracker = MlflowTracker(uri, experiment)
    tags = _tags(runs, selection, mismatches, allow_mismatch, out)
    tags["mlflow.note.content"] = run_description(runs)  # the run page's Description: where the report is
    run_id = tracker.start(_run_name(runs), tags)
    try:
        # Written once the run exists, so the report can name the comparison run it belongs to.
        report = ReportContext(run_id, tracker.experiment_id, tuple(evidence), tuple(mismatches), plan.baseline,
                               plan.n_boot, plan.seed, allow_mismatch, tags[TAG_GIT_COMMIT], tags[TAG_VERSION],
                               notes=tuple(notes))
        files = write_outputs(out / COMPARISON_ARTIFACT_DIR, tables, report, watch)
        tracker.log_params({**_params(runs, selection, plan, allow_mismatch, measures), **embedding_params})
        tracker.log_metrics(metrics)
        with watch.stage("upload"):
            for path in files:
                tracker.log_artifact(path, COMPARISON_ARTIFACT_DIR)
    except BaseException:
        tracker.end("FAILED")
        raise
    tracker.end(FINISHED)
    if cfg.timings:
        print("compare stages (wall seconds):\n" + "\n".join(watch.lines()), flush=True)
    return ComparisonResult(run_id, tracker.uri, tracker.experiment_id, runs, mismatches, tables, files, metrics,
                            out, plan.baseline, plan.n_boot, notes, embedding_params)


def plan_for(cfg: CompareConfig, runs: Sequence[LoggedRun], selection: Selection) -> ComparisonPlan:
    """The comparison's plan, from the checked config and the selected runs (their references chosen here).

    Raises:
        CompareError: If a measure is unknown, or the reference is not among the selected runs.
    """
    pairs, reference, max_per_pair = _pairing(cfg.pairs, cfg.reference, cfg.differences.max_per_pair, runs, selection)
    return ComparisonPlan(baseline=cfg.baseline, n_boot=cfg.bootstrap, seed=cfg.seed,
                          measures=tuple(cfg.measures) or (DEFAULT_MEASURE,), permutations=cfg.permutations,
                          pairs=pairs, reference=reference, max_per_pair=max_per_pair,
                          references=_group_references(pairs, reference, runs, selection),
                          power_simulations=cfg.power_simulations)


def _pairing(pairs: ComparePairs, wanted: str | None, cap: int | None, runs: Sequence[LoggedRun],
             selection: Selection) -> tuple[ComparePairs, str | None, int | None]:
    """``(pairs, reference run id, differences cap)``, checked before any run is downloaded.

    The reference is ``wanted`` (``reference=RUN_ID``) when set, else the first of ``runs=[...]``, else the
    earliest-started selected run (ties broken by run id); it is None with ``pairs=all``.

    Raises:
        CompareError: If ``pairs`` is unknown, the reference is not among the selected runs, or the cap is
            not a whole number of 0 or more.
    """
    if pairs == "all":  # CompareConfig.check refused a reference with it
        return pairs, None, cap
    ids = [r.run_id for r in runs]
    if wanted:
        if str(wanted) not in ids:
            raise CompareError(f"the reference run {wanted} is not among the compared runs ({', '.join(ids)}); pass "
                               "reference=RUN_ID with one of them, or add it to runs=[...]")
        return pairs, str(wanted), cap
    if selection.runs:
        return pairs, selection.runs[0], cap
    return pairs, min(runs, key=lambda r: (r.start_time, r.run_id)).run_id, cap


def _group_references(pairs: ComparePairs, reference: str | None, runs: Sequence[LoggedRun],
                      selection: Selection) -> dict[str, str]:
    """Question set -> its reference run (``pairs=reference``), by :func:`_pairing`'s rule within each set.

    The set holding ``reference`` keeps it; every other set takes its first run of ``runs=[...]``, else
    its earliest-started run (ties broken by run id).
    """
    if pairs != "reference":
        return {}
    found: dict[str, str] = {}
    for question_set in dict.fromkeys(r.question_set for r in runs):
        members = [r for r in runs if r.question_set == question_set]
        ids = [r.run_id for r in members]
        if reference in ids:
            found[question_set] = str(reference)
        elif selection.runs:
            found[question_set] = next(i for i in selection.runs if i in ids)
        else:
            found[question_set] = min(members, key=lambda r: (r.start_time, r.run_id)).run_id
    return found


def _experiment_id(client: Any, experiment: str, uri: str) -> str:
    """The id of the named experiment (never created here: an empty one has nothing to compare)."""
    from prism.run.tracking import TrackingError

    try:
        found = client.get_experiment_by_name(experiment)
    except Exception as exc:  # MLflow raises many types for an unreachable or broken store
        raise TrackingError(f"cannot read the MLflow tracking store {uri!r}: {exc}. Check tracking.uri / "
                            "MLFLOW_TRACKING_URI, or start the server it names.") from exc
    if found is None:
        raise CompareError(f"the tracking store {uri} has no experiment {experiment!r}; run `python -m prism` "
                           "first, or set tracking.uri / tracking.experiment.")
    return str(found.experiment_id)


def _default_output_dir() -> Path:
    from datetime import datetime

    return Path("outputs") / "compare" / datetime.now().strftime("%Y-%m-%d/%H-%M-%S-%f")


def _run_name(runs: Sequence[LoggedRun]) -> str:
    return ("compare-" + "-".join(r.label for r in runs))[:250]


def _tags(runs: Sequence[LoggedRun], selection: Selection, mismatches: Sequence[str], allow_mismatch: bool,
          out: Path) -> dict[str, str]:
    from prism import __version__
    from prism.run.tracking import git_state

    commit, dirty = git_state(Path(__file__).resolve().parent)
    question_sets = sorted({r.question_set for r in runs})
    tags = {
        TAG_KIND: KIND_COMPARISON,
        TAG_COMPARED_RUNS: ",".join(r.run_id for r in runs),
        TAG_QUESTION_SET: question_sets[0] if len(question_sets) == 1 else "mixed",
        TAG_ALLOW_MISMATCH: str(allow_mismatch).lower(),
        TAG_GIT_COMMIT: commit,
        TAG_GIT_DIRTY: str(dirty).lower(),
        TAG_VERSION: __version__,
        TAG_OUTPUT_DIR: str(out.resolve()),
    }
    if mismatches:
        # MLflow caps tag values (8000 characters in recent versions); the full list is in the log.
        tags[TAG_MISMATCHES] = "\n".join(mismatches)[:5000]
    if selection.sweep:
        tags[TAG_SWEEP] = selection.sweep
    return tags


def _params(runs: Sequence[LoggedRun], selection: Selection, plan: ComparisonPlan, allow_mismatch: bool,
            measures: Sequence[str]) -> dict[str, str]:
    """The comparison run's params: what was compared and the plan (``measures`` as the config named them)."""
    params = {
        PARAM_COMPARED_RUN_IDS: ",".join(r.run_id for r in runs),
        PARAM_COMPARED_MODELS: ",".join(r.label for r in runs),
        PARAM_COMPARE_SELECTION: "runs" if selection.runs else "latest per model",
        PARAM_COMPARE_BASELINE: plan.baseline,
        PARAM_COMPARE_BOOTSTRAP: str(plan.n_boot),
        PARAM_COMPARE_SEED: str(plan.seed),
        PARAM_COMPARE_ALLOW_MISMATCH: str(allow_mismatch).lower(),
    }
    params.update({f"{PARAM_COMPARE_FILTER_PREFIX}{k}": v for k, v in selection.filters().items()})
    params.update({PARAM_COMPARE_MEASURES: ",".join(measures), PARAM_COMPARE_PERMUTATIONS: str(plan.permutations),
                   PARAM_COMPARE_POWER_SIMULATIONS: str(plan.power_simulations), PARAM_COMPARE_PAIRS: plan.pairs,
                   PARAM_COMPARE_REFERENCE: plan.reference or "",
                   PARAM_COMPARE_MAX_PER_PAIR: "null" if plan.max_per_pair is None else str(plan.max_per_pair)})
    return params
