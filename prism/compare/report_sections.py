"""What each section of ``report.html`` (and of the published site's pages) says, as data for its template.

Each function here turns tables and run evidence into plain values (rows, labels, numbers) and a template
under ``prism/templates/sections/`` turns them into markup, escaping every value (:mod:`prism.render`).
Nothing here builds markup. The site (:mod:`prism.publish`) uses the same functions and templates for
what it shares with the report: the reproducibility items, the readings, the templates and what PRISM
does not claim.

Elements that carry a value a reader (or a test) looks up have ``data-`` attributes naming it: the
setup table's cells ``data-run``/``data-item``, each reading ``data-model``/``data-patterns``, each
template ``data-condition``, each non-claim ``data-claim``.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import yaml

from prism.compare.evidence import ReportContext, RunEvidence
from prism.compare.readings import PATTERNS, ModelNumbers, Reading, Thresholds
from prism.compare.tables import POOLED, keyless_labels
from prism.formatting import missing
from prism.names import (
    METRIC_COST_USD,
    METRIC_N_QUESTIONS,
    METRIC_TOKENS_COMPLETION,
    METRIC_TOKENS_FROM_STORE_COMPLETION,
    METRIC_TOKENS_FROM_STORE_PROMPT,
    METRIC_TOKENS_PROMPT,
    METRIC_TOKENS_PROVIDER_CACHED,
    PARAM_CONDITIONS_NAME,
    PARAM_DATASET_NAME,
    PARAM_DATASET_SAMPLE_SEED,
    PARAM_DATASET_SPLIT,
    PARAM_GENERATION_MAX_TOKENS,
    PARAM_GENERATION_REPETITIONS,
    PARAM_GENERATION_SEED,
    PARAM_GENERATION_TEMPERATURE,
    PARAM_GENERATION_TOP_K,
    PARAM_GENERATION_TOP_P,
    PARAM_MODEL_BACKEND,
    PARAM_MODEL_NAME,
    PARAM_PARSER_VERSION,
    PARAM_PROTOCOL_VERSION,
    PARAM_SCORER_VERSION,
    PARAM_TEMPLATE_VERSION,
    TAG_DATASET_VERSION,
    TAG_MODEL_DIGEST,
    TAG_QUESTION_SET,
    TAG_VERSION,
    LoggedRun,
)
from prism.stats.basics import SIGNIFICANCE

if TYPE_CHECKING:
    from prism.compare.comparison_tables import ComparisonTables

# How many cells of the differences table the page lists (the CSV has them all).
TOP_DIFFERENCES = 12
# Responses longer than this are cut on the page (the CSV and the run's responses.jsonl keep them whole).
RESPONSE_CHARS = 160

SECTIONS = (("summary", "Summary"), ("readings", "Readings"), ("sensitivity", "Condition sensitivity"),
            ("answer-readings", "Answer readings"), ("divergence", "Divergence"),
            ("differences", "Where models differ"),
            ("scorecard", "Scorecard"), ("sensitivity-axes", "Axes ranked"), ("measure-agreement", "Measure agreement"),
            ("divergence-noise", "Beyond noise"), ("power", "Detectable effects"), ("setup", "Reproduce"),
            ("templates", "Templates"), ("method", "Method"), ("not-claimed", "What PRISM does not claim"))

PATTERN_TEXT = {
    "accurate and stable": "mostly right, and rewording rarely changes its answer",
    "capable but prompt-dependent": "often right, but the same question gets different answers under different "
                                    "wordings",
    "consistently wrong": "on a sizeable share of questions it gives the same wrong answer under every wording",
    "inaccurate and unstable": "mostly not right by majority, and its answers change with the wording",
}

NOT_CLAIMED = (
    ("general reliability", "General reliability.",
     "The numbers describe these questions, this sample and these prompt conditions; they do not say how the "
     "model behaves on other tasks or data."),
    ("trustworthiness", "Trustworthiness.",
     "Agreement across rewordings is not a reason to trust an answer: a model can be consistently wrong."),
    ("safety", "Safety.", "Nothing here tests harmful, deceptive or otherwise unsafe behaviour."),
    ("hallucination rate", "Hallucination rate.",
     "A wrong option chosen among given options is not a measure of fabricated content in open-ended answers."),
    ("stochastic reliability", "Stochastic reliability across repeated runs.",
     "Sensitivity here is to wording; variation from sampling is measured only as far as the repetitions and "
     "temperature listed under Reproduce allow (one greedy repetition measures none)."),
    ("arbitrary prompts", "Behaviour under arbitrary prompts.",
     "Only the conditions shown under Templates were asked; other wordings, languages, system prompts or few-shot "
     "examples may behave differently."),
)


def navigation(present: Sequence[str]) -> list[tuple[str, str]]:
    """(anchor, title) of each section the page has, in page order: no link to a section left out."""
    return [(anchor, title) for anchor, title in SECTIONS if anchor in present]


def pattern_rules(thresholds: Thresholds) -> list[str]:
    """The pattern rules with their thresholds, as the page states them."""
    return [
        f"accurate and stable: question-majority accuracy ≥ {thresholds.accurate:.2f} and mean agreement ≥ "
        f"{thresholds.stable:.2f};",
        f"capable but prompt-dependent: question-majority accuracy ≥ {thresholds.accurate:.2f} and mean agreement "
        f"< {thresholds.stable:.2f};",
        f"inaccurate and unstable: question-majority accuracy < {thresholds.accurate:.2f} and mean agreement < "
        f"{thresholds.stable:.2f};",
        f"consistently wrong (prompt-invariant incorrectness): prompt-invariant incorrect rate ≥ "
        f"{thresholds.invariant_wrong:.2f}; it can hold beside another pattern.",
    ]


@dataclass(frozen=True)
class ReadingCard:
    """One model's reading as the page shows it.

    Attributes:
        numbers: The numbers read.
        reading: What they show.
        badges: The pattern names, or one muted badge saying why none is shown.
        muted: Whether the badge is the muted "none" one.
        described: (pattern, what it means) per pattern that holds.
        firmness: Borderline notes and cautions.
    """

    numbers: ModelNumbers
    reading: Reading
    badges: tuple[str, ...]
    muted: bool
    described: tuple[tuple[str, str], ...]
    firmness: tuple[str, ...]


def reading_cards(numbers: Sequence[ModelNumbers], readings: Sequence[Reading]) -> list[ReadingCard]:
    """Per model, the patterns its numbers show, what they mean, and how firm the reading is."""
    cards = []
    for number, reading in zip(numbers, readings, strict=True):
        undefined = any(math.isnan(e.value) for e in (number.majority_accuracy, number.agreement,
                                                        number.invariant_incorrect))
        badges = reading.patterns or ("not read: no answer key" if number.no_key
                                      else "not read: a number is undefined" if undefined
                                      else "none of the four patterns fits",)
        firmness = [f"Borderline: {note}, so this part of the reading could change with another sample of "
                    "questions." for note in reading.borderline]
        cards.append(ReadingCard(number, reading, tuple(badges), not reading.patterns,
                                 tuple((p, PATTERN_TEXT[p]) for p in reading.patterns),
                                 (*firmness, *reading.cautions)))
    return cards


def figure_uri(figures: Sequence[Path], name: str) -> str | None:
    """The named PNG as a ``data:`` URI (the page needs no file beside it), or None when it was not drawn."""
    found = [f for f in figures if f.name == name]
    if not found:
        return None
    return "data:image/png;base64," + base64.b64encode(found[0].read_bytes()).decode("ascii")


def sensitivity_models(tables: ComparisonTables) -> list[tuple[str, list[dict[str, Any]]]]:
    """Per model, its sensitivity rows with the accuracy interval and whether the Holm p is significant.

    Each row's ``no_key`` says the run's items have no answer key: its accuracy, delta and McNemar test
    are "n/a (no answer key)" on the page, not undefined.
    """
    intervals = {(str(r["model"]), str(r["condition"])): (r["ci_low"], r["ci_high"])
                 for r in tables.accuracy.to_dict("records")}
    keyless = keyless_labels(tables.accuracy)
    models = []
    for model, rows in tables.sensitivity.groupby("model", sort=False):
        shown = []
        for r in _records(rows):
            low, high = intervals.get((str(model), str(r["condition"])), (None, None))
            significant = not missing(r["mcnemar_p_holm"]) and float(r["mcnemar_p_holm"]) < SIGNIFICANCE
            shown.append({**r, "accuracy_ci_low": low, "accuracy_ci_high": high, "significant": significant,
                          "no_key": str(model) in keyless})
        models.append((str(model), shown))
    return models


def divergence_pairs(tables: ComparisonTables) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """Per pair of models, its divergence rows (each marked ``pooled`` when it is the row over all conditions).

    ``no_key`` marks the rows of a pair with a run whose items have no answer key: who is right does not
    exist there, so the four right/wrong counts are "n/a (no answer key)".
    """
    if tables.divergence is None:
        return []
    keyless = keyless_labels(tables.accuracy)
    return [(str(a), str(b), [{**r, "pooled": r["condition"] == POOLED, "no_key": bool({str(a), str(b)} & keyless)}
                              for r in _records(rows)])
            for (a, b), rows in tables.divergence.groupby(["model_a", "model_b"], sort=False)]


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in r.items()} for r in frame.to_dict("records")]


def cut(value: Any, limit: int = RESPONSE_CHARS) -> str:
    """A raw response on one line, shortened to ``limit`` characters (``–`` when there is none)."""
    if not isinstance(value, str):
        return "–"
    flat = " ".join(value.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def option_lines(question: Mapping[str, Any] | None) -> list[str]:
    """A frozen question's options as ``A. text`` lines (empty without the question)."""
    if not question:
        return []
    return [f"{label}. {option}" for label, option in zip(question.get("labels", ()), question.get("options", ()),
                                                          strict=False)]


@dataclass(frozen=True)
class DifferenceGroup:
    """The cells of one question where two models answer differently, as the differences table lists them.

    Attributes:
        question_id: The question.
        question: Its frozen record (None when the frozen questions could not be read).
        share: The share of its paired cells whose answers differ.
        pair: ``a vs b``.
        rows: Its listed cells (records of the differences table, with ``response_a_cut`` and
            ``response_b_cut``: the responses shortened by :func:`cut`).
    """

    question_id: str
    question: Mapping[str, Any] | None
    share: float
    pair: str
    rows: list[dict[str, Any]]

    @property
    def options(self) -> list[str]:
        """The question's options as ``A. text`` lines."""
        return option_lines(self.question)


def difference_groups(diff: pd.DataFrame, questions: Mapping[str, Mapping[str, Any]]) -> list[DifferenceGroup]:
    """The first :data:`TOP_DIFFERENCES` cells of the differences table, grouped by pair and question."""
    groups: list[DifferenceGroup] = []
    opened: tuple[Any, ...] | None = None
    for r in _records(diff.head(TOP_DIFFERENCES)):
        if (r["model_a"], r["model_b"], r["question_id"]) != opened:
            opened = (r["model_a"], r["model_b"], r["question_id"])
            groups.append(DifferenceGroup(str(r["question_id"]), questions.get(str(r["question_id"])),
                                          float(r["question_disagreement"]), f"{r['model_a']} vs {r['model_b']}",
                                          []))
        groups[-1].rows.append({**r, "response_a_cut": cut(r["response_a"]), "response_b_cut": cut(r["response_b"])})
    return groups


def _param(key: str) -> Callable[[RunEvidence], str]:
    return lambda item: item.run.params.get(key, "–")


def _tag(key: str) -> Callable[[RunEvidence], str]:
    return lambda item: item.run.tags.get(key, "–")


def _source(item: RunEvidence) -> str:
    """Where the weights came from: an Ollama tag, a Python package, or a file path (per machine)."""
    run, details = item.run, item.run.model_detail
    for value in (details.get("tag"), run.model_package, run.model_path, details.get("path")):
        if value and value not in ("null", "None"):
            return value
    return "–"


def _size(item: RunEvidence) -> str:
    logged = item.metrics.get(METRIC_N_QUESTIONS)
    return str(int(logged)) if logged is not None else item.run.dataset_n or "–"


def _token_pair(prompt: str, completion: str) -> Callable[[RunEvidence], str]:
    """``<prompt> prompt + <completion> completion`` tokens from two logged metrics; a dash for a run without them."""
    def value(item: RunEvidence) -> str:
        a, b = item.metrics.get(prompt), item.metrics.get(completion)
        if a is None or b is None:
            return "–"
        return f"{int(a):,} prompt + {int(b):,} completion"
    return value


def _count(metric: str) -> Callable[[RunEvidence], str]:
    def value(item: RunEvidence) -> str:
        logged = item.metrics.get(metric)
        return "–" if logged is None else f"{int(logged):,}"
    return value


def _cost(item: RunEvidence) -> str:
    """What the run's own requests cost at its ``model.pricing`` (a run without prices logs no ``cost_usd``)."""
    logged = item.metrics.get(METRIC_COST_USD)
    if logged is not None:
        return f"${logged:,.4f}"
    return "no model.pricing" if METRIC_TOKENS_PROMPT in item.metrics else "–"


# (item key, row label, value, whether runs must agree on it to be directly comparable)
SETUP_ROWS: tuple[tuple[str, str, Callable[[RunEvidence], str], bool], ...] = (
    ("run_id", "MLflow run id", lambda item: item.run.run_id, False),
    ("model", "model (model.name)", _param(PARAM_MODEL_NAME), False),
    ("backend", "backend", _param(PARAM_MODEL_BACKEND), False),
    ("model_source", "model tag / package / file", _source, False),
    ("model_digest", "model digest", _tag(TAG_MODEL_DIGEST), False),
    ("dataset", "dataset / split", lambda i: f"{i.run.params.get(PARAM_DATASET_NAME, '–')} / "
                                             f"{i.run.params.get(PARAM_DATASET_SPLIT, '–')}", True),
    ("dataset_version", "dataset version", _tag(TAG_DATASET_VERSION), True),
    ("question_set_sha256", "frozen question set sha256", _tag(TAG_QUESTION_SET), True),
    ("question_set_size", "questions in the set", _size, True),
    ("sample_seed", "sample seed (dataset.sample_seed)", _param(PARAM_DATASET_SAMPLE_SEED), True),
    ("condition_set", "condition set", _param(PARAM_CONDITIONS_NAME), True),
    ("conditions", "conditions", lambda i: ", ".join(i.run.conditions) or "–", True),
    ("template_version", "template version", _param(PARAM_TEMPLATE_VERSION), True),
    ("temperature", "temperature", _param(PARAM_GENERATION_TEMPERATURE), True),
    ("max_tokens", "max_tokens", _param(PARAM_GENERATION_MAX_TOKENS), True),
    ("generation_seed", "generation seed", _param(PARAM_GENERATION_SEED), True),
    ("top_p", "top_p", _param(PARAM_GENERATION_TOP_P), True),
    ("top_k", "top_k", _param(PARAM_GENERATION_TOP_K), True),
    ("repetitions", "repetitions", _param(PARAM_GENERATION_REPETITIONS), True),
    (PARAM_PARSER_VERSION, "parser version", _param(PARAM_PARSER_VERSION), True),
    (PARAM_SCORER_VERSION, "scorer version", _param(PARAM_SCORER_VERSION), True),
    (PARAM_PROTOCOL_VERSION, "protocol version", _param(PARAM_PROTOCOL_VERSION), True),
    ("prism_version", "PRISM version", _tag(TAG_VERSION), False),
    ("git_commit", "PRISM commit", lambda i: (i.run.git_commit or "–")
     + (" (uncommitted changes)" if i.run.git_dirty else ""), False),
    # What the run asked and what it cost (tokens_* and cost_usd, prism.run.usage): the backend's own counts.
    ("tokens_asked", "tokens asked in this run", _token_pair(METRIC_TOKENS_PROMPT, METRIC_TOKENS_COMPLETION), False),
    ("tokens_from_store", "tokens of cells the store served",
     _token_pair(METRIC_TOKENS_FROM_STORE_PROMPT, METRIC_TOKENS_FROM_STORE_COMPLETION), False),
    (METRIC_TOKENS_PROVIDER_CACHED, "prompt tokens the provider served from its cache",
     _count(METRIC_TOKENS_PROVIDER_CACHED), False),
    (METRIC_COST_USD, "cost of this run's requests (USD)", _cost, False),
)
# Items shown as code (identifiers a reader copies).
CODE_ITEMS = frozenset({"run_id", "model_digest", "question_set_sha256", "git_commit", "dataset_version"})


@dataclass(frozen=True)
class SetupRow:
    """One reproducibility item across the runs.

    Attributes:
        key: The item (``data-item``).
        label: Its row label.
        values: Its value per run, in run order.
        differs: Whether runs that must agree on it differ.
        code: Whether it is shown as code.
    """

    key: str
    label: str
    values: list[str]
    differs: bool
    code: bool


def setup_rows(evidence: Sequence[RunEvidence], absent: str = "–") -> list[SetupRow]:
    """Every reproducibility item of each run, side by side; ``absent`` for what a run did not record."""
    rows = []
    for key, label, value, must_agree in SETUP_ROWS:
        values = [value(item) for item in evidence]
        if absent != "–":  # the site says "not recorded" where the report shows a dash
            values = [absent if v in ("–", "– / –") else v for v in values]
        rows.append(SetupRow(key, label, values, must_agree and len(set(values)) > 1, key in CODE_ITEMS))
    return rows


def problems(evidence: Sequence[RunEvidence]) -> list[str]:
    """What could not be read of each run, said on the page rather than hidden."""
    return [f"{item.run.label} ({item.run.run_id}): {problem}" for item in evidence for problem in item.problems]


def comparison_settings(context: ReportContext) -> list[tuple[str, str, bool]]:
    """(setting, value, shown as code) of the comparison itself."""
    ids = ",".join(item.run.run_id for item in context.evidence)
    return [("comparison run id", context.run_id, True), ("compared run ids", ids, True),
            ("baseline condition", context.baseline, False), ("bootstrap resamples (B)", str(context.n_boot), False),
            ("bootstrap seed", str(context.seed), False),
            ("allow_mismatch", str(context.allow_mismatch).lower(), False),
            ("recompute", f"python -m prism.compare runs=[{ids}] baseline={context.baseline} "
                          f"bootstrap={context.n_boot} seed={context.seed}", True)]


@dataclass(frozen=True)
class TemplateFile:
    """One file of a ``prompts/`` artifact as a person reads it.

    Attributes:
        name: File name.
        text: The file as logged.
        closing: The condition set's ``{closing}`` line, if it has one.
        conditions: (name, description, template) per condition; empty when the file is not a condition set
            of the usual layout, which is then shown verbatim.
    """

    name: str
    text: str
    closing: str
    conditions: tuple[tuple[str, str, str], ...]


@lru_cache(maxsize=64)
def template_file(name: str, text: str) -> TemplateFile:
    """Read a condition set's YAML into its conditions' templates; other layouts are shown verbatim.

    Remembered by content: the runs of a site mostly share a few condition sets.
    """
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        data = None
    conditions = data.get("conditions") if isinstance(data, dict) else None
    if not isinstance(conditions, list) or not all(isinstance(c, dict) and "template" in c for c in conditions):
        return TemplateFile(name, text, "", ())
    assert isinstance(data, dict)
    return TemplateFile(name, text, str(data.get("closing") or ""),
                        tuple((str(c.get("name", "?")), str(c.get("description", "")), str(c["template"]))
                              for c in conditions))


def template_groups(evidence: Sequence[RunEvidence]) -> list[tuple[list[LoggedRun], str, list[TemplateFile]]]:
    """The templates each run used, read from its ``prompts/`` artifact; identical files are shown once.

    Returns:
        (runs that used them, their template versions, the files) per distinct set of files.
    """
    by_content: dict[tuple[tuple[str, str], ...], list[LoggedRun]] = {}
    for item in evidence:
        if item.prompts:
            by_content.setdefault(item.prompts, []).append(item.run)
    groups = []
    for files, runs in by_content.items():
        versions = ", ".join(dict.fromkeys(r.param(PARAM_TEMPLATE_VERSION, "?") for r in runs))
        groups.append((runs, versions, [template_file(name, content) for name, content in files]))
    return groups


def method_items(n_boot: int, seed: int) -> list[str]:
    """How the numbers were computed, in a few lines."""
    return [
        f"Intervals: 95% percentile bootstrap over questions (B = {n_boot}, seed {seed}); each "
        "resample keeps a question's conditions, repetitions and both sides of every pair together.",
        "Answers are the options the parser recovered without seeing the key, mapped back to canonical labels; a "
        "response with no recoverable answer is UNKNOWN, counted wrong for accuracy and as an answer of its own "
        "for flips and disagreement. Failed requests are not observed and leave their pairs out.",
        "Condition tests: exact McNemar on the discordant pairs with the baseline, Holm-adjusted across a "
        "model's conditions.",
        "Readings: from each run's logged question_majority_accuracy, mean_agreement and "
        "prompt_invariant_incorrect_rate, with intervals bootstrapped from its results/question_metrics.csv; "
        f"the patterns are {', '.join(PATTERNS)}.",
    ]


def sampling_used(evidence: Sequence[RunEvidence]) -> str:
    """The temperatures and repetitions the runs used, for the note under what PRISM does not claim."""
    sampling = sorted({(item.run.temperature or "?", item.run.repetitions or "?") for item in evidence})
    return "; ".join(f"temperature {t}, {r} repetition(s)" for t, r in sampling)
