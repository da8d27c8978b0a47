"""Which runs the site shows, and what is read of each through MLflow.

The selection keys are ``prism.compare``'s (explicit ``runs``, or ``filters``); without explicit runs the
site shows the latest FINISHED run of kind ``run`` per model x dataset x condition set. Each run is read
as the comparison report reads it (:func:`prism.compare.evidence.read_evidence`), plus its scored
records, which the cell-level intervals and the raw responses come from.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prism.compare.evidence import RunEvidence, read_evidence
from prism.compare.select import (
    CompareError,
    Selection,
    check_selectable,
    fetch_runs,
    passes_filters,
    search_candidates,
)
from prism.names import LoggedRun


@dataclass(frozen=True)
class Cell:
    """Where a run sits on the site: its model, dataset and condition set."""

    model: str
    dataset: str
    conditions: str


def dataset_label(run: LoggedRun) -> str:
    """How the site names the run's dataset: its ``dataset.name``, with the split when it is not ``test``.

    Runs on two splits of one dataset are asked different questions, so they are different columns of
    the site, never one.
    """
    name, split = run.dataset or "not recorded", run.dataset_split or "test"
    return name if split == "test" else f"{name} ({split})"


def cell_of(run: LoggedRun) -> Cell:
    """The run's model x dataset (with its split) x condition set."""
    return Cell(run.model, dataset_label(run), run.condition_set or "not recorded")


def latest_per_cell(candidates: Iterable[LoggedRun], selection: Selection) -> list[LoggedRun]:
    """The latest FINISHED run of kind ``run`` per model x dataset x condition set that passes the filters.

    Returns:
        The runs ordered by model (as ``selection.models`` when given, else by name), dataset, condition set.

    Raises:
        CompareError: If a model named in ``selection.models`` has no run at all.
    """
    eligible = [r for r in candidates if check_selectable(r) is None and passes_filters(r, selection)]
    chosen: dict[Cell, LoggedRun] = {}
    for run in sorted(eligible, key=lambda r: (r.start_time, r.run_id), reverse=True):
        chosen.setdefault(cell_of(run), run)
    if selection.models:
        missing = [m for m in selection.models if m not in {c.model for c in chosen}]
        if missing:
            raise CompareError(f"no FINISHED run of model {', '.join(missing)} passes the filters "
                               f"{selection.filters()}; run it, or drop it from filters.models.")
    order = {m: i for i, m in enumerate(selection.models)}
    return [chosen[c] for c in sorted(chosen, key=lambda c: (order.get(c.model, len(order)), c.model, c.dataset,
                                                             c.conditions))]


def select_runs(client: Any, experiment_id: str, experiment: str, uri: str, selection: Selection) -> list[LoggedRun]:
    """Resolve the selection against the tracking store.

    Raises:
        CompareError: If a named run cannot be used, or no run qualifies (naming the experiment, store and
            filters).
    """
    if selection.runs:
        runs = fetch_runs(client, selection.runs)
    else:
        runs = latest_per_cell(search_candidates(client, experiment_id), selection)
    if not runs:
        filters = f" matching {selection.filters()}" if selection.filters() else ""
        raise CompareError(f"no FINISHED run of kind 'run'{filters} in experiment {experiment!r} of the tracking "
                           f"store {uri}; run `python -m prism` first, or set tracking.uri / tracking.experiment.")
    return [LoggedRun(r.run_id, r.status, r.start_time, r.params, r.tags, label=r.model) for r in runs]


def read_runs(client: Any, experiment_ids: Sequence[str], runs: Sequence[LoggedRun],
              uri: str | None) -> list[RunEvidence]:
    """Each run's metrics, templates, question metrics, frozen questions and scored records, through MLflow.

    Metrics and artifact roots come from one search per hundred runs rather than a lookup per run, and each
    artifact is fetched from the run's artifact root directly.
    """
    found: dict[str, Any] = {}
    ids = [r.run_id for r in runs]
    for start in range(0, len(ids), _BATCH):
        quoted = ", ".join(f"'{run_id}'" for run_id in ids[start:start + _BATCH])
        for made in client.search_runs(list(experiment_ids), filter_string=f"attributes.run_id IN ({quoted})",
                                       max_results=_BATCH):
            found[str(made.info.run_id)] = made
    evidence = []
    with tempfile.TemporaryDirectory(prefix="prism-publish-") as tmp:
        for run in runs:
            made = found.get(run.run_id) or client.get_run(run.run_id)  # a named run of another experiment
            metrics = {str(k): float(v) for k, v in made.data.metrics.items()}
            evidence.append(read_evidence(run, metrics, uri, Path(tmp) / run.run_id, scored=True,
                                          artifact_uri=str(made.info.artifact_uri)))
    return evidence


# Run ids per search (MLflow's SQL stores take a few hundred values in one IN clause).
_BATCH = 100
