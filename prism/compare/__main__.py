"""``python -m prism.compare``: the Hydra entry point of the comparison (``prism/conf/compare.yaml``).

Only Hydra and OmegaConf are imported at module level, so ``--help`` and ``--cfg job`` stay fast;
MLflow, pandas, scipy and matplotlib are imported when a comparison actually runs.
"""

from __future__ import annotations

import logging
import os
import sys

# One OpenBLAS thread unless the caller set one (before numpy loads it, which prism.conf's import does): the
# comparison's products and solves are small (p x p for p ~ 100, bootstrap weights against a few columns),
# and a second thread spinning beside them cost ~2 s of CPU at 20 runs, up to ~7 s in the clustered model's
# detectable effects when the other core was busy (BENCHMARKS.md section 21). The numbers are the same.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from prism.conf import register_configs

register_configs()
log = logging.getLogger("prism")


@hydra.main(version_base="1.3", config_path="pkg://prism.conf", config_name="compare")
def main(cfg: DictConfig) -> None:
    """Compare finished PRISM runs from MLflow and record the comparison as a new run."""
    from prism.compare.core import compare
    from prism.compare.terminal import format_comparison
    from prism.config import CompareConfig, to_schema
    from prism.errors import PrismError

    try:
        settings = to_schema(cfg, CompareConfig)
        result = compare(settings, output_dir=settings.output_dir or HydraConfig.get().runtime.output_dir)
    except PrismError as exc:
        # One paragraph on stderr, no traceback, as the main app does: the person can fix these.
        log.debug("comparison failed", exc_info=True)
        print(f"prism.compare: error: {exc}", file=sys.stderr)
        sys.exit(1)
    print(format_comparison(result))


if __name__ == "__main__":
    main()
