"""One import: read the log, write the run's files, record the run (:func:`import_log`)."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path

from prism.config import ImportConfig
from prism.importer.build import Imported, Source, prepare, upload

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ImportResult:
    """A finished import: the run and what it measured."""

    run_id: str
    imported: Imported
    source: Source


def read_source(cfg: ImportConfig) -> Source:
    """The log named by ``cfg`` read and checked whole, as a :class:`Source`.

    Raises:
        ImportLogError: Naming the file, line and fix of anything that cannot be read.
    """
    path = Path(cfg.path).expanduser()
    if cfg.format == "lm_eval":
        from prism.importer.lm_eval import TOOL, read_lm_eval

        read = read_lm_eval(path, task=cfg.task, mapping=cfg.mapping, dataset=cfg.dataset.name, split=cfg.dataset.split,
                            filter_name=cfg.filter)
        details = {"source_model": read.model} if read.model else {}
        details.update({"kind": read.kind, "mapping": read.mapping, **({"filter": read.filter} if read.filter else {})})
        return Source(TOOL, path, read.task, read.version, read.cells, cfg.model.name or read.model or f"{TOOL}-model",
                      read.generation, cfg.dataset.name or read.cells[0].question.dataset, cfg.dataset.split, details)
    from prism.importer.inspect_log import TOOL as INSPECT
    from prism.importer.inspect_log import read_inspect

    got = read_inspect(path, dataset=cfg.dataset.name, split=cfg.dataset.split, scorer=cfg.scorer)
    model = cfg.model.name or (got.model.rsplit("/", 1)[-1] if got.model else f"{INSPECT}-model")
    details = {"source_model": got.model or "", "scorer": got.scorer}
    return Source(INSPECT, path, got.task, got.version, got.cells, model, got.generation,
                  got.cells[0].question.dataset, cfg.dataset.split, {k: v for k, v in details.items() if v})


def import_log(cfg: ImportConfig, output_dir: str | Path) -> ImportResult:
    """Import the log ``cfg`` names as one PRISM run.

    Raises:
        ConfigError: For a setting that cannot be used.
        ImportLogError: For a log that cannot be read (nothing was recorded in MLflow).
        TrackingError: If MLflow failed while the run was recorded (the run is FAILED, the files kept).
    """
    cfg.check()
    from prism.config import check_model_name

    source = read_source(cfg)
    check_model_name(source.model)
    out = Path(output_dir)
    settings = {k: v for k, v in asdict(cfg).items() if k not in ("defaults",)}
    imported = prepare(source, out, settings)
    run_id = upload(imported, cfg.tracking.uri, cfg.tracking.experiment, cfg.tracking.require_server)
    return ImportResult(run_id, imported, source)
