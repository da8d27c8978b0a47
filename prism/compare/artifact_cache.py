"""A local cache of finished runs' artifacts, and a run's cells read from Parquet when it logged them.

A FINISHED run's artifacts do not change (MLflow artifacts are written while the run is open; a finished
run is never reopened by PRISM), so a comparison that downloaded one keeps it under
``<root>/<run id>/<artifact path>`` and every later comparison reads it from there instead of through
the tracking store. Runs that are not FINISHED are always downloaded afresh (they are refused by the
selection anyway). A file is moved into the cache only once its download is complete, so an interrupted
comparison leaves no partial entry.

:func:`load_cells` reads a run's ``results/cells.parquet`` (:mod:`prism.results.cells_file`) when it has
one, else its ``results/scored.jsonl`` (runs logged before the Parquet file existed).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from prism.compare.select import CompareError, download, load_scored, load_scored_cells
from prism.names import CELLS_ARTIFACT, FINISHED, SCORED_ARTIFACT, LoggedRun

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArtifactCache:
    """Where finished runs' artifacts are kept between comparisons (None: no cache, every artifact downloaded).

    Attributes:
        root: The cache directory; created on first use.
    """

    root: Path | None = None

    def fetch(self, run: LoggedRun, artifact_path: str, uri: str | None, dst: Path,
              artifact_uri: str | None = None) -> Path:
        """The local path of one artifact of ``run``: from the cache when there, else downloaded (and cached).

        Raises:
            CompareError: If the run has no such artifact.
        """
        if self.root is None or run.status != FINISHED:
            return download(run.run_id, artifact_path, uri, dst, artifact_uri)
        kept = self.root / run.run_id / artifact_path
        if kept.exists():
            return kept
        kept.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".download-", dir=kept.parent))
        try:
            got = download(run.run_id, artifact_path, uri, staging, artifact_uri)
            try:
                os.replace(got, kept)
            except OSError:  # another comparison cached it first (a directory cannot replace a directory)
                if not kept.exists():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return kept


def load_cells(run: LoggedRun, uri: str | None, dst: Path, cache: ArtifactCache | None = None,
               artifact_uri: str | None = None) -> pd.DataFrame:
    """A run's observed cells (:func:`prism.compare.select.load_scored`), from its Parquet cells when logged.

    Raises:
        CompareError: If the run has neither file, or the one it has cannot be read.
    """
    cache = cache or ArtifactCache()
    try:
        path = cache.fetch(run, CELLS_ARTIFACT, uri, dst, artifact_uri)
    except CompareError:  # a run logged before cells.parquet: its JSON records
        log.debug("run %s has no %s; reading %s", run.run_id, CELLS_ARTIFACT, SCORED_ARTIFACT)
        return load_scored(cache.fetch(run, SCORED_ARTIFACT, uri, dst, artifact_uri))
    return load_scored_cells(path)


def read_records(run: LoggedRun, uri: str | None, dst: Path, cache: ArtifactCache | None = None,
                 artifact_uri: str | None = None) -> pd.DataFrame:
    """Every scored record of a run as a frame (every column, failed requests too), Parquet when logged.

    The frame ``pandas.DataFrame`` makes of ``scored.jsonl``'s records (:func:`prism.results.cells_file.read_cells`).

    Raises:
        CompareError: If the run has neither file. ValueError: If a line of ``scored.jsonl`` is not JSON.
    """
    import json

    from prism.results.cells_file import read_cells

    cache = cache or ArtifactCache()
    try:
        path = cache.fetch(run, CELLS_ARTIFACT, uri, dst, artifact_uri)
    except CompareError:
        scored = cache.fetch(run, SCORED_ARTIFACT, uri, dst, artifact_uri)
        with scored.open(encoding="utf-8") as handle:
            return pd.DataFrame([json.loads(line) for line in handle if line.strip()])
    return read_cells(path)
