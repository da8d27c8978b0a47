"""Where one run's cells are asked (``execution``): in this process (``local``) or on Ray actors (``ray``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prism.config.choices import EXECUTION_KINDS, ExecutionKindField, one_of
from prism.errors import ConfigError


@dataclass
class ExecutionConfig:
    """One run's cells in this process, or sharded over ``workers`` Ray actors (``execution=ray``).

    Each actor owns its backend (an embedded model is loaded once per actor; a remote backend gets its own
    client and a share of ``model.endpoints``) and a shard store of its own; the driver merges the shards into
    ``store.path`` and writes the run's one ``responses.jsonl`` and one MLflow run. Not a run parameter: a
    local and a sharded run of the same config are the same experiment.
    """

    # local: this process asks every cell. ray: Ray actors ask them (pip install -e '.[ray]').
    kind: ExecutionKindField = "local"
    # Ray actors, each with its own backend and shard store.
    workers: int = 2
    # null: start a local Ray instance; auto: the cluster this machine belongs to (ray start); HOST:PORT: that
    # cluster's head (its GCS port, 6379 unless ray start --port said otherwise).
    address: str | None = None
    # CPUs Ray reserves for each actor (an embedded model: its model.n_threads; a remote client: 1 or less).
    num_cpus: float = 1.0
    # Custom resources each actor needs, as in the Ray launcher: '+execution.resources={ollama: 1}' places actors
    # only on nodes started with ray start --resources='{"ollama": 1}' (Hydra adds keys to a dict with +).
    resources: dict[str, float] = field(default_factory=dict)
    # Cells sent to an actor per message; each actor holds at most its backend's concurrency plus two batches.
    batch: int = 32
    # Where the actors' shard stores go; null: beside store.path (<store.path>.shards/). A node-local path
    # that the driver can read, or a shared one: the driver merges what it finds there when a run starts.
    shard_dir: str | None = None
    # Seconds to wait for every actor to be placed and to load its model before the run stops with an error.
    start_timeout_s: float = 120.0
    # Extra keyword arguments for ray.init, as hydra.launcher.ray.init: '+execution.init={num_cpus: 2}' (a local
    # instance's CPUs), _temp_dir, include_dashboard, runtime_env, ...
    init: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """Refuse an unknown kind, a worker count or batch below 1, and negative resources.

        Raises:
            ConfigError: Naming the key, the value and what it must be.
        """
        one_of("execution.kind", self.kind, EXECUTION_KINDS)
        if self.workers < 1:
            raise ConfigError(f"execution.workers={self.workers} cannot be used: a sharded run needs at least one "
                              "Ray actor; set execution.workers=N with N >= 1.")
        if self.batch < 1:
            raise ConfigError(f"execution.batch={self.batch} cannot be used: set execution.batch=N with N >= 1 "
                              "(cells sent to an actor per message).")
        if not 0 <= self.num_cpus < float("inf"):
            raise ConfigError(f"execution.num_cpus={self.num_cpus!r} cannot be used: it must be a number >= 0 "
                              "(CPUs Ray reserves for each actor).")
        for name, amount in self.resources.items():
            if not 0 < float(amount) < float("inf"):
                raise ConfigError(f"execution.resources.{name}={amount!r} cannot be used: a custom resource "
                                  "must be a number > 0, e.g. execution.resources={ollama: 1}.")
        if self.address is not None and not self.address.strip():
            raise ConfigError("execution.address='' cannot be used: leave it null for a local Ray instance, or "
                              "set auto or HOST:PORT.")
