"""``python -m prism.plan`` / ``prism-plan``: the Hydra entry point of a plan (``prism/conf/plan.yaml``).

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


@hydra.main(version_base="1.3", config_path="pkg://prism.conf", config_name="plan")
def main(cfg: DictConfig) -> None:
    """Plan a study's size by simulation and record the plan as an MLflow run."""
    from prism.config import PlanConfig, to_schema
    from prism.errors import PrismError
    from prism.plan.core import format_plan, plan

    try:
        settings = to_schema(cfg, PlanConfig)
        result = plan(settings, output_dir=settings.output_dir or HydraConfig.get().runtime.output_dir)
    except PrismError as exc:
        log.debug("plan failed", exc_info=True)
        print(f"prism.plan: error: {exc}", file=sys.stderr)
        sys.exit(1)
    print(format_plan(result, settings))


if __name__ == "__main__":
    main()
