"""The sections of ``report.html`` below its summary, each a function from data to escaped markup.

Elements that carry a value a reader (or a test) looks up have ``data-`` attributes naming it: the
setup table's cells ``data-run``/``data-item``, each reading ``data-model``/``data-patterns``, each
template ``data-condition``, each non-claim ``data-claim``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import yaml

from prism.compare.readings import PATTERNS, ModelNumbers, Reading, Thresholds
from prism.compare.report_html import Html, el, join, missing, num, p_value, pct, png_figure, table, with_ci
from prism.compare.select import RunSummary
from prism.compare.tables import POOLED, cap_note, pairing_note

SIGNIFICANCE = 0.05  # the level of prism.compare.core's significant_conditions metric

if TYPE_CHECKING:
    from prism.compare.report import ReportContext, RunEvidence

# How many cells of the differences table the page lists (the CSV has them all).
TOP_DIFFERENCES = 12
# Responses longer than this are cut on the page (the CSV and the run's responses.jsonl keep them whole).
RESPONSE_CHARS = 160

SECTIONS = (("summary", "Summary"), ("readings", "Readings"), ("sensitivity", "Condition sensitivity"),
            ("divergence", "Divergence"), ("differences", "Where models differ"), ("setup", "Reproduce"),
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


def navigation() -> Html:
    """Links to the sections."""
    return el("nav", *(el("a", title, href=f"#{anchor}") for anchor, title in SECTIONS))


def readings_section(numbers: Sequence[ModelNumbers], readings: Sequence[Reading], thresholds: Thresholds) -> Html:
    """Per model, the patterns its numbers show, the numbers with intervals, and how firm the reading is."""
    cards = []
    for number, reading in zip(numbers, readings, strict=True):
        undefined = any(math.isnan(e.value) for e in (number.majority_accuracy, number.agreement,
                                                        number.invariant_incorrect))
        badges = [el("span", p, cls="pattern") for p in reading.patterns] or [
            el("span", "not read: a number is undefined" if undefined else "none of the four patterns fits",
               cls="pattern none")]
        described = [el("li", el("strong", p), ": ", PATTERN_TEXT[p], ".") for p in reading.patterns]
        described += [el("li", reading.gap)] if reading.gap else []
        shown = table(["question-majority accuracy", "mean agreement", "prompt-invariant incorrect rate",
                       "answer recovery"],
                      [[with_ci(e.value, e.ci_low, e.ci_high) for e in
                        (number.majority_accuracy, number.agreement, number.invariant_incorrect)]
                       + [num(number.recovery)]], numeric=(0, 1, 2, 3))
        firmness = [el("li", f"Borderline: {note}, so this part of the reading could change with another sample "
                              "of questions.") for note in reading.borderline]
        firmness += [el("li", caution) for caution in reading.cautions]
        cards.append(el("div", el("h3", number.label), el("div", *badges),
                        el("ul", *described) if described else None, shown,
                        el("ul", *firmness, cls="note") if firmness else None,
                        cls="reading", data_model=number.label, data_patterns=";".join(reading.patterns)))
    rules = el("ul", *(el("li", rule) for rule in (
        f"accurate and stable: question-majority accuracy ≥ {thresholds.accurate:.2f} and mean agreement ≥ "
        f"{thresholds.stable:.2f};",
        f"capable but prompt-dependent: question-majority accuracy ≥ {thresholds.accurate:.2f} and mean agreement "
        f"< {thresholds.stable:.2f};",
        f"inaccurate and unstable: question-majority accuracy < {thresholds.accurate:.2f} and mean agreement < "
        f"{thresholds.stable:.2f};",
        f"consistently wrong (prompt-invariant incorrectness): prompt-invariant incorrect rate ≥ "
        f"{thresholds.invariant_wrong:.2f}; it can hold beside another pattern.")))
    return el("section", el("h2", "Readings: patterns in each model's numbers", id="readings"),
              el("p", "These describe the numbers of these runs; they are not classifications of the models. "
                      "Question-majority accuracy is the share of questions whose most frequent answer across "
                      "conditions is correct; mean agreement is, per question, the share of recovered answers "
                      "that equal the most frequent one, averaged over questions; the prompt-invariant incorrect "
                      "rate is the share of questions answered with the same wrong option under every condition. "
                      "Intervals are 95% bootstrap intervals over questions. The thresholds are round numbers, "
                      "not calibrated:"), rules, *cards)


def _figure(figures: Sequence[Path], name: str, alt: str, caption: str) -> Html | None:
    found = [f for f in figures if f.name == name]
    return png_figure(found[0], alt, caption) if found else None


def sensitivity_section(tables: Mapping[str, pd.DataFrame], figures: Sequence[Path], baseline: str) -> Html:
    """Per model, each condition against the baseline, then the accuracy and flip-rate heatmaps."""
    parts: list[Any] = [el("h2", f"Condition sensitivity against {baseline}", id="sensitivity"),
                        el("p", f"Per model, each condition compared with {baseline} on the same questions. "
                                "Δ accuracy and flip rate are over cells paired with the baseline; flip rate counts "
                                "any change of answer (UNKNOWN included). p is an exact McNemar test, Holm-adjusted "
                                "within the model; highlighted rows have adjusted p < 0.05. Rows are ranked by "
                                "effect size.")]
    intervals = {(str(r["model"]), str(r["condition"])): (r["ci_low"], r["ci_high"])
                 for r in tables["accuracy"].to_dict("records")}
    for model, rows in tables["sensitivity"].groupby("model", sort=False):
        body, classes = [], []
        for r in rows.to_dict("records"):
            low, high = intervals.get((str(model), str(r["condition"])), (None, None))
            body.append([r["condition"], with_ci(r["accuracy"], low, high),
                         with_ci(r["delta_accuracy"], r["delta_ci_low"], r["delta_ci_high"], signed=True),
                         with_ci(r["flip_rate"], r["flip_ci_low"], r["flip_ci_high"]), p_value(r["mcnemar_p"]),
                         p_value(r["mcnemar_p_holm"])])
            significant = not missing(r["mcnemar_p_holm"]) and float(r["mcnemar_p_holm"]) < SIGNIFICANCE
            classes.append("significant" if significant else None)
        parts += [el("h3", str(model)),
                  table(["condition", "accuracy [95% CI]", f"Δ accuracy vs {baseline}", f"flip rate vs {baseline}",
                         "McNemar p", "Holm p"], body, numeric=(1, 2, 3, 4, 5), row_classes=classes)]
    parts.append(_figure(figures, "accuracy_heatmap.png", "Accuracy heatmap, model by condition",
                         "Accuracy per model and condition with 95% bootstrap intervals (UNKNOWN counts as wrong)."))
    parts.append(_figure(figures, "flip_rate_heatmap.png", "Flip-rate heatmap, model by condition",
                         f"Share of each condition's answers that differ from the same question's answer under "
                         f"{baseline}."))
    return el("section", *parts)


def divergence_section(tables: Mapping[str, pd.DataFrame], figures: Sequence[Path]) -> Html | None:
    """Answer disagreement between each pair of models, per condition and pooled; the divergence matrix."""
    if "divergence" not in tables:
        return el("section", el("h2", "Divergence between models", id="divergence"),
                  el("p", "One run was compared: there is no other model to diverge from."))
    parts: list[Any] = [el("h2", "Divergence between models", id="divergence"),
                        el("p", "Share of paired cells (same question, condition and repetition) whose answers "
                                "differ, UNKNOWN an answer of its own; 'answered only' leaves out cells where either "
                                "side has no recovered answer. κ is Cohen's kappa over the answers. Excess is the "
                                "disagreement minus the mean of the two models' own across-condition disagreement: "
                                "near zero, the models differ about as much as each differs from itself."),
                        el("p", pairing_note(tables))]
    for (a, b), rows in tables["divergence"].groupby(["model_a", "model_b"], sort=False):
        body = [[r.condition, with_ci(r.disagreement, r.disagreement_ci_low, r.disagreement_ci_high),
                 num(r.disagreement_answered), num(r.kappa),
                 f"{r.both_correct} / {r.only_a} / {r.only_b} / {r.both_wrong}",
                 with_ci(r.excess, r.excess_ci_low, r.excess_ci_high, signed=True)]
                for r in rows.itertuples(index=False)]
        classes = ["pooled" if r.condition == POOLED else None for r in rows.itertuples(index=False)]
        parts += [el("h3", f"{a} vs {b}"),
                  table(["condition", "disagreement [95% CI]", "answered only", "κ",
                         f"both right / only {a} / only {b} / neither", "excess [95% CI]"], body,
                        numeric=(1, 2, 3, 4, 5), row_classes=classes)]
    parts.append(_figure(figures, "divergence_matrix.png", "Divergence matrix between models",
                         "Off the diagonal: disagreement between two models over all shared conditions. On the "
                         "diagonal: each model's disagreement with itself across conditions."))
    return el("section", *parts)


def _cut(value: Any) -> str:
    if not isinstance(value, str):
        return "–"
    flat = " ".join(value.split())
    return flat if len(flat) <= RESPONSE_CHARS else flat[: RESPONSE_CHARS - 1] + "…"


def _question(question_id: str, question: Mapping[str, Any] | None, share: float, pair: str) -> Html:
    """The row that opens a question's cells: its text and options, so the answers below can be read."""
    parts: list[Any] = [el("code", question_id), f" · {pair} · answers differ in {pct(share)} of its cells"]
    if question:
        options = zip(question.get("labels", ()), question.get("options", ()), strict=False)
        parts += [el("div", el("strong", question.get("question", ""))),
                  el("div", join((f"{label}. {option}" for label, option in options), "   ·   "), cls="note")]
    return el("tr", el("td", *parts, colspan="5"), cls="group")


def differences_section(tables: Mapping[str, pd.DataFrame], questions: Mapping[str, Mapping[str, Any]]) -> Html | None:
    """The cells where two models' answers differ, questions where they differ most first, with their text."""
    if "differences" not in tables:
        return None
    diff = tables["differences"]
    head = diff.head(TOP_DIFFERENCES)
    rows: list[Html] = []
    opened: tuple[Any, ...] | None = None
    for r in head.to_dict("records"):
        if (r["model_a"], r["model_b"], r["question_id"]) != opened:
            opened = (r["model_a"], r["model_b"], r["question_id"])
            rows.append(_question(str(r["question_id"]), questions.get(str(r["question_id"])),
                                  float(r["question_disagreement"]), f"{r['model_a']} vs {r['model_b']}"))
        cells = [r["condition"], r["correct_answer"],
                 el("span", f"{r['model_a']}: ", el("strong", r["answer_a"]), el("br"), f"{r['model_b']}: ",
                    el("strong", r["answer_b"])),
                 el("div", f"{r['model_a']}: {_cut(r['response_a'])}", el("br"),
                    f"{r['model_b']}: {_cut(r['response_b'])}", cls="response"),
                 el("details", el("summary", "prompt"), el("pre", r["prompt"] or "(not available)"))]
        rows.append(el("tr", *(el("td", c) for c in cells)))
    header = el("thead", el("tr", *(el("th", h) for h in ("condition", "key", "answers", "responses", ""))))
    shown = f"The first {len(head)} of {len(diff)}" if len(diff) > len(head) else f"All {len(diff)}"
    return el("section", el("h2", "Where the models differ most", id="differences"),
              el("p", f"{shown} listed cells where two models gave different answers, questions with the most "
                      "disagreement first. Responses are the models' raw text (shortened here; whole in "
                      "comparison/differences.csv and each run's responses/responses.jsonl)."),
              el("p", cap_note(tables)),
              el("table", header, el("tbody", *rows), cls="differences")
              if rows else el("p", "Nowhere: every paired answer agrees."))


def _param(key: str) -> Callable[[RunEvidence], str]:
    return lambda item: item.run.params.get(key, "–")


def _tag(key: str) -> Callable[[RunEvidence], str]:
    return lambda item: item.run.tags.get(key, "–")


def _source(item: RunEvidence) -> str:
    """Where the weights came from: an Ollama tag, a Python package, or a file path (per machine)."""
    params, tags = item.run.params, item.run.tags
    for value in (tags.get("prism.model.tag"), params.get("model.package"), params.get("model.path"),
                  tags.get("prism.model.path")):
        if value and value not in ("null", "None"):
            return value
    return "–"


def _size(item: RunEvidence) -> str:
    logged = item.metrics.get("n_questions")
    return str(int(logged)) if logged is not None else item.run.params.get("dataset.n", "–")


# (item key, row label, value, whether runs must agree on it to be directly comparable)
SETUP_ROWS: tuple[tuple[str, str, Callable[[RunEvidence], str], bool], ...] = (
    ("run_id", "MLflow run id", lambda item: item.run.run_id, False),
    ("model", "model (model.name)", _param("model.name"), False),
    ("backend", "backend", _param("model.backend"), False),
    ("model_source", "model tag / package / file", _source, False),
    ("model_digest", "model digest", _tag("prism.model_digest"), False),
    ("dataset", "dataset / split", lambda i: f"{i.run.params.get('dataset.name', '–')} / "
                                             f"{i.run.params.get('dataset.split', '–')}", True),
    ("dataset_version", "dataset version", _tag("prism.dataset_version"), True),
    ("question_set_sha256", "frozen question set sha256", _tag("prism.question_set_sha256"), True),
    ("question_set_size", "questions in the set", _size, True),
    ("sample_seed", "sample seed (dataset.sample_seed)", _param("dataset.sample_seed"), True),
    ("condition_set", "condition set", _param("conditions.name"), True),
    ("conditions", "conditions", lambda i: ", ".join(i.run.conditions) or "–", True),
    ("template_version", "template version", _param("conditions.template_version"), True),
    ("temperature", "temperature", _param("generation.temperature"), True),
    ("max_tokens", "max_tokens", _param("generation.max_tokens"), True),
    ("generation_seed", "generation seed", _param("generation.seed"), True),
    ("top_p", "top_p", _param("generation.top_p"), True),
    ("top_k", "top_k", _param("generation.top_k"), True),
    ("repetitions", "repetitions", _param("generation.repetitions"), True),
    ("parser_version", "parser version", _param("parser_version"), True),
    ("scorer_version", "scorer version", _param("scorer_version"), True),
    ("protocol_version", "protocol version", _param("protocol_version"), True),
    ("prism_version", "PRISM version", _tag("prism.version"), False),
    ("git_commit", "PRISM commit", lambda i: i.run.tags.get("prism.git_commit", "–")
     + (" (uncommitted changes)" if i.run.tags.get("prism.git_dirty") == "true" else ""), False),
)


def setup_section(context: ReportContext) -> Html:
    """Everything needed to reproduce each run and the comparison, runs side by side."""
    evidence = context.evidence
    rows = []
    for key, label, value, must_agree in SETUP_ROWS:
        values = [value(item) for item in evidence]
        differs = must_agree and len(set(values)) > 1
        cells = [el("td", el("code", v) if key in ("run_id", "model_digest", "question_set_sha256", "git_commit",
                                                      "dataset_version") else v,
                        data_run=item.run.run_id, data_item=key) for item, v in zip(evidence, values, strict=True)]
        rows.append(el("tr", el("th", label, scope="row"), *cells, cls="differs" if differs else None))
    rows.append(el("tr", el("th", "reproduce", scope="row"),
                   *(el("td", el("code", f"python -m prism.reproduce {item.run.run_id}"),
                        data_run=item.run.run_id, data_item="reproduce") for item in evidence)))
    head = el("thead", el("tr", el("th", ""), *(el("th", item.run.label, scope="col") for item in evidence)))
    ids = ",".join(item.run.run_id for item in evidence)
    settings = table(["setting", "value"], [
        ["comparison run id", el("code", context.run_id)], ["compared run ids", el("code", ids)],
        ["baseline condition", context.baseline], ["bootstrap resamples (B)", str(context.n_boot)],
        ["bootstrap seed", str(context.seed)], ["allow_mismatch", str(context.allow_mismatch).lower()],
        ["recompute", el("code", f"python -m prism.compare runs=[{ids}] baseline={context.baseline} "
                                 f"bootstrap={context.n_boot} seed={context.seed}")]], cls="setup", id="comparison")
    problems = [el("li", f"{item.run.label} ({item.run.run_id}): {problem}") for item in evidence
                for problem in item.problems]
    return el("section", el("h2", "Reproduce and compare", id="setup"),
              el("p", "Each compared run as logged in MLflow. A highlighted row differs between runs on an item "
                      "that can change results. ", el("code", "python -m prism.reproduce RUN_ID"), ", with the same "
                      "tracking settings, re-runs one from its logged config and diffs every response."),
              el("table", head, el("tbody", *rows), cls="setup", id="runs"),
              el("div", el("strong", "Not available:"), el("ul", *problems), cls="warning") if problems else None,
              el("h3", "The comparison"), settings)


def _templates(text_: str) -> Html:
    """A condition set's YAML as a person reads it: each condition's template; other layouts verbatim."""
    try:
        data = yaml.safe_load(text_)
    except yaml.YAMLError:
        data = None
    conditions = data.get("conditions") if isinstance(data, dict) else None
    if not isinstance(conditions, list) or not all(isinstance(c, dict) and "template" in c for c in conditions):
        return el("pre", text_)
    parts: list[Any] = []
    if data.get("closing"):
        parts.append(el("p", "{closing} is: ", el("code", data["closing"])))
    for condition in conditions:
        name = str(condition.get("name", "?"))
        parts += [el("h3", name, " ", el("span", condition.get("description", ""), cls="note")),
                  el("pre", condition["template"], data_condition=name)]
    parts.append(el("details", el("summary", "the file as logged"), el("pre", text_)))
    return join(parts)


def templates_section(evidence: Sequence[RunEvidence]) -> Html:
    """The templates each run used, read from its ``prompts/`` artifact; identical files are shown once."""
    by_content: dict[tuple[tuple[str, str], ...], list[RunSummary]] = {}
    for item in evidence:
        if item.prompts:
            by_content.setdefault(item.prompts, []).append(item.run)
    parts: list[Any] = [el("h2", "Prompt templates", id="templates"),
                        el("p", "The condition set as each run logged it (its prompts/ artifact). {question} and "
                                "{options} are filled with the dataset's text and the labelled options.")]
    for files, runs in by_content.items():
        versions = ", ".join(dict.fromkeys(r.params.get("conditions.template_version", "?") for r in runs))
        parts.append(el("p", el("strong", f"Used by {', '.join(f'{r.label} ({r.run_id})' for r in runs)}"),
                        f" · template version {versions}"))
        for name, content in files:
            parts += [el("p", el("code", f"prompts/{name}")), _templates(content)]
    if not by_content:
        parts.append(el("p", "No run's templates could be read."))
    return el("section", *parts)


def method_section(context: ReportContext) -> Html:
    """How the numbers were computed, in a few lines."""
    items = (
        f"Intervals: 95% percentile bootstrap over questions (B = {context.n_boot}, seed {context.seed}); each "
        "resample keeps a question's conditions, repetitions and both sides of every pair together.",
        "Answers are the options the parser recovered without seeing the key, mapped back to canonical labels; a "
        "response with no recoverable answer is UNKNOWN, counted wrong for accuracy and as an answer of its own "
        "for flips and disagreement. Failed requests are not observed and leave their pairs out.",
        "Condition tests: exact McNemar on the discordant pairs with the baseline, Holm-adjusted across a "
        "model's conditions.",
        "Readings: from each run's logged question_majority_accuracy, mean_agreement and "
        "prompt_invariant_incorrect_rate, with intervals bootstrapped from its results/question_metrics.csv; "
        f"the patterns are {', '.join(PATTERNS)}.",
    )
    return el("section", el("h2", "How the numbers were computed", id="method"),
              el("ul", *(el("li", i) for i in items)))


def claims_section(evidence: Sequence[RunEvidence]) -> Html:
    """What PRISM does not claim, stated so that no reading above is taken for more than it is."""
    sampling = sorted({(item.run.params.get("generation.temperature", "?"),
                        item.run.params.get("generation.repetitions", "?")) for item in evidence})
    used = "; ".join(f"temperature {t}, {r} repetition(s)" for t, r in sampling)
    return el("section", el("h2", "What PRISM does not claim", id="not-claimed"),
              el("p", "PRISM measures how these models' multiple-choice answers to these questions depend on the "
                      "wording of the prompt. It does not claim:"),
              el("ul", *(el("li", el("strong", title), " ", claim, data_claim=key)
                         for key, title, claim in NOT_CLAIMED)),
              el("p", f"These runs used {used}.", cls="note") if used else None)
