"""MLflow, behind a small interface: the only module that writes to MLflow.

``mlflow`` is imported when a tracker is created, never at ``import prism`` (it costs seconds).
Names of params, tags and artifacts are defined once, in :mod:`prism.names`.
"""

from __future__ import annotations

import logging
import math
import os
import subprocess
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prism.errors import PrismError
from prism.names import TAG_MODEL_DIGEST

try:  # POSIX only; elsewhere parallel jobs on one new SQLite store are not serialized
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

DEFAULT_EXPERIMENT = "prism"
# MLflow rejects param values longer than this; longer values are cut and marked.
MAX_PARAM_LENGTH = 6000


class TrackingError(PrismError, RuntimeError):
    """The tracking store cannot be reached or written."""


def resolve_tracking_uri(configured: str | None, require_server: bool = False) -> str | None:
    """``tracking.uri`` when set, else ``MLFLOW_TRACKING_URI``, else None (MLflow's default store).

    Raises:
        TrackingError: If ``require_server`` (``tracking=server``) and neither names a store: falling back
            to a local file would scatter a team's runs over the machines that made them.
    """
    uri = configured or os.environ.get("MLFLOW_TRACKING_URI") or None
    if uri is None and require_server:
        raise TrackingError(
            "tracking=server needs the tracking server's address: pass tracking.uri=http://HOST:5000 or set "
            "MLFLOW_TRACKING_URI (use tracking=local for MLflow's local store)."
        )
    return uri


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Flatten a nested config into ``a.b.c`` keys with string values, as MLflow params."""
    flat: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        elif isinstance(value, list | tuple):
            flat[name] = ",".join(str(v) for v in value)
        else:
            flat[name] = "null" if value is None else str(value)
    return flat


def git_state(path: Path) -> tuple[str, bool]:
    """Return (commit, dirty) of the git work tree holding ``path``, or ("unknown", False) outside git."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown", False
    return commit, bool(status.strip())


@contextmanager
def _sqlite_first_use_lock(uri: str) -> Iterator[None]:
    """Hold an exclusive file lock beside a SQLite tracking store while this process first opens it.

    MLflow creates and migrates a new SQLite store's tables when a process first opens it, without any
    lock of its own: two parallel sweep jobs that start on a new ``mlflow.db`` both migrate and one fails
    ("duplicate column name"). The lock makes the second wait and then find the tables made. Other stores
    (a tracking server, PostgreSQL) serialize this themselves and are not locked.
    """
    if not uri.startswith("sqlite:///") or fcntl is None:
        yield
        return
    database = Path(uri.removeprefix("sqlite:///").split("?", 1)[0])
    if str(database) in ("", ":memory:"):
        yield
        return
    database.parent.mkdir(parents=True, exist_ok=True)
    # "<db>-init.lock" sits next to SQLite's own "<db>-wal" and "<db>-shm" (git-ignored alike).
    with open(f"{database}-init.lock", "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _lost_dataset_race(exc: BaseException) -> bool:
    """Whether an MLflow error is another run inserting the same dataset first (a unique-key violation)."""
    text = str(exc)
    return "dataset" in text and any(mark in text for mark in ("UniqueViolation", "UNIQUE constraint failed",
                                                                "Duplicate entry", "duplicate key value"))


class MlflowTracker:
    """One MLflow run at a time, in one experiment of one tracking store."""

    def __init__(self, uri: str | None, experiment: str = DEFAULT_EXPERIMENT) -> None:
        """Connect to the store and select (creating if needed) the experiment.

        Raises:
            TrackingError: If the store cannot be reached, with the URI and how to point elsewhere.
        """
        import mlflow

        self._mlflow: Any = mlflow
        if uri:
            mlflow.set_tracking_uri(uri)
        self.uri = mlflow.get_tracking_uri()
        try:
            with _sqlite_first_use_lock(self.uri):
                self.experiment_id = mlflow.set_experiment(experiment).experiment_id
        except Exception as exc:  # MLflow raises many types for an unreachable or broken store
            raise TrackingError(
                f"cannot use the MLflow tracking store {self.uri!r} (experiment {experiment!r}): {exc}. "
                "Check tracking.uri / MLFLOW_TRACKING_URI, or start the server it names."
            ) from exc
        self.run_id: str | None = None

    def start(self, run_name: str, tags: Mapping[str, str]) -> str:
        """Start a run and return its id."""
        run = self._mlflow.start_run(run_name=run_name, tags=dict(tags))
        self.run_id = run.info.run_id
        return str(self.run_id)

    def log_params(self, params: Mapping[str, str]) -> None:
        """Log params in batches (MLflow takes at most 100 per call)."""
        items = [(k, v if len(v) <= MAX_PARAM_LENGTH else v[: MAX_PARAM_LENGTH - 3] + "...") for k, v in params.items()]
        for start in range(0, len(items), 100):
            self._mlflow.log_params(dict(items[start : start + 100]))

    def set_tags(self, tags: Mapping[str, str]) -> None:
        """Set tags on the active run."""
        self._mlflow.set_tags(dict(tags))

    def log_metrics(self, metrics: Mapping[str, float]) -> None:
        """Log metrics; NaN values (undefined, e.g. no recovered answer) are left out rather than faked."""
        finite = {k: float(v) for k, v in metrics.items() if v is not None and not math.isnan(float(v))}
        skipped = sorted(set(metrics) - set(finite))
        if skipped:
            log.info("metrics undefined for this run (not logged): %s", ", ".join(skipped))
        keys = list(finite)
        for start in range(0, len(keys), 500):
            self._mlflow.log_metrics({k: finite[k] for k in keys[start : start + 500]})

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        """Upload one file under ``artifact_path``."""
        self._mlflow.log_artifact(str(path), artifact_path)

    def log_question_set(self, questions: Sequence[Mapping[str, Any]], name: str, digest: str, source: str) -> None:
        """Record the frozen question set as the run's dataset input (MLflow's Datasets view)."""
        import pandas as pd

        frame = pd.DataFrame([{**q, "options": "\n".join(q["options"]), "labels": ",".join(q["labels"])}
                              for q in questions])
        with warnings.catch_warnings():
            # MLflow warns that a local path "can be interpreted in multiple ways" and picks the right one.
            warnings.simplefilter("ignore", UserWarning)
            dataset = self._mlflow.data.from_pandas(frame, source=source, name=name, digest=digest[:36])
        try:
            self._mlflow.log_input(dataset, context="evaluation")
        except Exception as exc:
            if not _lost_dataset_race(exc):
                raise
            # Runs of a parallel sweep log the same question set at once; the store looks the dataset up,
            # then inserts it, so the slower insert hits the unique key. The dataset is there now: once more
            # links this run to it.
            log.info("question set %s was being logged by another run at the same time; linking it again", name)
            self._mlflow.log_input(dataset, context="evaluation")

    def end(self, status: str = "FINISHED") -> None:
        """End the active run with ``FINISHED`` or ``FAILED``."""
        self._mlflow.end_run(status=status)
        self.run_id = None

    def abandon(self) -> None:
        """Forget the active run in this process only, without a call to the store (which stays RUNNING).

        For a store that failed mid-run: ``mlflow.end_run`` would first try it again, with all its retries.
        Without this, the next run started in the same process (tests, notebooks, a reproduction) fails
        with MLflow's "Run ... is already active".
        """
        fluent = self._mlflow.tracking.fluent
        stack: list[Any] = getattr(getattr(fluent, "_active_run_stack", None), "get", list)()  # private in MLflow 2, 3
        if stack:
            stack.pop()
        os.environ.pop("MLFLOW_RUN_ID", None)  # what end_run clears too
        self.run_id = None

    def log_artifact_to(self, run_id: str, path: Path, artifact_path: str | None = None) -> None:
        """Attach a file to a run that has already ended (a reproduction's diff, for instance)."""
        self._mlflow.tracking.MlflowClient(self.uri).log_artifact(run_id, str(path), artifact_path)

    def set_tags_on(self, run_id: str, tags: Mapping[str, str]) -> None:
        """Set tags on a run that has already ended."""
        client = self._mlflow.tracking.MlflowClient(self.uri)
        for key, value in tags.items():
            client.set_tag(run_id, key, value)

    def statuses(self, run_ids: Sequence[str]) -> dict[str, str]:
        """Return the MLflow status of each run id that exists in this store."""
        client = self._mlflow.tracking.MlflowClient()
        found: dict[str, str] = {}
        for run_id in run_ids:
            try:
                found[run_id] = str(client.get_run(run_id).info.status)
            except Exception:  # a run of another store, or deleted: not ours to resume from
                continue
        return found

    def earlier_digests(self, params: Mapping[str, str], exclude_run_id: str | None = None) -> dict[str, list[str]]:
        """Map each ``prism.model_digest`` recorded by runs of this experiment whose params match to their ids.

        Args:
            params: Param values the runs must have, e.g. ``{"model.name": "llama3", "model.backend": "ollama"}``.
            exclude_run_id: A run to leave out (the active one).

        Returns:
            Digest -> run ids, newest run first; empty when a value cannot be expressed in MLflow's filter
            syntax (a quote in it), since a wrong answer here is worse than none.
        """
        if not params or any("'" in k or "`" in k or "'" in v for k, v in params.items()):
            return {}
        query = " and ".join(f"params.`{k}` = '{v}'" for k, v in params.items())
        client = self._mlflow.tracking.MlflowClient()
        found: dict[str, list[str]] = {}
        for run in client.search_runs([self.experiment_id], filter_string=query, max_results=1000,
                                      order_by=["attributes.start_time DESC"]):
            digest = run.data.tags.get(TAG_MODEL_DIGEST)
            if digest and run.info.run_id != exclude_run_id:
                found.setdefault(str(digest), []).append(str(run.info.run_id))
        return found
