"""``prism-compare`` (``conf/compare.yaml``): which runs to compare and how."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, get_args

from omegaconf import MISSING

from prism.config.choices import ComparePairs, ComparePairsField
from prism.config.experiment import TrackingConfig
from prism.errors import ConfigError


@dataclass
class CompareFilters:
    """Which finished runs a comparison considers when no run ids are given.

    Nested under ``filters`` because ``dataset`` and ``conditions`` at the top level would be read by
    Hydra as the main app's config groups of those names.
    """

    # dataset.name of the runs.
    dataset: str | None = None
    # model.name of the runs; each listed model must be found.
    models: list[str] = field(default_factory=list)
    # conditions.name (the condition set) of the runs.
    conditions: str | None = None
    # The multirun sweep directory the runs were tagged with (prism.sweep).
    sweep: str | None = None


@dataclass
class CompareDifferences:
    """How much of the differences table a comparison lists."""

    # Most differing cells listed per pair of runs (the rest are counted in difference_counts.csv);
    # null lists them all. Only the listing is capped: every statistic uses every paired cell.
    max_per_pair: int | None = 200


@dataclass
class CompareEmbedding:
    """The sentence embeddings behind the ``embedding_cosine`` measure (``pip install -e '.[meaning]'``)."""

    # The cache of embeddings by text (SQLite); null: embeddings.sqlite beside the default completion
    # store, .prism/embeddings.sqlite.
    cache: str | None = None
    # Response texts embedded per batch (only texts not yet cached are embedded).
    batch_size: int = 64


@dataclass
class CompareConfig:
    """A comparison of finished runs read from MLflow (see ``prism.compare``).

    With ``runs`` empty, the latest FINISHED run of kind ``run`` per model for the newest question set
    is compared, among the runs that pass ``filters``.
    """

    defaults: list[Any] = field(default_factory=list)
    tracking: TrackingConfig = MISSING
    # Explicit MLflow run ids; when given, the filters must be left unset.
    runs: list[str] = field(default_factory=list)
    filters: CompareFilters = field(default_factory=CompareFilters)
    # Which pairs of runs the divergence and differences tables hold: "reference" (each run against one
    # reference run, linear in the runs) or "all" (every pair, quadratic).
    pairs: ComparePairsField = "reference"
    # The reference run's id; null: the first of ``runs``, else the earliest-started selected run.
    reference: str | None = None
    differences: CompareDifferences = field(default_factory=CompareDifferences)
    # The condition every other condition of a model is compared with.
    baseline: str = "P0"
    # Bootstrap resamples (B) and seed of every interval.
    bootstrap: int = 2000
    seed: int = 0
    # Shifts (change beyond noise): difference measures (answer, token_jaccard, edit_distance, prob_tv,
    # embedding_cosine) and label permutations behind each step's p-value.
    measures: list[str] = field(default_factory=lambda: ["answer"])
    permutations: int = 2000
    # Simulated draws a comparison makes beyond its bootstrap and permutations (the resamples of questions and
    # prompt behind rank_robustness.csv); seeded by ``seed``.
    power_simulations: int = 1000
    embedding: CompareEmbedding = field(default_factory=CompareEmbedding)
    # Compare runs whose question set, template version, parser version or generation parameters
    # differ; the comparison run records that it was used.
    allow_mismatch: bool = False
    # Where tables and plots are written before upload; null: Hydra's output directory of the job.
    output_dir: str | None = None
    # Where finished runs' artifacts are kept between comparisons (<dir>/<run id>/<artifact path>; a
    # finished run's artifacts never change), so a run is downloaded once; null: always download.
    artifact_cache: str | None = ".prism/artifacts"
    # Print how long each stage took (selecting, reading the runs, the tables, the report's evidence, the
    # files, the upload) when the comparison ends.
    timings: bool = False

    def check(self) -> None:
        """Refuse a pairing or a cap no comparison can use, before any run is read.

        Which run is the reference is checked against the selected runs once they are known
        (``prism.compare.core``).

        Raises:
            ConfigError: Naming the key, the value and what it may be.
        """
        if self.pairs not in get_args(ComparePairs):
            raise ConfigError(f"pairs must be one of {', '.join(get_args(ComparePairs))}, got {self.pairs!r}: "
                              "'reference' compares each run with one reference run (reference=RUN_ID), 'all' "
                              "every pair of runs")
        cap = self.differences.max_per_pair
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 0):
            raise ConfigError(f"differences.max_per_pair must be a whole number of 0 or more, or null for no cap; "
                              f"got {cap!r}")
        for key, value in (("bootstrap", self.bootstrap), ("permutations", self.permutations)):
            if value < 1:
                raise ConfigError(f"{key} must be at least 1, got {value}")
        if self.embedding.batch_size < 1:
            raise ConfigError(f"embedding.batch_size must be at least 1, got {self.embedding.batch_size}")
        if self.power_simulations < 1:
            raise ConfigError(f"power_simulations must be at least 1, got {self.power_simulations}: it is how many "
                              "resamples of questions and prompt rank_robustness.csv draws (1000 by default)")
        if self.pairs == "all" and self.reference:
            raise ConfigError(f"reference={self.reference} names the run every other run is compared with, which "
                              "only pairs=reference does; drop reference or set pairs=reference")
