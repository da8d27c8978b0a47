"""A Hydra callback that compares the runs of a multirun sweep when the sweep ends (off by default).

Enable it for one sweep with ``hydra/callbacks=compare`` (``prism/conf/hydra/callbacks/compare.yaml``)::

    python -m prism -m model=smollm2,gemma3_270m dataset.n=20 hydra/callbacks=compare

It selects the FINISHED runs tagged with the sweep's directory (``prism.sweep``), in the sweep's
tracking store and experiment, applies the usual refusal on mismatched runs, and writes the comparison
run and its files under ``<sweep dir>/compare``. A refusal or error is logged, not raised: the sweep's
own runs are already recorded and stay valid.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("prism")


class CompareCallback(Callback):
    """Run ``prism.compare`` over a sweep's runs in ``on_multirun_end``."""

    def __init__(self, baseline: str = "P0", bootstrap: int = 2000, seed: int = 0,
                 allow_mismatch: bool = False) -> None:
        """Keep the comparison options (the same meaning as in ``prism/conf/compare.yaml``)."""
        self.baseline = baseline
        self.bootstrap = bootstrap
        self.seed = seed
        self.allow_mismatch = allow_mismatch

    def compare_config(self, config: DictConfig) -> dict[str, Any]:
        """The compare config for the sweep described by ``config`` (the sweep's primary config)."""
        sweep_dir = str(config.hydra.sweep.dir)
        tracking = OmegaConf.to_container(config.tracking, resolve=True) if "tracking" in config else {}
        return {
            "tracking": tracking, "runs": [], "filters": {"sweep": sweep_dir}, "baseline": self.baseline,
            "bootstrap": self.bootstrap, "seed": self.seed,
            "allow_mismatch": self.allow_mismatch, "output_dir": str(Path(sweep_dir) / "compare"),
        }

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Compare the sweep's runs and print the tables; log (not raise) a refusal or failure."""
        from prism.compare.core import compare
        from prism.compare.terminal import format_comparison
        from prism.errors import PrismError

        cfg = self.compare_config(config)
        try:
            result = compare(cfg)
        except PrismError as exc:
            log.error("comparison of sweep %s not made: %s", cfg["filters"]["sweep"], exc)
            return
        print(format_comparison(result))
