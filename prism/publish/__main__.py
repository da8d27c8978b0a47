"""``python -m prism.publish`` / ``prism-publish``: the Hydra entry point of the results site.

Only Hydra and OmegaConf are imported at module level, so ``--help`` stays fast; MLflow, pandas and
Jinja2 are imported when a site is built.
"""

from __future__ import annotations

import logging
import sys

import hydra
from omegaconf import DictConfig

from prism.conf import register_configs
from prism.publish.config import register

register_configs()
register()
log = logging.getLogger("prism")


@hydra.main(version_base="1.3", config_path="pkg://prism.conf", config_name="publish")
def main(cfg: DictConfig) -> None:
    """Build the static results site from the experiment's finished runs."""
    from prism.config import to_schema
    from prism.errors import PrismError
    from prism.publish.config import PublishConfig
    from prism.publish.site import publish

    try:
        built = publish(to_schema(cfg, PublishConfig))
    except PrismError as exc:
        log.debug("publishing failed", exc_info=True)
        print(f"prism.publish: error: {exc}", file=sys.stderr)
        sys.exit(1)
    print(built.describe())


if __name__ == "__main__":
    main()
