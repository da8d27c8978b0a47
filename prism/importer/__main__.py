"""``prism-import`` / ``python -m prism.importer``: a source log made an ordinary PRISM run (``conf/import.yaml``).

Only Hydra and OmegaConf are imported at module level, so ``--help`` stays fast.
"""

from __future__ import annotations

import logging
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from prism.conf import register_configs

register_configs()
log = logging.getLogger("prism")


@hydra.main(version_base="1.3", config_path="pkg://prism.conf", config_name="import")
def main(cfg: DictConfig) -> None:
    """Import one lm-eval or inspect_ai log as a PRISM run recorded in MLflow."""
    from prism.config import ImportConfig, to_schema
    from prism.errors import PrismError
    from prism.importer.run import import_log

    try:
        settings = to_schema(cfg, ImportConfig)
        result = import_log(settings, settings.output_dir or HydraConfig.get().runtime.output_dir)
    except PrismError as exc:
        log.debug("import failed", exc_info=True)
        print(f"prism.importer: error: {exc}", file=sys.stderr)
        sys.exit(1)
    metrics = result.imported.metrics
    shown = {k: v for k, v in metrics.items() if k in ("accuracy", "cloze_accuracy", "cloze_norm_accuracy")
             or k.startswith(("import_agreement/", "source/"))}
    print(f"imported {result.source.path} ({result.source.tool} {result.source.version}, task {result.source.task}) "
          f"as run {result.run_id}: {len(result.imported.frozen.questions)} questions, conditions "
          f"{', '.join(result.imported.condition_set.names)}")
    for name, value in sorted(shown.items()):
        if value != value:  # NaN: undefined here (a log-likelihood log has no parsed responses)
            continue
        print(f"  {name}: {value:.4g}")
    print(f"  files: {result.imported.out}")


if __name__ == "__main__":
    main()
