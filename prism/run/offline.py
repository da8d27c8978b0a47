"""Keep a run going when MLflow fails mid-run, and upload it later.

:class:`RecordingTracker` forwards every tracking call to MLflow and also appends it to the run's
``tracking/manifest.jsonl``. If MLflow fails after the run has started (a server that went down, a
full disk under the store), the tracker stops forwarding, says so once, and keeps recording: inference
finishes, every result stays in the run's output directory, and ``python -m prism.upload OUTPUT_DIR``
replays the manifest into a new MLflow run when the store is back.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prism.errors import PrismError
from prism.names import TAG_UPLOADED_FROM
from prism.run.tracking import MlflowTracker, TrackingError

log = logging.getLogger(__name__)

MANIFEST = Path("tracking") / "manifest.jsonl"


class RecordingTracker:
    """An MLflow tracker that records its calls and survives MLflow failing mid-run."""

    def __init__(self, inner: MlflowTracker, out: Path) -> None:
        """Record into ``out/tracking/manifest.jsonl`` (a new file per run)."""
        self._inner = inner
        self._out = out.resolve()
        self._manifest = self._out / MANIFEST
        self._manifest.parent.mkdir(parents=True, exist_ok=True)
        self._manifest.write_text("", encoding="utf-8")
        self.failure: str | None = None
        self._record("connect", uri=inner.uri)

    @property
    def uri(self) -> str:
        """The tracking URI the run was meant for."""
        return self._inner.uri

    @property
    def experiment_id(self) -> str:
        """The experiment the run was meant for."""
        return str(self._inner.experiment_id)

    @property
    def offline(self) -> bool:
        """Whether MLflow failed and calls are only recorded now."""
        return self.failure is not None

    def _record(self, call: str, **kwargs: Any) -> None:
        with self._manifest.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"call": call, **kwargs}, ensure_ascii=False, default=str) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def _forward(self, call: str, *args: Any) -> None:
        if self.offline:
            return
        try:
            getattr(self._inner, call)(*args)
        except Exception as exc:  # any MLflow failure: keep the run going, keep everything locally
            self.failure = f"{call}: {type(exc).__name__}: {exc}"
            log.warning("MLflow failed (%s); the run goes on and keeps its results in %s for "
                        "`python -m prism.upload %s`", self.failure, self._out, self._out)

    def start(self, run_name: str, tags: Mapping[str, str]) -> str:
        """Start the run; a failure here stops the run before any inference (nothing to lose yet)."""
        self._record("start", run_name=run_name, tags=dict(tags))
        return self._inner.start(run_name, tags)

    def log_params(self, params: Mapping[str, str]) -> None:
        """Record and forward params."""
        self._record("log_params", params=dict(params))
        self._forward("log_params", params)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        """Record and forward tags."""
        self._record("set_tags", tags=dict(tags))
        self._forward("set_tags", tags)

    def log_metrics(self, metrics: Mapping[str, float]) -> None:
        """Record and forward metrics (NaN is recorded as null and left out on upload too)."""
        self._record("log_metrics", metrics={k: (None if v != v else v) for k, v in metrics.items()})
        self._forward("log_metrics", metrics)

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        """Record (relative to the output directory) and forward an artifact."""
        resolved = Path(path).resolve()
        shown = str(resolved.relative_to(self._out)) if resolved.is_relative_to(self._out) else str(resolved)
        self._record("log_artifact", path=shown, artifact_path=artifact_path)
        self._forward("log_artifact", resolved, artifact_path)

    def log_question_set(self, questions: Sequence[Mapping[str, Any]], name: str, digest: str, source: str) -> None:
        """Record (by reference to the frozen file) and forward the dataset input."""
        self._record("log_question_set", name=name, digest=digest, source=source)
        self._forward("log_question_set", questions, name, digest, source)

    def end(self, status: str = "FINISHED") -> None:
        """Record and forward the end of the run; offline, only forget it locally (upload ends it later)."""
        self._record("end", status=status)
        if self.offline:
            self._inner.abandon()
        self._forward("end", status)

    def statuses(self, run_ids: Sequence[str]) -> dict[str, str]:
        """Read-only: statuses of earlier runs, or nothing when MLflow is unavailable."""
        if self.offline:
            return {}
        try:
            return self._inner.statuses(run_ids)
        except Exception as exc:  # a lookup must not fail a run
            log.warning("could not read run statuses from MLflow (%s)", exc)
            return {}

    def earlier_digests(self, params: Mapping[str, str], exclude_run_id: str) -> dict[str, list[str]]:
        """Read-only: digests of earlier runs (see ``MlflowTracker.earlier_digests``)."""
        if self.offline:
            return {}
        return self._inner.earlier_digests(params, exclude_run_id=exclude_run_id)


def upload(out: Path, tracking_uri: str | None, experiment: str | None) -> str:
    """Replay a run's manifest into a new MLflow run and return its id.

    Raises:
        PrismError: If ``out`` has no manifest, or MLflow is still unavailable.
    """
    manifest = out / MANIFEST
    if not manifest.is_file():
        raise PrismError(f"{out} has no {MANIFEST}; pass the output directory of a PRISM run.")
    calls = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines() if line.strip()]
    uri = tracking_uri or next((c["uri"] for c in calls if c["call"] == "connect"), None)
    tracker = MlflowTracker(uri, experiment or "prism")
    from prism.questions import read_frozen

    run_id = ""
    for call in calls:
        kind = call["call"]
        if kind == "start":
            tags = {**call["tags"], TAG_UPLOADED_FROM: str(out.resolve())}
            run_id = tracker.start(call["run_name"], tags)
        elif kind == "log_params":
            tracker.log_params(call["params"])
        elif kind == "set_tags":
            tracker.set_tags(call["tags"])
        elif kind == "log_metrics":
            tracker.log_metrics({k: v for k, v in call["metrics"].items() if v is not None})
        elif kind == "log_artifact":
            path = Path(call["path"])
            tracker.log_artifact(path if path.is_absolute() else out / path, call["artifact_path"])
        elif kind == "log_question_set":
            questions = [q.to_dict() for q in read_frozen(out / "questions" / "frozen.jsonl")]
            tracker.log_question_set(questions, call["name"], call["digest"], call["source"])
        elif kind == "end":
            tracker.end(call["status"])
    if not run_id:
        raise PrismError(f"{manifest} records no started run; there is nothing to upload.")
    return run_id


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m prism.upload OUTPUT_DIR [--tracking-uri URI] [--experiment NAME]``."""
    parser = argparse.ArgumentParser(prog="python -m prism.upload",
                                     description="Upload a run whose MLflow logging failed mid-run.")
    parser.add_argument("output_dir", type=Path, help="the run's output directory (holds tracking/manifest.jsonl)")
    parser.add_argument("--tracking-uri", help="where to upload (default: where the run meant to log)")
    parser.add_argument("--experiment", help="experiment name (default: prism)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        run_id = upload(args.output_dir, args.tracking_uri, args.experiment)
    except (PrismError, TrackingError) as exc:
        print(f"prism.upload: error: {exc}", file=sys.stderr)
        sys.exit(1)
    print(f"uploaded {args.output_dir} as MLflow run {run_id}")
