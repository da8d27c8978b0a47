"""Typed schemas for every Hydra config group, registered in Hydra's ConfigStore.

``prism/conf/config.yaml`` lists ``prism_schema`` first in its defaults, so each group's YAML is merged onto
these dataclasses: a misspelled key or a value of the wrong type fails with Hydra's own error instead
of being silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import II, MISSING


@dataclass
class ModelConfig:
    """Which model answers and through which backend.

    Backend-specific keys live here too (unused ones stay null) so one schema checks every model file.
    """

    name: str = MISSING
    backend: str = MISSING
    # llama.cpp: a GGUF file; when null, the weights shipped by ``package`` are used.
    path: str | None = None
    package: str | None = None
    n_ctx: int = 2048
    n_threads: int | None = None
    # llama.cpp chat format (e.g. "gemma"); null uses the chat template stored in the GGUF.
    chat_format: str | None = None
    # Remote backends (Ollama, OpenAI-compatible servers).
    host: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    concurrency: int = 1
    request_timeout_s: float = 120.0
    # Transient failures (refused or dropped connection, timeout, busy server) are retried with
    # exponential backoff and full jitter for at most retry_budget_s after the first failure.
    retry_budget_s: float = 30.0
    retry_base_delay_s: float = 0.5
    retry_max_delay_s: float = 8.0
    num_ctx: int | None = None
    # OpenAI-compatible servers: server-specific fields added to every chat request (they are part of the
    # model digest, since the store key holds only the canonical parameters), and whether generation.top_k
    # is sent; top_k is not an OpenAI field: vLLM, SGLang and llama.cpp's servers accept it, OpenAI rejects it.
    extra_body: dict[str, Any] = field(default_factory=dict)
    send_top_k: bool = False


@dataclass
class DatasetConfig:
    """Which questions are frozen: the sample is fixed by (name, split, n, sample_seed)."""

    name: str = MISSING
    split: str = "test"
    n: int = 100
    sample_seed: int = II("seed")
    data_dir: str | None = None
    cache_dir: str = ".prism/frozen"


@dataclass
class ConditionSpec:
    """One template condition (see ``prism.conditions``)."""

    name: str = MISSING
    description: str = ""
    family: str = "instruction"
    template: str = MISSING


# ---- Step conditions: perturbation sets (``prism.perturbations``) ---------------------------------------


@dataclass
class StepSpec:
    """One perturbation step: ``op`` is its name; ``to`` names the data it uses; ``count`` how many."""

    op: str = MISSING
    to: str | None = None
    count: int | None = None


@dataclass
class VariantSpec:
    """One step condition: the unperturbed P0 rendering with ``steps`` applied in order."""

    family: str = MISSING
    description: str = ""
    steps: list[StepSpec] = field(default_factory=list)


@dataclass
class FormatSpec:
    """A surface format: the body layout, one option line, and the separators."""

    layout: str = MISSING
    option: str = "{label}. {text}"
    option_separator: str = "\n"
    paragraph: str = "\n\n"


@dataclass
class ConditionsConfig:
    """A versioned condition set: template ``conditions`` and/or step ``variants`` with the data they name."""

    name: str = MISSING
    template_version: str = MISSING
    closing: str = MISSING
    baseline: str = "P0"
    conditions: list[ConditionSpec] = field(default_factory=list)
    # Every step seed is derived from this (and the condition, step and question).
    seed: int = II("seed")
    base_format: FormatSpec | None = None
    variants: dict[str, VariantSpec] = field(default_factory=dict)
    formats: dict[str, FormatSpec] = field(default_factory=dict)
    label_sets: dict[str, list[str]] = field(default_factory=dict)
    instructions: dict[str, str] = field(default_factory=dict)
    synonyms: dict[str, list[str]] = field(default_factory=dict)
    protected_words: list[str] = field(default_factory=list)


@dataclass
class GenerationConfig:
    """Canonical generation parameters plus how many repetitions of each cell to ask for."""

    name: str = MISSING
    temperature: float = 0.0
    max_tokens: int = 64
    seed: int = II("seed")
    top_p: float | None = None
    top_k: int | None = None
    repetitions: int = 1


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


# ---------------------------------------------------------------------------------------------------
# ``python -m prism.compare`` (conf/compare.yaml): which runs to compare and how.
# ---------------------------------------------------------------------------------------------------


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
    # The condition every other condition of a model is compared with.
    baseline: str = "P0"
    # Bootstrap resamples (B) and seed of every interval.
    bootstrap: int = 2000
    seed: int = 0
    # Shifts (change beyond noise): difference measures (answer, token_jaccard, edit_distance) and label permutations
    # behind each step's p-value.
    measures: list[str] = field(default_factory=lambda: ["answer"])
    permutations: int = 2000
    # Compare runs whose question set, template version, parser version or generation parameters
    # differ; the comparison run records that it was used.
    allow_mismatch: bool = False
    # Where tables and plots are written before upload; null: Hydra's output directory of the job.
    output_dir: str | None = None


@dataclass
class ReproduceConfig:
    """``python -m prism.reproduce``: which run, where it is, and changes to its logged config."""

    defaults: list[Any] = field(default_factory=list)
    run_id: str = MISSING
    tracking: TrackingConfig = MISSING
    # key=value changes applied to the logged config, e.g. ["dataset.data_dir=/data"].
    overrides: list[str] = field(default_factory=list)


def register_configs() -> None:
    """Register the schemas so ``prism/conf/config.yaml`` and ``compare.yaml`` can name them in their defaults."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="prism_schema", node=PrismConfig)
    ConfigStore.instance().store(name="reproduce_schema", node=ReproduceConfig)
    ConfigStore.instance().store(name="compare_schema", node=CompareConfig)
