"""Typed schemas for every Hydra config group, registered in Hydra's ConfigStore.

``prism/conf/config.yaml`` lists ``prism_schema`` first in its defaults, so each group's YAML is merged onto
these dataclasses: a misspelled key or a value of the wrong type fails with Hydra's own error instead
of being silently ignored.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, get_args, runtime_checkable

from omegaconf import II, MISSING

from prism.errors import ConfigError, DataError
from prism.types import canonical_json, sha256_text

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

    def check(self) -> None:
        """Refuse prices that cannot be meant, before anything is asked.

        Raises:
            ConfigError: If only one of the two prices is set, or a price or the discount is out of range.
        """
        given = {"input_per_mtok": self.input_per_mtok, "output_per_mtok": self.output_per_mtok}
        unset = [k for k, v in given.items() if v is None]
        if len(unset) == 1:
            other = next(k for k in given if k not in unset)
            raise ConfigError(f"model.pricing.{other} is set but model.pricing.{unset[0]} is not: set both (US "
                              "dollars per million tokens, from the provider's price page), or neither for no "
                              "cost_usd.")
        for key, value in given.items():
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"model.pricing.{key}={value!r} must be a price >= 0 in US dollars per million "
                                  "tokens.")
        if not (math.isfinite(self.batch_discount) and 0 < self.batch_discount <= 1):
            raise ConfigError(f"model.pricing.batch_discount={self.batch_discount!r} must be in (0, 1]: the "
                              "fraction of the price a batch API charges (0.5: half price).")


def check_model_name(name: str) -> None:
    """Refuse a model name with a path segment ``.`` or ``..``, or a control character (see ``ModelConfig.check``).

    Raises:
        ConfigError: Naming the value and what is allowed.
    """
    if any(segment.strip() in (".", "..") for segment in name.split("/")) or any(ord(c) < 32 for c in name):
        raise ConfigError(f"model.name={name!r} cannot name a model: it may not be '.' or '..', contain such "
                          "a path segment, or hold control characters. Set model.name=NAME to the model's tag "
                          "or served id (e.g. llama3:8b or org/model).")


@dataclass
class ModelConfig:
    """Which model answers and through which backend: the base of one schema per backend.

    Each model YAML names its backend's schema first in its defaults (``- /schema/model/llamacpp@_here_``),
    so a key that backend does not read fails at composition instead of being carried along unused.
    """

    name: str = MISSING
    backend: str = MISSING
    # false: send the rendered prompt as plain text with no chat template (a base model; llama.cpp
    # create_completion, OpenAI-compatible /v1/completions, Ollama /api/generate raw). Joins the completion
    # key only when false.
    chat: bool = True
    # What the provider charges, for the run's cost_usd metric (user data: PRISM ships no price list).
    pricing: PricingConfig = field(default_factory=PricingConfig)

    def check(self) -> None:
        """Refuse a model name no run can carry, and prices that cannot be meant.

        The name becomes metric names (``sensitivity/<model>/...``), run names and tags; a slash is kept,
        since served ids are often ``org/model`` (vLLM, ``hf.co/...`` Ollama tags), and any file named after
        a model goes through :func:`prism.types.safe_filename`. An empty name is left to the backend, which
        says what it needs. Each backend's schema checks its own settings when the backend is created.

        Raises:
            ConfigError: Naming the value and what is allowed.
        """
        check_model_name(self.name or "")
        self.pricing.check()













# Closed choices. OmegaConf 2.3 cannot validate a ``Literal`` annotation, so at run time each field is
# declared ``str`` (Hydra checks the type) and the group's ``check()`` checks the value against the
# ``Literal``'s members; mypy sees the ``Literal`` and checks every comparison and assignment in the code.
AnswerFormat = Literal["index", "letter", "text", "none"]
DatasetType = Literal["objective", "subjective"]
FileFormat = Literal["jsonl", "json", "csv", "parquet"]
DatasetRule = Literal["numeric_labels", "seeded_option_order"]
FamilyScale = Literal["nominal", "ordinal", "numeric"]
ComparePairs = Literal["reference", "all"]
ClozeTarget = Literal["label", "text"]
PlanEffectKind = Literal["shift", "accuracy", "interaction"]
if TYPE_CHECKING:
    AnswerFormatField = AnswerFormat
    DatasetTypeField = DatasetType
    FileFormatField = FileFormat
    DatasetRuleField = DatasetRule
    FamilyScaleField = FamilyScale
    ComparePairsField = ComparePairs
    ClozeTargetField = ClozeTarget
    PlanEffectKindField = PlanEffectKind
else:
    AnswerFormatField = DatasetTypeField = FileFormatField = DatasetRuleField = str
    FamilyScaleField = ComparePairsField = ClozeTargetField = PlanEffectKindField = str

ANSWER_FORMATS: tuple[AnswerFormat, ...] = get_args(AnswerFormat)
DATASET_TYPES: tuple[DatasetType, ...] = get_args(DatasetType)
# File formats ``datasets`` reads, by the name ``dataset.format`` takes and by suffix.
FILE_FORMATS: dict[FileFormat, str] = {"jsonl": "json", "json": "json", "csv": "csv", "parquet": "parquet"}
DATASET_RULES: tuple[DatasetRule, ...] = get_args(DatasetRule)
MIN_OPTIONS, MAX_OPTIONS = 2, 10


def one_of(key: str, value: object, allowed: tuple[str, ...], error: type[Exception] = ConfigError) -> None:
    """Refuse a closed choice's value that is not one of its members, naming the key and the members.

    Raises:
        ConfigError: (or ``error``) When ``value`` is not in ``allowed``.
    """
    if value not in allowed:
        raise error(f"{key}={value!r} is not known; use one of: {', '.join(allowed)}.")


@dataclass
class DatasetFields:
    """Which source column holds each part of a question (``dataset.fields.*``).

    ``options`` is one column holding a list of option texts or a ``{text, label}`` mapping (ARC's
    ``choices``), or several columns, one option each, in display order; ``answer`` is read as
    ``dataset.answer_format`` says (None: items without a key); ``id`` is the dataset's own id column (None:
    a stable id is made from a hash of the item's text); ``group`` groups questions (subject, wave).
    """

    id: str | None = None
    question: str = "question"
    # One column holding a list of options (or ARC-style {text, label}), or a list of columns, one per option.
    options: Any = "choices"
    answer: str | None = "answer"
    group: str | None = None

    def __post_init__(self) -> None:
        # An empty column name (``dataset.fields.answer=''``) means no column, as null does.
        self.id, self.answer, self.group = (value or None for value in (self.id, self.answer, self.group))

    @property
    def option_columns(self) -> str | tuple[str, ...]:
        """``options`` as one column name or a tuple of them (a YAML list arrives as a list)."""
        if self.options is None or isinstance(self.options, str):
            return str(self.options or "")
        return tuple(str(column) for column in self.options)

    def columns(self) -> dict[str, str]:
        """Every mapped column by the key that names it (``fields.options.2`` for the third option column)."""
        named = {"id": self.id, "question": self.question, "answer": self.answer, "group": self.group}
        found = {f"fields.{key}": column for key, column in named.items() if column is not None}
        options = self.option_columns
        if isinstance(options, str):
            found["fields.options"] = options
        else:
            found.update({f"fields.options.{i}": column for i, column in enumerate(options)})
        return found

    def canonical(self) -> dict[str, Any]:
        """The mapping as the frozen file's name digests it (options as a string or a list)."""
        options = self.option_columns
        return {"question": self.question, "options": options if isinstance(options, str) else list(options),
                "answer": self.answer, "id": self.id, "group": self.group}


@dataclass
class DemonstrationsConfig:
    """The pool few-shot demonstrations are drawn from (``conditions=fewshot``, ``prism.questions.demonstrations``).

    The pool is other splits of the dataset's own source (``data_dir/<name>/<split>.jsonl``, or the Hub), or one
    local file (``path``), read with the dataset's field mapping unless ``fields`` gives another; the built-in
    datasets' YAMLs set it, so a few-shot set needs no override.
    """

    # Splits of the dataset's source, in order of preference: each question's draw takes a seeded order of the
    # first split's items, then the next's (MMLU: [dev, validation]). Empty: no pool (a few-shot set is refused).
    splits: list[str] = field(default_factory=list)
    # One local file (JSONL, CSV or Parquet) instead of the splits; null: the splits.
    path: str | None = None
    # The pool's own field mapping; null: the dataset's (dataset.fields).
    fields: DatasetFields | None = None
    # Draw each question's demonstrations from its own group only (MMLU: the same subject).
    same_group: bool = False


@dataclass
class DatasetConfig:
    """Which questions are frozen: the sample is fixed by (name, split, n, sample_seed) and the mapping.

    The source is ``path`` (one JSONL, CSV or Parquet file), else ``data_dir/<name>/<split>.jsonl``, else
    the Hub (``hub``, ``hub_config``, ``split``); ``fields`` maps its columns (``prism.questions``).
    :meth:`check` refuses a config no source could satisfy before any file is read.
    """

    name: str = MISSING
    split: str = "test"
    n: int = 100
    sample_seed: int = II("seed")
    data_dir: str | None = None
    cache_dir: str = ".prism/frozen"
    path: str | None = None
    # jsonl, csv or parquet; null: from the suffix of path.
    format: FileFormatField | None = None
    hub: str | None = None
    hub_config: str | None = None
    fields: DatasetFields = field(default_factory=DatasetFields)
    # index (0-based), letter (A.. or the option's own label), text (the option's text) or none (no key).
    answer_format: AnswerFormatField = "index"
    # objective (there is a correct option) or subjective (survey items).
    type: DatasetTypeField = "objective"
    # Named dataset rules (prism.questions.rules.RULES), e.g. [numeric_labels].
    rules: list[DatasetRuleField] = field(default_factory=list)
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
    # Where few-shot demonstrations come from (conditions=fewshot).
    demonstrations: DemonstrationsConfig = field(default_factory=DemonstrationsConfig)

    def option_counts(self) -> tuple[int, ...] | None:
        """``options`` as the sorted option counts to keep, or None for any count from 2 to 10.

        Raises:
            DataError: When it is not a whole number, a list of them, or null.
        """
        value = self.options
        if value is None:
            return None
        values = value if isinstance(value, Sequence) and not isinstance(value, str) else [value]
        counts = []
        for item in values:
            if isinstance(item, bool) or not isinstance(item, int | str) or not str(item).strip().isdigit():
                raise DataError(f"dataset.options={value!r} cannot be used: give a whole number from {MIN_OPTIONS} "
                                f"to {MAX_OPTIONS}, a list of them ('dataset.options=[4,5]'), or null for any count.")
            counts.append(int(item))
        return tuple(sorted(set(counts)))

    def check(self) -> None:
        """Refuse a dataset config no source could satisfy; every message names the key to set and how.

        Raises:
            DataError: For the first problem found.
        """
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(self.name)):
            raise DataError(f"dataset.name={self.name!r} cannot be used: give a name of letters, digits, '_', "
                            "'.' and '-' (it names the frozen file and the records).")
        if not re.fullmatch(r"\w+", str(self.split)):
            raise DataError(f"dataset.split must be a plain name such as 'test', got {self.split!r}")
        if self.name == "custom" and self.path is None and self.hub is None:
            raise DataError("dataset=custom reads one local file: set dataset.path=FILE (JSONL, CSV or Parquet) and "
                            "map its columns, e.g. dataset.path=items.csv dataset.fields.question=stem "
                            "'dataset.fields.options=[a,b,c,d]' dataset.fields.answer=key dataset.answer_format=letter")
        one_of("dataset.answer_format", self.answer_format, ANSWER_FORMATS, DataError)
        one_of("dataset.type", self.type, DATASET_TYPES, DataError)
        for rule in self.rules:
            one_of("dataset.rules", rule, DATASET_RULES, DataError)
        if self.format is not None:
            one_of("dataset.format", self.format, tuple(FILE_FORMATS), DataError)
        if not self.fields.question:
            raise DataError("dataset.fields.question is not set: name the column that holds the question text, "
                            "e.g. dataset.fields.question=question.")
        if not self.fields.option_columns:
            raise DataError("dataset.fields.options is not set: name one column holding a list of options (or "
                            "ARC-style {text, label}), or list one column per option: "
                            "'dataset.fields.options=[a,b,c,d]'.")
        if self.answer_format != "none" and self.fields.answer is None:
            raise DataError(f"dataset.answer_format={self.answer_format} needs dataset.fields.answer, the column "
                            "holding the answer (or set dataset.answer_format=none for items without a key).")
        if self.ordinal and "seeded_option_order" in self.rules:
            raise DataError("dataset.ordinal=true keeps an ordered scale in its order, but the seeded_option_order "
                            "rule shuffles the options: drop one of the two.")
        if self.exclude and self.fields.id is None:
            raise DataError("dataset.exclude lists item ids, but this dataset has no dataset.fields.id; map the id "
                            "column or drop dataset.exclude.")
        counts = self.option_counts()
        for count in counts or ():
            if not MIN_OPTIONS <= count <= MAX_OPTIONS:
                raise DataError(f"dataset.options={list(counts or ())} cannot be used: every count must be "
                                f"a whole number from {MIN_OPTIONS} to {MAX_OPTIONS}.")
        if self.stratify is not None and self.stratify != self.fields.group:
            raise DataError(f"dataset.stratify={self.stratify} must name the group column, dataset.fields.group "
                            f"(now {self.fields.group}); set dataset.fields.group={self.stratify} or drop stratify.")
        if self.subjects and self.fields.group is None:
            raise DataError("dataset.subjects selects groups, but this dataset has no dataset.fields.group; set "
                            "the column that holds the subject or drop dataset.subjects.")

    def file_format(self) -> str:
        """The ``datasets`` loader of ``path``: ``dataset.format``, else the file's suffix.

        Raises:
            DataError: When neither says.
        """
        if self.format is not None:
            return FILE_FORMATS[self.format]
        suffix = (self.path or "").rsplit(".", 1)[-1].lower()
        if suffix not in FILE_FORMATS:
            raise DataError(f"cannot tell the format of dataset.path={self.path}: its suffix is not one of "
                            f"{sorted('.' + s for s in FILE_FORMATS)}. Set dataset.format=jsonl, csv or parquet.")
        return FILE_FORMATS[suffix]

    def mapping_digest(self, source: str) -> str:
        """Hex digest of the source and everything that decides which questions it yields and how.

        It is part of the frozen file's name, so two datasets (two custom files, or one file mapped two
        ways) with the same ``n`` and seed never share a cache file.
        """
        counts = self.option_counts()
        record: dict[str, Any] = {
            "source": source,
            "split": self.split,
            "fields": self.fields.canonical(),
            "answer_format": self.answer_format,
            "type": self.type,
            "rules": [str(rule) for rule in self.rules],
            "options": None if counts is None else list(counts),
            "subjects": [str(s) for s in self.subjects],
            "stratify": self.stratify,
        }
        # Added only when set, so the frozen files of every dataset without them keep their names.
        if self.folder is not None:
            record["folder"] = self.folder
        if self.exclude:
            record["exclude"] = [str(i) for i in self.exclude]
        return sha256_text(canonical_json(record))


@dataclass
class ConditionSpec:
    """One template condition (see ``prism.conditions``)."""

    name: str = MISSING
    description: str = ""
    family: str = "instruction"
    template: str = MISSING
    # A condition in lm-eval's own form fixes its cloze continuation: text or label (conditions=cloze).
    cloze_target: ClozeTargetField | None = None


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

    scale: FamilyScaleField = "nominal"
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
    # Draw name -> where in each question's frozen draw of demonstrations a `shots` step with `to: <name>` starts.
    draws: dict[str, int] = field(default_factory=dict)
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
    # Also record each option's continuation log-likelihood after the prompt, as lm-evaluation-harness
    # scores multiple choice (prism.cloze); joins the canonical parameters only when true.
    cloze: bool = False
    # The continuation where the condition does not fix it: label (" B", lm-eval's MMLU) or text
    # (" <option text>", its ARC tasks).
    cloze_target: ClozeTargetField = "label"

    def check(self) -> None:
        """Refuse generation values that Hydra's types allow but no backend can honour as meant.

        A backend does not refuse them either: llama.cpp reads ``max_tokens`` <= 0 as "until the context is
        full" and a negative seed as "pick a random one", which would quietly change what is measured.

        Raises:
            ConfigError: Naming the key, the value and the accepted range.
        """
        rules: list[tuple[str, Any, bool, str]] = [
            ("repetitions", self.repetitions, self.repetitions >= 1, "a whole number >= 1"),
            ("max_tokens", self.max_tokens, self.max_tokens >= 1, "a whole number >= 1"),
            ("temperature", self.temperature, 0 <= self.temperature < float("inf"),
             "a number >= 0 (0 is greedy decoding)"),
            ("seed", self.seed, self.seed >= 0, "a whole number >= 0 (llama.cpp takes a negative seed as 'random')"),
            ("top_p", self.top_p, self.top_p is None or 0 < self.top_p <= 1, "null or a number in (0, 1]"),
            ("top_k", self.top_k, self.top_k is None or self.top_k >= 1, "null or a whole number >= 1"),
            ("cloze_target", self.cloze_target, self.cloze_target in get_args(ClozeTarget),
             "label (the continuation ' B') or text (' <option text>')"),
        ]
        for key, value, valid, accepted in rules:
            if not valid:
                raise ConfigError(f"generation.{key}={value!r} cannot be used: it must be {accepted}. "
                                  f"Set it with generation.{key}=VALUE (or pick another generation=... group).")


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

    def check(self) -> None:
        """Check every group once, when the config is built (:func:`to_schema`): nothing is asked before.

        The condition set is checked as it is built (``prism.conditions.condition_set_from_config``), since
        its checks need the steps it names.

        Raises:
            ConfigError: (or ``DataError`` for the dataset) naming the first key that cannot be used.
        """
        self.model.check()
        self.dataset.check()
        self.generation.check()
        self.store.check()


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


@dataclass
class PlanEffect:
    """The effect a plan is to detect (``prism.plan``)."""

    # shift: an excess (answer measure) on the step baseline -> condition; accuracy: a difference in accuracy
    # between two models under condition; interaction: a single grid cell's interaction, in logits.
    # (str, not Literal: this OmegaConf refuses Literal annotations; prism.plan checks it against PLAN_EFFECTS.)
    kind: PlanEffectKindField = "shift"
    # In the effect's own units: excess (shift), accuracy difference (accuracy), logits (interaction).
    size: float = 0.1
    # The step's to-condition (shift), the condition (accuracy) or the grid cell (interaction); empty: the
    # design's second condition (shift, accuracy) or its last cell (interaction).
    condition: str = ""


@dataclass
class PlanRates:
    """Stated rates, used when no pilot run is named or selected (``prism.plan``)."""

    # The baseline's share of correct answers (shift, accuracy) or of answers consistent with the baseline
    # (interaction) at the average question.
    accuracy: float = 0.6
    # Standard deviation of the questions' logits around it (how much questions differ).
    spread: float = 0.5
    # Options per question.
    options: int = 4
    # The condition set's size (shift, accuracy): the baseline and this many - 1 others, named C0, C1, ...
    conditions: int = 5
    # A grid's axes, each its number of values with the baseline's (interaction), e.g. [5, 5].
    grid: list[int] = field(default_factory=lambda: [5, 5])


@dataclass
class PlanConfig:
    """``python -m prism.plan``: how many questions and repetitions a design needs (see ``prism.plan``).

    The pilot is ``runs`` or the runs compare's ``filters`` select; with neither (and ``pilot=false``), the
    stated ``rates``.
    """

    defaults: list[Any] = field(default_factory=list)
    tracking: TrackingConfig = MISSING
    # Pilot runs by MLflow run id (the first is the model planned for; accuracy takes the first two).
    runs: list[str] = field(default_factory=list)
    filters: CompareFilters = field(default_factory=CompareFilters)
    # Read a pilot from MLflow (runs or filters); false: plan from the stated rates alone.
    pilot: bool = True
    rates: PlanRates = field(default_factory=PlanRates)
    effect: PlanEffect = field(default_factory=PlanEffect)
    baseline: str = "P0"
    # The dataset.n values (questions) to try, and the repetitions.
    n: list[int] = field(default_factory=lambda: [25, 50, 100, 200])
    repetitions: list[int] = field(default_factory=lambda: [3])
    # The power wanted and the level (the run's significance level).
    power: float = 0.8
    alpha: float = 0.05
    # Tests in the Holm family the test is corrected in (a lone effect must reach alpha / family);
    # null: the design's non-baseline conditions, as compare corrects them.
    holm_family: int | None = None
    # Simulated studies per design point, and permutations per simulated shift test.
    simulations: int = 200
    permutations: int = 1000
    seed: int = 0
    # Where the table and plot are written before upload; null: Hydra's output directory of the job.
    output_dir: str | None = None


@dataclass
class ReproduceConfig:
    """``python -m prism.reproduce``: which run, where it is, and changes to its logged config."""

    defaults: list[Any] = field(default_factory=list)
    run_id: str = MISSING
    tracking: TrackingConfig = MISSING
    # key=value changes applied to the logged config, e.g. ["dataset.data_dir=/data"].
    overrides: list[str] = field(default_factory=list)




@runtime_checkable
class Checked(Protocol):
    """A config that checks itself as a whole (each top-level schema whose groups have checks)."""

    def check(self) -> None:
        """Raise a :class:`~prism.errors.PrismError` naming the first value that cannot be used."""


def to_schema(cfg: Any, schema: type[T]) -> T:
    """The composed (or merged) config ``cfg`` as an instance of its schema, interpolations resolved and checked.

    A schema with a ``check()`` (:class:`Checked`) is checked here, once, as it is built.

    Raises:
        ConfigError: If a mandatory value (``???``) was never set, naming it, or the schema's check refuses
            a value (``DataError`` for a dataset).
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import MissingMandatoryValue

    try:
        value = OmegaConf.to_object(cfg)
    except MissingMandatoryValue as exc:
        raise ConfigError(f"{exc.full_key} must be set ({exc.msg}); set it with {exc.full_key}=VALUE.") from exc
    if not isinstance(value, schema):
        raise ConfigError(f"the config is a {type(value).__name__}, not the {schema.__name__} this needs.")
    if isinstance(value, Checked):
        value.check()
    return value


def as_plain(cfg: Any) -> dict[str, Any]:
    """A schema instance as plain nested dicts and lists, field names unchanged (for YAML and MLflow).

    The ``defaults`` list of a top-level schema is Hydra's composition order, not configuration: it is
    left out, as Hydra leaves it out of a composed config.
    """
    plain = dataclasses.asdict(cfg)
    plain.pop("defaults", None)
    return plain
