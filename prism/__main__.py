"""``python -m prism``: the Hydra entry point. It composes the config and hands it to ``pipeline.run``.

Only Hydra and OmegaConf are imported here, so ``--help`` and ``--cfg job`` stay fast; MLflow,
llama.cpp and ``datasets`` are imported by the pipeline when a run actually starts.
"""

from __future__ import annotations

import logging
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from prism.conf import register_configs

register_configs()
log = logging.getLogger("prism")


@hydra.main(version_base="1.3", config_path="pkg://prism.conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Run one PRISM experiment (one job of a sweep under ``-m``)."""
    from prism.conditions import condition_set_from_config
    from prism.config import PrismConfig, to_schema
    from prism.errors import PrismError
    from prism.results.summary import format_summary
    from prism.run.pipeline import run

    hydra_cfg = HydraConfig.get()
    sweep_dir = hydra_cfg.sweep.dir if hydra_cfg.mode is RunMode.MULTIRUN else None
    try:
        experiment = to_schema(cfg, PrismConfig)
        if experiment.dry_run:  # what a run would ask and cost; nothing is sent, no MLflow run is made
            from prism.run.dry_run import format_plan, plan_run

            print(format_plan(plan_run(experiment)))
            return
        result = run(experiment, output_dir=hydra_cfg.runtime.output_dir, sweep_dir=sweep_dir)
    except PrismError as exc:
        # One paragraph on stderr, no traceback: these are inputs or services the person can fix.
        log.debug("run failed", exc_info=True)
        print(f"prism: error: {exc}", file=sys.stderr)
        sys.exit(1)
    names = condition_set_from_config(experiment.conditions).names
    print(format_summary(result.metrics, names))
    print(f"\nMLflow run {result.run_id} (experiment id {result.experiment_id}); "
          f"{result.n_cached} responses from the store, {result.n_fresh} new.")
    if result.endpoints:
        print(f"Endpoints ({len(result.endpoints)}):")
        for count in result.endpoints:
            print(f"  {count.line()}")
    run_path = f"#/experiments/{result.experiment_id}/runs/{result.run_id}"
    if result.tracking_uri.startswith(("http://", "https://")):
        # A tracking server serves its own UI; `mlflow ui` only opens a local store.
        print(f"Open it: {result.tracking_uri.rstrip('/')}/{run_path}")
    else:
        print(f"Open it: mlflow ui --backend-store-uri {result.tracking_uri}")
        print(f"         then http://127.0.0.1:5000/{run_path}")


if __name__ == "__main__":
    main()
