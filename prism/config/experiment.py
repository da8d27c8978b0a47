"""The whole experiment (``prism``'s primary config) and its small groups: tracking, store, budget."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from omegaconf import MISSING

from prism.config.conditions import ConditionsConfig
from prism.config.dataset import DatasetConfig
from prism.config.execution import ExecutionConfig
from prism.config.generation import GenerationConfig
from prism.config.model import ModelConfig, PricingConfig
from prism.errors import ConfigError


@dataclass
class TrackingConfig:
    """Where MLflow runs go: ``uri`` wins, else ``MLFLOW_TRACKING_URI``, else MLflow's default store."""

    uri: str | None = None
    experiment: str = "prism"
    # tracking=server sets this: no URI is then an error, not a silent fall back to a local file.
    require_server: bool = False


@dataclass
class StoreConfig:
    """The content-addressed completion store that makes reruns free and interrupted runs resumable."""

    enabled: bool = True
    path: str = ".prism/store.sqlite"
    # 0: every completion is fsynced (store and responses.jsonl) before the next is handled. A positive
    # value fsyncs at most that many seconds later instead: a killed run still loses nothing (each record
    # reaches the OS at once), a power loss at most that interval, which a resumed run asks again. An
    # fsync can cost more than a fast server's or a replayed completion (prism/run/store.py).
    sync_interval_s: float = 0.0

    def check(self) -> None:
        """Refuse a sync interval that is not a number of seconds >= 0.

        Raises:
            ConfigError: Naming the value and what it means.
        """
        if not 0 <= self.sync_interval_s < float("inf"):
            raise ConfigError(f"store.sync_interval_s={self.sync_interval_s!r} cannot be used: it must be a number "
                              ">= 0 (0 fsyncs every completion; N fsyncs at most N seconds after one). Set it with "
                              "store.sync_interval_s=VALUE.")


@dataclass
class BudgetConfig:
    """Caps on what one run may ask (``budget``): a plan over a cap is refused before any request."""

    # US dollars this run may spend at model.pricing (which must then be set); null: no cap.
    max_usd: float | None = None
    # Requests to the model server this run may send for cells (the identity probe not counted); null: no cap.
    max_requests: int | None = None

    @property
    def limited(self) -> bool:
        """Whether any cap is set."""
        return self.max_usd is not None or self.max_requests is not None

    def check(self, pricing: PricingConfig) -> None:
        """Refuse caps that cannot be meant; a spending cap needs the model's prices to count spending.

        Raises:
            ConfigError: If a cap is negative or not finite, or ``max_usd`` is set without ``model.pricing``.
        """
        if self.max_requests is not None and self.max_requests < 0:
            raise ConfigError(f"budget.max_requests={self.max_requests} must be a number of requests >= 0.")
        if self.max_usd is not None:
            if not (math.isfinite(self.max_usd) and self.max_usd >= 0):
                raise ConfigError(f"budget.max_usd={self.max_usd!r} must be an amount in US dollars >= 0.")
            if not pricing.priced:
                raise ConfigError("budget.max_usd needs the model's prices to count spending: set "
                                  "model.pricing.input_per_mtok and model.pricing.output_per_mtok (US dollars per "
                                  "million tokens, from the provider's price page).")


@dataclass
class PrismConfig:
    """The whole experiment. ``seed`` is the base of every seed not set explicitly."""

    defaults: list[Any] = field(default_factory=list)
    model: ModelConfig = MISSING
    dataset: DatasetConfig = MISSING
    conditions: ConditionsConfig = MISSING
    generation: GenerationConfig = MISSING
    tracking: TrackingConfig = MISSING
    store: StoreConfig = MISSING
    seed: int = 0
    # Where the run's responses.jsonl and reports go; the Hydra entry point sets it to the job's
    # output directory.
    output_dir: str | None = None
    # Print the plan (cells, how many the store holds, requests left, estimated tokens and cost) and exit:
    # no request to the model server, no MLflow run.
    dry_run: bool = False
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    # Where the cells are asked: this process (execution=local) or Ray actors (execution=ray).
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)

    def check(self) -> None:
        """Check every group once, when the config is built (:func:`to_schema`): nothing is asked before.

        The condition set is checked as it is built (``prism.conditions.condition_set_from_config``), since
        its checks need the steps it names.

        Raises:
            ConfigError: (or ``DataError`` for the dataset) naming the first key that cannot be used.
        """
        # The base of every seed not set explicitly: refused here by its own name, not by the first group that
        # interpolates it (``generation.seed=${seed}``), which a person who typed seed=-1 never set.
        if self.seed < 0:
            raise ConfigError(f"seed={self.seed} cannot be used: it must be a whole number >= 0 (it is the base of "
                              "generation.seed, dataset.sample_seed and conditions.seed). Set it with seed=VALUE.")
        self.model.check()
        self.dataset.check()
        self.generation.check()
        self.store.check()
        self.budget.check(self.model.pricing)
        self.execution.check()

    def resolved(self) -> dict[str, Any]:
        """The experiment as its ``config/resolved.yaml`` and MLflow params record it: each group's fields, nested.

        Hydra's ``defaults`` list is the composition order, not configuration: it is left out, as Hydra leaves it
        out of a composed config.
        """
        record = asdict(self)
        record.pop("defaults", None)
        return record
