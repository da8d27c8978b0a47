"""The schema of ``prism/conf/publish.yaml``: which runs the site shows, where it goes, how intervals are drawn."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from prism.config import CompareFilters, TrackingConfig


@dataclass
class PublishOutput:
    """Where the site is written."""

    # The site's directory: new, empty, or an earlier build's (whose pages are replaced).
    out: str = "site"
    # The site's title (default: "PRISM results: <experiment>").
    title: str | None = None
    # A page per comparison run (prism.compare) of runs the site shows: its read-outs, every number linked to
    # the cells behind it.
    comparisons: bool = True


@dataclass
class PublishConfig:
    """``python -m prism.publish``: a static results site from the FINISHED runs of an experiment.

    With ``runs`` empty, the latest FINISHED run of kind ``run`` per model x dataset x condition set is
    shown, among the runs that pass ``filters`` (the keys of ``prism.compare``).
    """

    defaults: list[Any] = field(default_factory=list)
    tracking: TrackingConfig = MISSING
    # Explicit MLflow run ids; when given, the filters must be left unset.
    runs: list[str] = field(default_factory=list)
    filters: CompareFilters = field(default_factory=CompareFilters)
    publish: PublishOutput = field(default_factory=PublishOutput)
    # Bootstrap resamples (B) and seed of every interval, as in prism.compare.
    bootstrap: int = 2000
    seed: int = 0


def register() -> None:
    """Register the schema so ``publish.yaml`` can name it in its defaults."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="publish_schema", node=PublishConfig)
