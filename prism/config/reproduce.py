"""``prism-reproduce`` (``conf/reproduce.yaml``): which run, where, and changes to its config."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from prism.config.experiment import TrackingConfig


@dataclass
class ReproduceConfig:
    """``python -m prism.reproduce``: which run, where it is, and changes to its logged config."""

    defaults: list[Any] = field(default_factory=list)
    run_id: str = MISSING
    tracking: TrackingConfig = MISSING
    # key=value changes applied to the logged config, e.g. ["dataset.data_dir=/data"].
    overrides: list[str] = field(default_factory=list)
