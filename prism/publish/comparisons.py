"""The comparisons the site shows: their read-outs, read back from the comparison runs' CSV artifacts.

A comparison run (``prism.kind=comparison``) is shown when every run it compared is on the site (their
cells are what its numbers link to, :mod:`prism.publish.trace`); of several comparisons of the same runs,
the latest. Its tables are the ``comparison/*.csv`` files ``prism.compare`` wrote, read as they were
logged, never recomputed: the page shows the comparison's own numbers.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from prism.compare.comparison_tables import ReadoutTables
from prism.compare.evidence import RunEvidence
from prism.compare.select import CompareError, download
from prism.names import FINISHED, KIND_COMPARISON, TAG_KIND, LoggedRun

log = logging.getLogger(__name__)

# The tables a comparison page reads (``comparison/<name>.csv``); the read-outs and what they rest on.
TABLES = ReadoutTables.names()


@dataclass(frozen=True)
class ComparisonEvidence:
    """One comparison run as the site shows it.

    Attributes:
        run: Its params and tags.
        compared: The run ids it compared, in its order.
        tables: Its read-out tables (None where it logged none).
        problems: What could not be read, said on the page.
    """

    run: LoggedRun
    compared: tuple[str, ...]
    tables: ReadoutTables
    problems: tuple[str, ...] = ()

    @property
    def page(self) -> str:
        """The comparison's page, relative to the site's root."""
        from prism.publish.board import slug

        return f"comparisons/{slug(self.run.run_id)}.html"


def comparison_runs(client: Any, experiment_id: str, shown: Sequence[str]) -> list[LoggedRun]:
    """The latest FINISHED comparison of each set of runs, among those whose compared runs are all ``shown``."""
    query = f"tags.`{TAG_KIND}` = '{KIND_COMPARISON}' and attributes.status = '{FINISHED}'"
    found = [LoggedRun.from_mlflow(r) for r in client.search_runs(
        [experiment_id], filter_string=query, max_results=1000, order_by=["attributes.start_time DESC"])]
    chosen: dict[frozenset[str], LoggedRun] = {}
    for run in sorted(found, key=lambda r: (r.start_time, r.run_id), reverse=True):
        compared = frozenset(_compared(run))
        if compared and compared <= set(shown):
            chosen.setdefault(compared, run)
    return sorted(chosen.values(), key=lambda r: (r.start_time, r.run_id))


def _compared(run: LoggedRun) -> tuple[str, ...]:
    return run.compared_runs


def read_comparisons(runs: Sequence[LoggedRun], uri: str | None) -> list[ComparisonEvidence]:
    """Each comparison's read-out tables, downloaded through MLflow; a missing table is said, never raised."""
    found = []
    with tempfile.TemporaryDirectory(prefix="prism-publish-cmp-") as tmp:
        for run in runs:
            tables: dict[str, pd.DataFrame] = {}
            problems = []
            for name in TABLES:
                try:
                    path = download(run.run_id, f"comparison/{name}.csv", uri, Path(tmp) / run.run_id)
                    tables[name] = _clean(pd.read_csv(path))
                except (CompareError, ValueError) as exc:  # ValueError: pandas on an empty or broken CSV
                    problems.append(f"comparison/{name}.csv could not be read ({exc}); a comparison made before "
                                    "that table existed lacks it")
            for problem in problems:
                log.warning("site, comparison %s: %s", run.run_id, problem)
            found.append(ComparisonEvidence(run, _compared(run), ReadoutTables.from_files(tables), tuple(problems)))
    return found


def _clean(frame: pd.DataFrame) -> pd.DataFrame:
    """Text columns with their empty cells as "" (a CSV's empty text reads back as NaN, a column of them as floats)."""
    for column in frame.columns:
        if column in _TEXT or frame[column].dtype == object or pd.api.types.is_string_dtype(frame[column]):
            values = frame[column].astype(object)
            frame[column] = values.where(values.notna(), "").astype(str)
    return frame


# The read-out tables' text columns (an all-empty one, such as ``note``, reads back as numbers).
_TEXT = frozenset({"model", "run_id", "condition", "metric", "measure", "axis", "scale", "statistic", "from_condition",
                   "to_condition", "measure_a", "measure_b", "note", "model_a", "model_b", "run_a", "run_b",
                   "baseline"})


def comparison_heading(item: ComparisonEvidence, evidence: Sequence[RunEvidence]) -> str:
    """How the site names a comparison: its models, and the dataset of its runs."""
    runs = {e.run.run_id: e.run for e in evidence}
    models = [runs[r].model for r in item.compared if r in runs]
    datasets = list(dict.fromkeys(runs[r].dataset or "?" for r in item.compared if r in runs))
    return f"{' vs '.join(models) or 'comparison'} on {' / '.join(datasets) or '?'}"
