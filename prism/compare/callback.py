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
from typing import TYPE_CHECKING, Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

if TYPE_CHECKING:
    from prism.config import CompareConfig

log = logging.getLogger("prism")


class CompareCallback(Callback):
    """Run ``prism.compare`` over a sweep's runs in ``on_multirun_end``."""

    def __init__(self, baseline: str | None = None, bootstrap: int | None = None, seed: int | None = None,
                 allow_mismatch: bool | None = None) -> None:
        """Keep the comparison options (as in ``prism/conf/compare.yaml``); None takes the schema's default."""
        self.baseline, self.bootstrap, self.seed, self.allow_mismatch = baseline, bootstrap, seed, allow_mismatch

    def compare_config(self, config: DictConfig) -> CompareConfig:
        """The compare config for the sweep described by ``config`` (the sweep's primary config)."""
        from prism.config import CompareConfig, CompareFilters, TrackingConfig

        sweep_dir = str(config.hydra.sweep.dir)
        given = OmegaConf.to_container(config.tracking, resolve=True) if "tracking" in config else {}
        assert isinstance(given, dict)
        cfg = CompareConfig(tracking=TrackingConfig(**{str(k): v for k, v in given.items()}),
                            filters=CompareFilters(sweep=sweep_dir), output_dir=str(Path(sweep_dir) / "compare"))
        # Only the options the callback was given replace the schema's defaults.
        for key in ("baseline", "bootstrap", "seed", "allow_mismatch"):
            if getattr(self, key) is not None:
                setattr(cfg, key, getattr(self, key))
        return cfg

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Compare the sweep's runs and print the tables; log (not raise) a refusal or failure."""
        from prism.compare.core import compare
        from prism.compare.terminal import format_comparison
        from prism.errors import PrismError

        cfg = self.compare_config(config)
        try:
            result = compare(cfg)
        except PrismError as exc:
            log.error("comparison of sweep %s not made: %s", cfg.filters.sweep, exc)
            return
        print(format_comparison(result))
