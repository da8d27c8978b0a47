"""Every name PRISM writes to MLflow, spelled once, and :class:`LoggedRun`, the typed reading of a logged run.

The run path writes tags, params and artifacts under these names (docs/reference/mlflow.md lists them);
compare, publish and reproduce read a run back as a :class:`LoggedRun` instead of spelling a tag or a param
key themselves. The metrics a run logs are named here too: :mod:`prism.results` writes them under these
names and compare and publish read them back by them (a per-condition metric is ``<metric>/<condition>``,
:func:`condition_metric`).
It imports only the standard library, so every layer that writes or reads a run (``prism.results`` under
``prism.run``, compare and publish above) can use it; a :class:`LoggedRun` is built from an
``mlflow.entities.Run`` a caller already holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# ---- Tags ------------------------------------------------------------------------------------------------
TAG_KIND = "prism.kind"
TAG_MODEL_DIGEST = "prism.model_digest"
TAG_QUESTION_SET = "prism.question_set_sha256"
TAG_DATASET_VERSION = "prism.dataset_version"
TAG_GIT_COMMIT = "prism.git_commit"
TAG_GIT_DIRTY = "prism.git_dirty"
TAG_VERSION = "prism.version"
TAG_CONFIG_SHA256 = "prism.config_sha256"
TAG_OUTPUT_DIR = "prism.output_dir"
TAG_SWEEP = "prism.sweep"
TAG_RESUMED_FROM = "prism.resumed_from"
TAG_MODEL_DIGEST_CHANGED_FROM = "prism.model_digest_changed_from"
TAG_UPLOADED_FROM = "prism.uploaded_from"
TAG_REPRODUCES = "prism.reproduces"
TAG_REPRODUCTION_IDENTICAL = "prism.reproduction.identical"
TAG_COMPARED_RUNS = "prism.compared_runs"
TAG_ALLOW_MISMATCH = "prism.allow_mismatch"
TAG_MISMATCHES = "prism.mismatches"
# A plan (prism.plan): the pilot runs it read and the effect it sized the study for.
TAG_PLAN_PILOT_RUNS = "prism.plan.pilot_runs"
TAG_PLAN_EFFECT = "prism.plan.effect"
# An imported run (prism.importer): the tool whose log it came from, its version, the log file and its sha256,
# the tool's task, and the model name the log gives.
TAG_IMPORTED_FROM = "prism.imported_from"
TAG_IMPORT_TOOL_VERSION = "prism.import.tool_version"
TAG_IMPORT_SOURCE_SHA256 = "prism.import.source_sha256"
TAG_IMPORT_SOURCE_FILE = "prism.import.source_file"
TAG_IMPORT_TASK = "prism.import.task"
TAG_IMPORT_SOURCE_MODEL = "prism.import.source_model"
# A sharded run (execution=ray): how its cells were asked, e.g. "ray workers=2 address=auto" (not a param: a
# local and a sharded run of one config are the same experiment).
TAG_EXECUTION = "prism.execution"
# A few-shot set's frozen draw of demonstrations (questions/demonstrations.jsonl).
TAG_DEMONSTRATIONS = "prism.demonstrations_sha256"
# The model identity's details (``prism.model.tag``, ``prism.model.path``, ...) and the frozen set's drop
# counts (``prism.dropped.duplicate``, ...) are tag families: one tag per key.
MODEL_DETAIL_PREFIX = "prism.model."
DROPPED_PREFIX = "prism.dropped."

# Values of ``prism.kind``.
KIND_RUN = "run"
KIND_COMPARISON = "comparison"
KIND_REPRODUCTION = "reproduction"
KIND_PLAN = "plan"

# MLflow's status of a run that ended well; killed runs stay RUNNING.
FINISHED = "FINISHED"

# ---- Params (besides the flattened resolved config, whose keys are the config's own paths) ---------------
PARAM_CONDITION_NAMES = "conditions.names"
PARAM_TEMPLATE_VERSION = "conditions.template_version"
PARAM_PARSER_VERSION = "parser_version"
PARAM_SCORER_VERSION = "scorer_version"
PARAM_PROTOCOL_VERSION = "protocol_version"
# The flattened resolved config's params that PRISM reads back (compare, publish, reproduce, import): their
# names are the config's own paths, spelled here once.
PARAM_SEED = "seed"
PARAM_MODEL_NAME = "model.name"
PARAM_MODEL_BACKEND = "model.backend"
PARAM_MODEL_PACKAGE = "model.package"
PARAM_MODEL_PATH = "model.path"
PARAM_DATASET_NAME = "dataset.name"
PARAM_DATASET_TYPE = "dataset.type"
PARAM_DATASET_SPLIT = "dataset.split"
PARAM_DATASET_N = "dataset.n"
PARAM_DATASET_SAMPLE_SEED = "dataset.sample_seed"
PARAM_DATASET_ANSWER_FORMAT = "dataset.answer_format"
PARAM_DATASET_ORDINAL = "dataset.ordinal"
PARAM_CONDITIONS_NAME = "conditions.name"
PARAM_CONDITIONS_BASELINE = "conditions.baseline"
PARAM_GENERATION_TEMPERATURE = "generation.temperature"
PARAM_GENERATION_MAX_TOKENS = "generation.max_tokens"
PARAM_GENERATION_SEED = "generation.seed"
PARAM_GENERATION_TOP_P = "generation.top_p"
PARAM_GENERATION_TOP_K = "generation.top_k"
PARAM_GENERATION_REPETITIONS = "generation.repetitions"
# The canonical generation settings every backend takes, which runs must share to be compared directly.
GENERATION_PARAMS = (PARAM_GENERATION_TEMPERATURE, PARAM_GENERATION_MAX_TOKENS, PARAM_GENERATION_SEED,
                     PARAM_GENERATION_TOP_P, PARAM_GENERATION_TOP_K)
# A comparison run's params naming the runs it compared and their table labels, in table order.
PARAM_COMPARED_RUN_IDS = "compared_run_ids"
PARAM_COMPARED_MODELS = "compared_models"
# A comparison run's settings (prism.compare.core: the checked plan, as prism.config.CompareConfig names them).
PARAM_COMPARE_SELECTION = "selection"
PARAM_COMPARE_BASELINE = "baseline"
PARAM_COMPARE_BOOTSTRAP = "bootstrap"
PARAM_COMPARE_SEED = "seed"
PARAM_COMPARE_ALLOW_MISMATCH = "allow_mismatch"
PARAM_COMPARE_MEASURES = "measures"
PARAM_COMPARE_PERMUTATIONS = "permutations"
PARAM_COMPARE_POWER_SIMULATIONS = "power_simulations"
PARAM_COMPARE_PAIRS = "pairs"
PARAM_COMPARE_REFERENCE = "reference"
PARAM_COMPARE_MAX_PER_PAIR = "differences.max_per_pair"
# Each run filter of a comparison that selected its runs by filters: filter.<name> (prism.compare.select).
PARAM_COMPARE_FILTER_PREFIX = "filter."
# Which sentence-embedding model made a comparison's embedding_cosine (prism.compare.embedding).
PARAM_EMBEDDING_MODEL = "embedding.model"
PARAM_EMBEDDING_PACKAGE = "embedding.weights_package"
PARAM_EMBEDDING_SHA256 = "embedding.weights_sha256"
PARAM_EMBEDDING_RUNTIME = "embedding.runtime"
PARAM_EMBEDDING_CACHE = "embedding.cache"

# ---- Metrics ---------------------------------------------------------------------------------------------
# The rates a run logs overall and per condition (prism.results.metrics), in logging order.
METRIC_ACCURACY = "accuracy"
METRIC_CONDITIONAL_ACCURACY = "conditional_accuracy"
METRIC_ANSWER_RECOVERY = "answer_recovery_rate"
METRIC_UNKNOWN_RATE = "unknown_rate"
METRIC_INSTRUCTION_COMPLIANCE = "instruction_compliance_rate"
RATE_METRICS = (METRIC_ACCURACY, METRIC_CONDITIONAL_ACCURACY, METRIC_ANSWER_RECOVERY, METRIC_UNKNOWN_RATE,
                METRIC_INSTRUCTION_COMPLIANCE)
# The question-level summaries (prism.results.metrics.summary_metrics), in logging order.
METRIC_QUESTION_MAJORITY_ACCURACY = "question_majority_accuracy"
METRIC_MEAN_AGREEMENT = "mean_agreement"
METRIC_MEAN_PROMPT_SENSITIVITY = "mean_prompt_sensitivity"
METRIC_ANSWER_UNANIMOUS = "answer_unanimous_rate"
METRIC_PROMPT_INVARIANT_INCORRECT = "prompt_invariant_incorrect_rate"
METRIC_COMPLETE_QUESTIONS = "complete_questions"
METRIC_N_QUESTIONS = "n_questions"
METRIC_N_RESPONSES = "n_responses"
QUESTION_METRICS = (METRIC_QUESTION_MAJORITY_ACCURACY, METRIC_MEAN_AGREEMENT, METRIC_MEAN_PROMPT_SENSITIVITY,
                    METRIC_ANSWER_UNANIMOUS, METRIC_PROMPT_INVARIANT_INCORRECT, METRIC_COMPLETE_QUESTIONS,
                    METRIC_N_QUESTIONS, METRIC_N_RESPONSES)
# The likelihood reading's (generation.label_probs=true; prism.results.label_prob_metrics): rates overall and per
# condition, question-level summaries, and how many cells had probabilities.
METRIC_LIKELIHOOD_ACCURACY = "likelihood_accuracy"
METRIC_READING_AGREEMENT = "reading_agreement"
METRIC_MEAN_LABEL_MASS = "mean_label_mass"
LIKELIHOOD_RATE_METRICS = (METRIC_LIKELIHOOD_ACCURACY, METRIC_READING_AGREEMENT, METRIC_MEAN_LABEL_MASS)
METRIC_LIKELIHOOD_QUESTION_MAJORITY_ACCURACY = "likelihood_question_majority_accuracy"
METRIC_LIKELIHOOD_MEAN_AGREEMENT = "likelihood_mean_agreement"
METRIC_LIKELIHOOD_ANSWER_UNANIMOUS = "likelihood_answer_unanimous_rate"
LIKELIHOOD_QUESTION_METRICS = (METRIC_LIKELIHOOD_QUESTION_MAJORITY_ACCURACY, METRIC_LIKELIHOOD_MEAN_AGREEMENT,
                               METRIC_LIKELIHOOD_ANSWER_UNANIMOUS)
METRIC_MEAN_PROB_TV = "mean_prob_tv"
METRIC_N_LABEL_PROBS = "n_label_probs"
METRIC_LABEL_PROBS_MISSING = "label_probs_missing"
# The cloze reading's (generation.cloze=true; prism.results.cloze_metrics), overall and per condition.
METRIC_CLOZE_ACCURACY = "cloze_accuracy"
METRIC_CLOZE_NORM_ACCURACY = "cloze_norm_accuracy"
METRIC_CLOZE_AGREEMENT = "cloze_agreement"
METRIC_N_CLOZE = "n_cloze"
# What a run cost (prism.run.usage): tokens overall and per condition, and dollars at model.pricing.
METRIC_TOKENS_PROMPT = "tokens_prompt"
METRIC_TOKENS_COMPLETION = "tokens_completion"
METRIC_TOKENS_FROM_STORE_PROMPT = "tokens_from_store_prompt"
METRIC_TOKENS_FROM_STORE_COMPLETION = "tokens_from_store_completion"
METRIC_TOKENS_PROVIDER_CACHED = "tokens_provider_cached"
METRIC_COST_USD = "cost_usd"
USAGE_METRIC_PREFIXES = ("tokens_", METRIC_COST_USD)
# Families: consistency/<family>[/<variant>] (prism.results.consistency), causal/<condition> (prism.results.roles).
CONSISTENCY_PREFIX = "consistency/"
CAUSAL_PREFIX = "causal/"
# parse_method/<method>: the share of observed responses each parser method read (prism.results.metrics).
PARSE_METHOD_PREFIX = "parse_method/"


def condition_metric(metric: str, condition: str) -> str:
    """The name of ``metric`` for one condition: ``<metric>/<condition>``."""
    return f"{metric}/{condition}"


# ---- Artifacts -------------------------------------------------------------------------------------------
# Folders of a run's output directory uploaded as artifacts, in upload order.
RUN_ARTIFACT_DIRS = ("config", "questions", "prompts", "responses", "results")
CONFIG_ARTIFACT = "config/resolved.yaml"
QUESTIONS_ARTIFACT = "questions/frozen.jsonl"
DEMONSTRATIONS_ARTIFACT = "questions/demonstrations.jsonl"
DEMONSTRATION_BALANCE_ARTIFACT = "results/demonstrations.csv"
RESPONSES_ARTIFACT = "responses/responses.jsonl"
SCORED_ARTIFACT = "results/scored.jsonl"
# The scored records as columns (prism.results.cells_file.CELLS_FILE): read instead of scored.jsonl when present.
CELLS_ARTIFACT = "results/cells.parquet"
QUESTION_METRICS_ARTIFACT = "results/question_metrics.csv"
COMPARISON_ARTIFACT_DIR = "comparison"
REPRODUCTION_ARTIFACT_DIR = "reproduction"
PLAN_ARTIFACT_DIR = "plan"
IMPORT_AGREEMENT_ARTIFACT = "results/import_agreement.csv"


def run_tags(*, kind: str, digest: str, question_set: str, dataset_version: str, git_commit: str, git_dirty: bool,
             version: str, config_sha256: str, output_dir: str, model_details: Mapping[str, str],
             dropped: Mapping[str, int]) -> dict[str, str]:
    """The tags an experiment run starts with (docs/reference/mlflow.md)."""
    return {
        TAG_KIND: kind,
        TAG_MODEL_DIGEST: digest,
        TAG_QUESTION_SET: question_set,
        TAG_DATASET_VERSION: dataset_version,
        TAG_GIT_COMMIT: git_commit,
        TAG_GIT_DIRTY: str(git_dirty).lower(),
        TAG_VERSION: version,
        TAG_CONFIG_SHA256: config_sha256,
        TAG_OUTPUT_DIR: output_dir,
        **{f"{MODEL_DETAIL_PREFIX}{k}": v for k, v in model_details.items()},
        **{f"{DROPPED_PREFIX}{reason}": str(count) for reason, count in dropped.items()},
    }


@dataclass(frozen=True)
class LoggedRun:
    """One MLflow run as PRISM logged it: its id and status, its params and tags, read by name.

    Attributes:
        run_id: MLflow run id.
        status: MLflow status (``FINISHED``, ``RUNNING``, ``FAILED``, ``KILLED``).
        start_time: Start time in ms since the epoch (orders runs: the latest wins).
        params: The run's params.
        tags: The run's tags.
        label: How tables name the run: ``model.name``, made unique with the run id when two compared
            runs share a model name (set by ``prism.compare.select.label_runs``).
    """

    run_id: str
    status: str
    start_time: int
    params: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    label: str = ""

    @classmethod
    def from_mlflow(cls, run: Any) -> LoggedRun:
        """Read an ``mlflow.entities.Run``."""
        return cls(run_id=str(run.info.run_id), status=str(run.info.status), start_time=int(run.info.start_time or 0),
                   params=dict(run.data.params), tags=dict(run.data.tags))

    def param(self, key: str, default: str = "") -> str:
        """A param by its config path (``dataset.split``), or ``default`` when the run did not log it."""
        return self.params.get(key, default)

    def tag(self, key: str, default: str = "") -> str:
        """A tag by one of this module's names, or ``default`` when the run does not carry it."""
        return self.tags.get(key, default)

    @property
    def model(self) -> str:
        """The run's ``model.name`` param."""
        return self.params.get(PARAM_MODEL_NAME, "?")

    @property
    def kind(self) -> str:
        """The ``prism.kind`` tag (``run``, ``comparison``, ...)."""
        return self.tags.get(TAG_KIND, "")

    @property
    def question_set(self) -> str:
        """The frozen question set's sha256 (tag ``prism.question_set_sha256``)."""
        return self.tags.get(TAG_QUESTION_SET, "")

    @property
    def model_digest(self) -> str:
        """The model identity's digest (tag ``prism.model_digest``)."""
        return self.tags.get(TAG_MODEL_DIGEST, "")

    @property
    def dataset_version(self) -> str:
        """The source data's version (tag ``prism.dataset_version``)."""
        return self.tags.get(TAG_DATASET_VERSION, "")

    @property
    def version(self) -> str:
        """The PRISM version that made the run (tag ``prism.version``)."""
        return self.tags.get(TAG_VERSION, "")

    @property
    def git_commit(self) -> str:
        """The PRISM commit that made the run (tag ``prism.git_commit``)."""
        return self.tags.get(TAG_GIT_COMMIT, "")

    @property
    def git_dirty(self) -> bool:
        """Whether that commit had uncommitted changes (tag ``prism.git_dirty``)."""
        return self.tags.get(TAG_GIT_DIRTY) == "true"

    @property
    def sweep(self) -> str:
        """The multirun sweep directory the run belongs to (tag ``prism.sweep``), or ``""``."""
        return self.tags.get(TAG_SWEEP, "")

    @property
    def compared_runs(self) -> tuple[str, ...]:
        """The run ids a comparison run compared (tag ``prism.compared_runs``)."""
        return tuple(r for r in self.tags.get(TAG_COMPARED_RUNS, "").split(",") if r)

    @property
    def comparison_baseline(self) -> str:
        """A comparison run's baseline condition, or ``""``."""
        return self.params.get(PARAM_COMPARE_BASELINE, "")

    @property
    def comparison_bootstrap(self) -> str:
        """A comparison run's bootstrap resamples, as logged, or ``""``."""
        return self.params.get(PARAM_COMPARE_BOOTSTRAP, "")

    @property
    def comparison_seed(self) -> str:
        """A comparison run's resampling seed, as logged, or ``""``."""
        return self.params.get(PARAM_COMPARE_SEED, "")

    @property
    def comparison_measures(self) -> str:
        """A comparison run's shift measures, comma-separated as logged, or ``""``."""
        return self.params.get(PARAM_COMPARE_MEASURES, "")

    @property
    def model_detail(self) -> Mapping[str, str]:
        """The model identity's details (tags ``prism.model.<key>``), by key."""
        return {k.removeprefix(MODEL_DETAIL_PREFIX): v for k, v in self.tags.items()
                if k.startswith(MODEL_DETAIL_PREFIX)}

    @property
    def conditions(self) -> tuple[str, ...]:
        """Condition names in the run's order (param ``conditions.names``)."""
        return tuple(n for n in self.params.get(PARAM_CONDITION_NAMES, "").split(",") if n)

    @property
    def dataset(self) -> str:
        """The ``dataset.name`` param, or ``""``."""
        return self.params.get(PARAM_DATASET_NAME, "")

    @property
    def dataset_type(self) -> str:
        """The ``dataset.type`` param (runs logged before survey items had none: ``objective``)."""
        return self.params.get(PARAM_DATASET_TYPE) or "objective"

    @property
    def condition_set(self) -> str:
        """The condition set's name (param ``conditions.name``), or ``""``."""
        return self.params.get(PARAM_CONDITIONS_NAME, "")

    @property
    def baseline(self) -> str:
        """The condition set's baseline (param ``conditions.baseline``), or ``""``."""
        return self.params.get(PARAM_CONDITIONS_BASELINE, "")

    @property
    def dataset_split(self) -> str:
        """The split the questions were drawn from (param ``dataset.split``), or ``""``."""
        return self.params.get(PARAM_DATASET_SPLIT, "")

    @property
    def dataset_n(self) -> str:
        """How many questions were sampled (param ``dataset.n``), or ``""``."""
        return self.params.get(PARAM_DATASET_N, "")

    @property
    def sample_seed(self) -> str:
        """The seed of the question sample (param ``dataset.sample_seed``), or ``""``."""
        return self.params.get(PARAM_DATASET_SAMPLE_SEED, "")

    @property
    def answer_format(self) -> str:
        """How the answer key was read (param ``dataset.answer_format``; ``none``: items without a key), or ``""``."""
        return self.params.get(PARAM_DATASET_ANSWER_FORMAT, "")

    @property
    def ordinal(self) -> bool:
        """Whether the options are an ordered scale (param ``dataset.ordinal``)."""
        return self.params.get(PARAM_DATASET_ORDINAL, "").lower() == "true"

    @property
    def temperature(self) -> str:
        """The sampling temperature (param ``generation.temperature``), or ``""``."""
        return self.params.get(PARAM_GENERATION_TEMPERATURE, "")

    @property
    def repetitions(self) -> str:
        """Repetitions of each cell (param ``generation.repetitions``), or ``""``."""
        return self.params.get(PARAM_GENERATION_REPETITIONS, "")

    @property
    def model_package(self) -> str:
        """The Python package the weights came from (param ``model.package``), or ``""``."""
        return self.params.get(PARAM_MODEL_PACKAGE, "")

    @property
    def model_path(self) -> str:
        """The weights file (param ``model.path``), or ``""``."""
        return self.params.get(PARAM_MODEL_PATH, "")
