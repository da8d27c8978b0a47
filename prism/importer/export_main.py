"""``prism-export`` / ``python -m prism.importer.export_main``: a run or a comparison as a Hugging Face dataset.

Only Hydra and OmegaConf are imported at module level, so ``--help`` stays fast; MLflow and ``datasets`` are
imported when work starts.
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

import hydra
from omegaconf import DictConfig

from prism.conf import register_configs

register_configs()
log = logging.getLogger("prism")


def export(run: str, out: Path, tracking_uri: str | None, push_to: str | None = None,
           overwrite: bool = False) -> tuple[Path, str | None]:
    """Export run ``run`` (or a comparison's runs) to ``out``; push it when ``push_to`` names a Hub repo."""
    from prism.importer.export import fetch, push, write_dataset
    from prism.run.tracking import resolve_tracking_uri

    uri = resolve_tracking_uri(tracking_uri)
    with tempfile.TemporaryDirectory(prefix="prism-export-") as work:
        kind, runs = fetch(run, uri, Path(work))
        write_dataset(runs, out, kind, run, overwrite)
    return out, push(out, push_to) if push_to else None


@hydra.main(version_base="1.3", config_path="pkg://prism.conf", config_name="export")
def main(cfg: DictConfig) -> None:
    """Write one run or comparison as a dataset folder."""
    from prism.config import ExportConfig, to_schema
    from prism.errors import PrismError

    try:
        settings = to_schema(cfg, ExportConfig)  # checked once, there
        out, pushed = export(settings.run, Path(settings.out), settings.tracking.uri, settings.push,
                             settings.overwrite)
    except PrismError as exc:
        log.debug("export failed", exc_info=True)
        print(f"prism.export: error: {exc}", file=sys.stderr)
        sys.exit(1)
    print(f"exported {settings.run} to {out} (datasets.load_dataset(out), or load_from_disk(out/disk))")
    if pushed:
        print(f"pushed: {pushed}")


if __name__ == "__main__":
    main()
