"""Reproduce a logged run from its logged config, and diff the raw responses cell by cell.

The reproduction bypasses the completion store (every cell is asked again), is recorded as a new MLflow
run tagged ``prism.kind=reproduction`` and ``prism.reproduces=<run id>``, and carries its verdict and the
cell-by-cell diff as artifacts under ``reproduction/``. Comparisons are pure functions over records;
only :func:`reproduce` talks to MLflow and the model.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from prism import __version__
from prism.config import PrismConfig, ReproduceConfig, TrackingConfig
from prism.errors import PrismError
from prism.logged_config import prism_config_from_logged
from prism.names import (
    CONFIG_ARTIFACT,
    KIND_REPRODUCTION,
    REPRODUCTION_ARTIFACT_DIR,
    RESPONSES_ARTIFACT,
    TAG_DATASET_VERSION,
    TAG_DEMONSTRATIONS,
    TAG_GIT_COMMIT,
    TAG_KIND,
    TAG_MODEL_DIGEST,
    TAG_QUESTION_SET,
    TAG_REPRODUCES,
    TAG_REPRODUCTION_IDENTICAL,
    TAG_VERSION,
    LoggedRun,
)
from prism.records import CELL_COLUMNS, CellKey

if TYPE_CHECKING:  # pandas is imported where a diff is built, so `prism-reproduce --help` stays light
    import pandas as pd

log = logging.getLogger(__name__)

# Label probabilities (generation.label_probs) of two runs agree when no label differs by more than this:
# llama.cpp's logits are float32, and a reproduction on other hardware may round them differently.
PROB_TOLERANCE = 1e-6


class ReproduceError(PrismError, RuntimeError):
    """The run to reproduce cannot be found or lacks what a reproduction needs."""


@dataclass(frozen=True)
class Check:
    """One item compared between the logged run and this machine before re-running."""

    item: str
    logged: str
    now: str

    @property
    def same(self) -> bool:
        """Whether the item is unchanged."""
        return self.logged == self.now


@dataclass(frozen=True)
class Outcome:
    """What a reproduction found."""

    run_id: str
    identical: bool
    checks: list[Check]
    cells: pd.DataFrame
    metrics: pd.DataFrame

    @property
    def n_different(self) -> int:
        """Cells whose response differs, or that only one side has."""
        return int((self.cells["status"] != "identical").sum())


def diff_cells(original: Sequence[Mapping[str, Any]], again: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Compare two runs' raw responses cell by cell.

    A failed request (``error`` set) counts as its own outcome: a cell that failed in one run and was
    answered in the other differs, and so does a cell asked with another prompt (``prompt_sha256``, which
    covers every turn), whatever it answered. When either run recorded label probabilities, a cell is identical only
    if its ``label_probs`` and ``label_mass`` also agree to :data:`PROB_TOLERANCE`, and the table gains
    ``label_probs_max_diff`` (the largest difference of a label's probability or the mass; inf when only
    one side has them).

    Returns:
        One row per cell of either run, in a stable order, with ``status`` one of ``identical``,
        ``different``, ``missing`` (only the original has it) or ``extra`` (only the reproduction has it),
        and both responses and errors.
    """
    import pandas as pd

    first = {CellKey.of(r): r for r in original}
    second = {CellKey.of(r): r for r in again}
    with_probs = any("label_probs" in r for r in (*original, *again))
    with_cloze = any("cloze_logprobs" in r for r in (*original, *again))
    rows = []
    for key in sorted(set(first) | set(second)):
        a, b = first.get(key), second.get(key)
        gap = cloze = math.nan
        if a is None:
            status = "extra"
        elif b is None:
            status = "missing"
        else:
            same = (a.get("response"), a.get("error") is None) == (b.get("response"), b.get("error") is None)
            # The same answer to another prompt (other turns, another text) is not a reproduction of the cell.
            same = same and a.get("prompt_sha256", "") == b.get("prompt_sha256", "")
            if with_probs:
                gap = probability_gap(a, b)
                same = same and gap <= PROB_TOLERANCE
            if with_cloze:  # generation.cloze: every option's log-likelihood agrees to the same 1e-6
                cloze = cloze_gap(a, b)
                same = same and cloze <= PROB_TOLERANCE
            status = "identical" if same else "different"
        extra = {"label_probs_max_diff": gap} if with_probs else {}
        if with_cloze:
            extra["cloze_max_diff"] = cloze
        rows.append({
            **key._asdict(), "status": status, **extra,
            "original_response": None if a is None else a.get("response"),
            "reproduced_response": None if b is None else b.get("response"),
            "original_error": None if a is None else a.get("error"),
            "reproduced_error": None if b is None else b.get("error"),
        })
    columns = [*CELL_COLUMNS, "status", "original_response", "reproduced_response", "original_error",
               "reproduced_error"]
    return pd.DataFrame(rows, columns=[*columns, *(["label_probs_max_diff"] if with_probs else []),
                                       *(["cloze_max_diff"] if with_cloze else [])])


def cloze_gap(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """The largest difference between two records' per-option cloze log-likelihoods (and token counts).

    0 when neither has any; inf when only one has them or their options or token counts differ.
    """
    la, lb = a.get("cloze_logprobs"), b.get("cloze_logprobs")
    if la is None and lb is None:
        return 0.0
    if not isinstance(la, Mapping) or not isinstance(lb, Mapping) or set(la) != set(lb):
        return math.inf
    if a.get("cloze_tokens") != b.get("cloze_tokens"):
        return math.inf
    return max((abs(float(la[k]) - float(lb[k])) for k in la), default=0.0)


def probability_gap(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """The largest difference between two records' label probabilities and label masses.

    0 when neither has any; inf when only one has them (one run read probabilities the other did not).
    """
    pa, pb = a.get("label_probs"), b.get("label_probs")
    if pa is None and pb is None:
        return 0.0
    if not isinstance(pa, Mapping) or not isinstance(pb, Mapping) or set(pa) != set(pb):
        return math.inf
    gaps = [abs(float(pa[k]) - float(pb[k])) for k in pa]
    ma, mb = a.get("label_mass"), b.get("label_mass")
    if (ma is None) != (mb is None):
        return math.inf
    if ma is not None and mb is not None:
        gaps.append(abs(float(ma) - float(mb)))
    return max(gaps, default=0.0)


def diff_metrics(original: Mapping[str, float], again: Mapping[str, float]) -> pd.DataFrame:
    """Every metric of either run side by side, with ``same`` true when equal to within 1e-12.

    Token and cost metrics are left out: a reproduction served from the store asks nothing, so they differ
    by design, and they say what a run cost, not what it measured.
    """
    import pandas as pd

    from prism.run.usage import is_usage_metric

    rows = []
    for name in sorted(n for n in set(original) | set(again) if not is_usage_metric(n)):
        a, b = original.get(name), again.get(name)
        both_nan = a is not None and b is not None and pd.isna(a) and pd.isna(b)
        same = both_nan or (a is not None and b is not None and abs(float(a) - float(b)) <= 1e-12)
        rows.append({"metric": name, "original": a, "reproduced": b, "same": bool(same)})
    return pd.DataFrame(rows, columns=["metric", "original", "reproduced", "same"])


def localize_data_dir(cfg: PrismConfig) -> tuple[PrismConfig, Check | None]:
    """Use this machine's ``PRISM_DATA_DIR`` when the logged data directory does not exist here."""
    logged = cfg.dataset.data_dir
    here = os.environ.get("PRISM_DATA_DIR")
    if logged and not Path(logged).is_dir() and here:
        moved = replace(cfg, dataset=replace(cfg.dataset, data_dir=here))
        return moved, Check("dataset.data_dir", str(logged), here)
    return cfg, None


def preflight(cfg: PrismConfig, logged: LoggedRun) -> list[Check]:
    """Compare what can be checked before re-running: versions, weights, question set, dataset."""
    from prism.backends.registry import create_backend
    from prism.questions import freeze_dataset
    from prism.run.tracking import git_state

    commit, dirty = git_state(Path(__file__).resolve().parent)
    backend = create_backend(cfg.model)
    try:
        digest = backend.identity().digest
    finally:
        backend.close()
    frozen = freeze_dataset(cfg.dataset)
    checks = []
    if TAG_DEMONSTRATIONS in logged.tags:  # a few-shot run: its frozen draw of demonstrations must be the same too
        from prism.conditions import condition_set_from_config
        from prism.run.fewshot import with_demonstrations

        condition_set = condition_set_from_config(cfg.conditions, subjective=cfg.dataset.subjective)
        _, draw = with_demonstrations(cfg.dataset, frozen, condition_set)
        checks.append(Check(TAG_DEMONSTRATIONS, logged.tags[TAG_DEMONSTRATIONS],
                            draw.sha256 if draw is not None else ""))
    return [
        Check(TAG_VERSION, logged.version, __version__),
        Check(TAG_GIT_COMMIT, logged.git_commit + ("-dirty" if logged.git_dirty else ""),
              commit + ("-dirty" if dirty else "")),
        Check(TAG_MODEL_DIGEST, logged.model_digest, digest),
        Check(TAG_QUESTION_SET, logged.question_set, frozen.sha256),
        Check(TAG_DATASET_VERSION, logged.dataset_version, frozen.dataset_version),
        *checks,
    ]


def reproduce(settings: ReproduceConfig, output_dir: str | Path | None = None) -> Outcome:
    """Re-run ``settings.run_id`` from its logged config with the store bypassed, and diff the result.

    Runs logged before each backend had its own model schema are read too (see
    :func:`prism.logged_config.prism_config_from_logged`).

    Args:
        settings: The run to reproduce, the tracking store it is in (the reproduction is logged there, to
            ``settings.tracking.experiment``), and ``key=value`` changes to its logged config (e.g. a local
            ``dataset.data_dir``).
        output_dir: Where the reproduction's files go.

    Raises:
        ReproduceError: If the run or its logged config cannot be read.
        ConfigError: If the logged config, with the overrides, does not fit this PRISM's schema.
    """
    import mlflow

    from prism.run.pipeline import run
    from prism.run.store import read_jsonl
    from prism.run.tracking import MlflowTracker, resolve_tracking_uri

    run_id, experiment = settings.run_id, settings.tracking.experiment
    tracker = MlflowTracker(resolve_tracking_uri(settings.tracking.uri, settings.tracking.require_server), experiment)
    client = mlflow.tracking.MlflowClient(tracker.uri)
    try:
        logged = client.get_run(run_id)
        config_path = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=CONFIG_ARTIFACT,
                                                          tracking_uri=tracker.uri)
        responses_path = mlflow.artifacts.download_artifacts(
            run_id=run_id, artifact_path=RESPONSES_ARTIFACT, tracking_uri=tracker.uri)
    except Exception as exc:  # MLflow raises several types for a missing run or artifact
        raise ReproduceError(f"cannot read run {run_id!r} and its logged config from {tracker.uri!r}: {exc}. "
                             "Check the run id and tracking.uri / MLFLOW_TRACKING_URI.") from exc
    logged_cfg = yaml.safe_load(Path(config_path).read_text(encoding="utf-8"))
    cfg = prism_config_from_logged(logged_cfg, settings.overrides)
    cfg = replace(cfg, tracking=TrackingConfig(uri=tracker.uri, experiment=experiment),
                  store=replace(cfg.store, enabled=False))
    cfg, moved = localize_data_dir(cfg)
    checks = ([moved] if moved else []) + preflight(cfg, LoggedRun.from_mlflow(logged))
    for check in checks:
        if not check.same:
            log.warning("%s differs: logged %s, now %s", check.item, check.logged, check.now)
    result = run(cfg, output_dir=output_dir,
                 extra_tags={TAG_KIND: KIND_REPRODUCTION, TAG_REPRODUCES: run_id})
    cells = diff_cells(list(read_jsonl(responses_path)),
                       list(read_jsonl(result.output_dir / "responses" / "responses.jsonl")))
    metrics = diff_metrics(logged.data.metrics, result.metrics)
    identical = bool((cells["status"] == "identical").all()) and not cells.empty
    outcome = Outcome(result.run_id, identical, checks, cells, metrics)
    _record(tracker, outcome, result.output_dir / REPRODUCTION_ARTIFACT_DIR)
    return outcome


def _record(tracker: Any, outcome: Outcome, folder: Path) -> None:
    """Write the diff and verdict next to the reproduction's other files and attach them to its run."""
    folder.mkdir(parents=True, exist_ok=True)
    outcome.cells.to_csv(folder / "cells.csv", index=False)
    outcome.metrics.to_csv(folder / "metrics.csv", index=False)
    (folder / "verdict.json").write_text(json.dumps({
        "identical": outcome.identical,
        "cells": len(outcome.cells),
        "different": outcome.n_different,
        "checks": [{"item": c.item, "logged": c.logged, "now": c.now, "same": c.same} for c in outcome.checks],
    }, indent=2), encoding="utf-8")
    for path in sorted(folder.iterdir()):
        tracker.log_artifact_to(outcome.run_id, path, REPRODUCTION_ARTIFACT_DIR)
    tracker.set_tags_on(outcome.run_id, {TAG_REPRODUCTION_IDENTICAL: str(outcome.identical).lower()})


def format_outcome(outcome: Outcome, reproduces: str) -> str:
    """The terminal report: pre-run checks, verdict, and the first differing cells."""
    lines = [f"Reproduction of {reproduces}: run {outcome.run_id}", "", "checks before re-running:"]
    for check in outcome.checks:
        mark = "same" if check.same else f"DIFFERS (logged {check.logged or '-'}, now {check.now or '-'})"
        lines.append(f"  {check.item:<28} {mark}")
    counts = outcome.cells["status"].value_counts().to_dict()
    total = len(outcome.cells)
    if outcome.identical:
        probs = " and label probabilities (to 1e-6)" if "label_probs_max_diff" in outcome.cells else ""
        probs += " and cloze log-likelihoods (to 1e-6)" if "cloze_max_diff" in outcome.cells else ""
        lines += ["", f"IDENTICAL: all {total} responses are the same text{probs}."]
    else:
        lines += ["", f"DIFFERENT: {outcome.n_different} of {total} cells differ "
                      f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})."]
        digest = next((c for c in outcome.checks if c.item == TAG_MODEL_DIGEST), None)
        if digest is not None and not digest.same:
            lines.append("  The model digest differs: new weights behind the same name are the likely cause.")
        for row in outcome.cells[outcome.cells["status"] != "identical"].head(10).itertuples():
            lines.append(f"  {row.status:<9} {row.question_id} {row.condition} rep {row.repetition}: "
                         f"{_short(row.original_response)} -> {_short(row.reproduced_response)}")
    changed = outcome.metrics[~outcome.metrics["same"]]
    lines.append(f"metrics: {len(outcome.metrics) - len(changed)} same, {len(changed)} different"
                 + ("" if changed.empty else f" ({', '.join(changed['metric'].head(8))}...)"))
    lines.append("The cell-by-cell diff is the run's reproduction/cells.csv artifact.")
    return "\n".join(lines)


def _short(text: object, width: int = 40) -> str:
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return "(none)"
    flat = " ".join(str(text).split())
    return repr(flat if len(flat) <= width else flat[: width - 1] + "…")


def main() -> None:
    """``python -m prism.reproduce RUN_ID [tracking.uri=...] ['overrides=["dataset.data_dir=DIR"]']``."""
    import sys

    import hydra
    from omegaconf import DictConfig

    from prism.conf import register_configs

    register_configs()
    # A bare run id as the first argument reads better than run_id=...; Hydra only takes key=value.
    if len(sys.argv) > 1 and "=" not in sys.argv[1] and not sys.argv[1].startswith("-"):
        sys.argv[1] = f"run_id={sys.argv[1]}"

    @hydra.main(version_base="1.3", config_path="pkg://prism.conf", config_name="reproduce")
    def app(cfg: DictConfig) -> None:
        from hydra.core.hydra_config import HydraConfig

        from prism.config import to_schema

        try:
            settings = to_schema(cfg, ReproduceConfig)
            outcome = reproduce(settings, HydraConfig.get().runtime.output_dir)
        except PrismError as exc:
            print(f"prism.reproduce: error: {exc}", file=sys.stderr)
            sys.exit(2)
        print(format_outcome(outcome, settings.run_id))
        sys.exit(0 if outcome.identical else 1)

    app()


if __name__ == "__main__":
    main()
