"""The site's numbers: leaderboard values with bootstrap intervals, comparability markers, sort orders, heatmaps.

Every value shown is the run's logged MLflow metric; its 95% interval is a percentile bootstrap over
questions drawn as ``prism.compare`` draws it (:mod:`prism.stats.basics`, the same B and seed): the cell-level
rates (accuracy, recovery, compliance) over the run's observed scored records, the question-level ones
over its ``results/question_metrics.csv`` (each question first averaged over its repetitions, as the
metrics are). Pure functions over :class:`~prism.compare.evidence.RunEvidence`, no I/O.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from prism.compare.evidence import RunEvidence, has_no_key
from prism.compare.readings import ModelNumbers, question_estimates
from prism.compare.select import COMPARABILITY, canonical_value
from prism.names import (
    CAUSAL_PREFIX,
    CONSISTENCY_PREFIX,
    METRIC_ACCURACY,
    METRIC_ANSWER_RECOVERY,
    METRIC_ANSWER_UNANIMOUS,
    METRIC_INSTRUCTION_COMPLIANCE,
    METRIC_LIKELIHOOD_ACCURACY,
    METRIC_LIKELIHOOD_ANSWER_UNANIMOUS,
    METRIC_LIKELIHOOD_MEAN_AGREEMENT,
    METRIC_LIKELIHOOD_QUESTION_MAJORITY_ACCURACY,
    METRIC_MEAN_AGREEMENT,
    METRIC_MEAN_LABEL_MASS,
    METRIC_MEAN_PROB_TV,
    METRIC_MEAN_PROMPT_SENSITIVITY,
    METRIC_PROMPT_INVARIANT_INCORRECT,
    METRIC_QUESTION_MAJORITY_ACCURACY,
    METRIC_READING_AGREEMENT,
    condition_metric,
)
from prism.publish.runs import Cell, cell_of
from prism.stats import basics
from prism.stats.basics import Estimate


@dataclass(frozen=True)
class Metric:
    """One leaderboard column.

    Attributes:
        key: The MLflow metric.
        title: The column heading.
        needs_key: Whether it is computed against the answer key (absent for items without one).
        higher_is_better: The order a sort starts with (descending when true).
    """

    key: str
    title: str
    needs_key: bool
    higher_is_better: bool = True


LEADERBOARD = (
    Metric(METRIC_ACCURACY, METRIC_ACCURACY, True),
    Metric(METRIC_QUESTION_MAJORITY_ACCURACY, "question-majority accuracy", True),
    Metric(METRIC_MEAN_AGREEMENT, "mean agreement", False),
    Metric(METRIC_MEAN_PROMPT_SENSITIVITY, "prompt sensitivity", False, higher_is_better=False),
    Metric(METRIC_ANSWER_UNANIMOUS, "unanimity", False),
    Metric(METRIC_PROMPT_INVARIANT_INCORRECT, "prompt-invariant incorrectness", True, higher_is_better=False),
    Metric(METRIC_ANSWER_RECOVERY, "recovery", False),
    Metric(METRIC_INSTRUCTION_COMPLIANCE, "compliance", False),
)
# The likelihood reading's metrics, shown only when a run recorded them (logged values, no interval).
LIKELIHOOD = (
    Metric(METRIC_LIKELIHOOD_ACCURACY, "likelihood accuracy", True),
    Metric(METRIC_READING_AGREEMENT, "reading agreement", False),
    Metric(METRIC_MEAN_LABEL_MASS, "label mass", False),
    Metric(METRIC_LIKELIHOOD_QUESTION_MAJORITY_ACCURACY, "likelihood question-majority accuracy", True),
    Metric(METRIC_LIKELIHOOD_MEAN_AGREEMENT, "likelihood mean agreement", False),
    Metric(METRIC_LIKELIHOOD_ANSWER_UNANIMOUS, "likelihood unanimity", False),
    Metric(METRIC_MEAN_PROB_TV, "mean TV distance from the baseline", False, higher_is_better=False),
)
# Cell-level rates: the scored-record flag each one pools.
_CELL_FLAGS = {METRIC_ACCURACY: "correct", METRIC_ANSWER_RECOVERY: "recovered",
               METRIC_INSTRUCTION_COMPLIANCE: "compliant"}


def intervals(item: RunEvidence, n_boot: int, seed: int) -> dict[str, Estimate]:
    """Bootstrap intervals over questions of every leaderboard metric the run's artifacts allow."""
    found: dict[str, Estimate] = {}
    scored = item.scored
    if scored is not None and not scored.empty and "question_id" in scored:
        observed = scored[scored["error"].isna()] if "error" in scored else scored
        for metric, flag in _CELL_FLAGS.items():
            if flag in observed and observed[flag].notna().all():
                found[metric] = basics.pooled_rate(observed[flag].astype(float), observed["question_id"].astype(str),
                                                  n_boot=n_boot, seed=seed)
    frame = item.question_metrics
    if frame is not None and not frame.empty:
        found.update(question_estimates(frame, n_boot=n_boot, seed=seed))
        per_question = frame.groupby("question_id", sort=False).agg(
            agreement=("agreement", "mean"),
            unanimous=("unanimous", lambda v: v.astype(str).str.lower().eq("true").mean()))
        sensitivity = (1.0 - per_question["agreement"]).dropna()
        found[METRIC_MEAN_PROMPT_SENSITIVITY] = basics.pooled_rate(sensitivity, sensitivity.index, n_boot=n_boot,
                                                                   seed=seed)
        found[METRIC_ANSWER_UNANIMOUS] = basics.pooled_rate(per_question["unanimous"], per_question.index,
                                                           n_boot=n_boot, seed=seed)
    return found


@dataclass(frozen=True)
class Value:
    """One number as a page shows it: the logged metric, its interval, or why there is none.

    Attributes:
        value: The MLflow metric (NaN when absent).
        low: The interval's lower end (NaN without one).
        high: Its upper end.
        absent: What to write instead of a number ("" when there is one).
    """

    value: float
    low: float = math.nan
    high: float = math.nan
    absent: str = ""


def value_of(item: RunEvidence, metric: Metric, found: dict[str, Estimate]) -> Value:
    """The run's metric with its interval; "n/a (no answer key)" or "not recorded" when it has none."""
    from prism.formatting import NO_KEY

    logged = item.metrics.get(metric.key)
    if logged is None or math.isnan(logged):
        if metric.needs_key and has_no_key(item):
            return Value(math.nan, absent=NO_KEY)
        return Value(math.nan, absent="not recorded")
    interval = found.get(metric.key, Estimate.undefined())
    return Value(logged, interval.ci_low, interval.ci_high)


@dataclass(frozen=True)
class Row:
    """One run in its leaderboard group.

    Attributes:
        item: The run.
        values: Metric key -> value, for :data:`LEADERBOARD` and the likelihood metrics it recorded.
        markers: Why this run is not directly comparable with the others of its group (empty when it is).
    """

    item: RunEvidence
    values: dict[str, Value]
    markers: tuple[str, ...]

    @property
    def cell(self) -> Cell:
        """The run's model x dataset x condition set."""
        return cell_of(self.item.run)


def reading_numbers(row: Row) -> ModelNumbers:
    """The numbers a run's reading is made of, from its leaderboard values.

    They are the logged metrics and intervals :func:`prism.compare.evidence.model_numbers` gives, without
    drawing the bootstrap twice.
    """

    def estimate(key: str) -> Estimate:
        value = row.values[key]
        return Estimate(value.value, value.low, value.high) if not math.isnan(value.value) else Estimate.undefined()

    return ModelNumbers(row.item.run.label, estimate(METRIC_QUESTION_MAJORITY_ACCURACY),
                        estimate(METRIC_MEAN_AGREEMENT), estimate(METRIC_PROMPT_INVARIANT_INCORRECT),
                        row.item.metrics.get(METRIC_ANSWER_RECOVERY, math.nan), no_key=has_no_key(row.item))


@dataclass(frozen=True)
class Group:
    """A leaderboard table: the runs of one dataset and condition set.

    Attributes:
        dataset: The dataset.
        conditions: The condition set.
        rows: Its runs, in model order.
        likelihood: The likelihood metrics any of its runs recorded.
    """

    dataset: str
    conditions: str
    rows: list[Row]
    likelihood: tuple[Metric, ...]

    @property
    def anchor(self) -> str:
        """The group's anchor on the index."""
        return slug(f"board-{self.dataset}-{self.conditions}")


def slug(text: str) -> str:
    """A file or anchor name: letters, digits, ``-``, ``_`` and ``.`` kept, anything else ``-``."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text).strip(".") or "x"


def markers(items: Sequence[RunEvidence]) -> dict[str, tuple[str, ...]]:
    """Per run, each comparability key on which it differs from most runs of its group, and how.

    The reference is the value most runs of the group share (the first such run's on a tie), so one odd run
    is marked, not all the others.
    """
    found: dict[str, list[str]] = {item.run.run_id: [] for item in items}
    for label, where, key in COMPARABILITY:
        raw = {item.run.run_id: (item.run.tags if where == "tag" else item.run.params).get(key) for item in items}
        counts = Counter(canonical_value(v) for v in raw.values())
        if len(counts) < 2:
            continue
        reference = counts.most_common(1)[0][0]
        shown = next(v for v in raw.values() if canonical_value(v) == reference)
        for run_id, value in raw.items():
            if canonical_value(value) != reference:
                found[run_id].append(f"{label} is {_short(value)}, not {_short(shown)} as in the other runs here")
    return {k: tuple(v) for k, v in found.items()}


def _short(raw: str | None) -> str:
    if canonical_value(raw) is None:
        return "unset"
    text = str(raw)
    return text[:12] + "…" if len(text) > 16 else text


def groups(items: Sequence[RunEvidence], n_boot: int, seed: int) -> list[Group]:
    """The leaderboard: one group per dataset x condition set, rows in the runs' order."""
    by_group: dict[tuple[str, str], list[RunEvidence]] = {}
    for item in items:
        cell = cell_of(item.run)
        by_group.setdefault((cell.dataset, cell.conditions), []).append(item)
    built = []
    for (dataset, conditions), members in sorted(by_group.items()):
        marks = markers(members)
        likelihood = tuple(m for m in LIKELIHOOD if any(m.key in i.metrics for i in members))
        rows = []
        for item in members:
            found = intervals(item, n_boot, seed)
            values = {m.key: value_of(item, m, found) for m in (*LEADERBOARD, *likelihood)}
            for m in likelihood:  # logged values only: the likelihood reading has no per-question artifact here
                values[m.key] = Value(values[m.key].value, absent=values[m.key].absent)
            rows.append(Row(item, values, marks[item.run.run_id]))
        built.append(Group(dataset, conditions, rows, likelihood))
    return built


@dataclass(frozen=True)
class Order:
    """One pre-rendered sort of the leaderboard.

    Attributes:
        key: The metric sorted by ("model" for the model name).
        descending: The direction.
    """

    key: str
    descending: bool

    @property
    def page(self) -> str:
        """The file the order is rendered to (the model-name order is the index itself)."""
        if self.key == "model" and not self.descending:
            return "index.html"
        return f"by-{slug(self.key)}-{'desc' if self.descending else 'asc'}.html"

    def flipped(self) -> Order:
        """The same key in the other direction."""
        return Order(self.key, not self.descending)


def orders(metrics: Sequence[Metric]) -> list[Order]:
    """Every order the site pre-renders: the model name and each metric, both ways."""
    return [Order("model", False), Order("model", True),
            *(Order(m.key, d) for m in metrics for d in (m.higher_is_better, not m.higher_is_better))]


def first_order(key: str, metrics: Sequence[Metric]) -> Order:
    """The order a column heading links to first: best first for a metric, A to Z for the model."""
    for m in metrics:
        if m.key == key:
            return Order(key, m.higher_is_better)
    return Order("model", False)


def sort_rows(rows: Sequence[Row], order: Order) -> list[Row]:
    """The rows in ``order``; runs without a value go last whichever the direction."""
    if order.key == "model":
        return sorted(rows, key=lambda r: r.item.run.model, reverse=order.descending)
    valued = [r for r in rows if not math.isnan(r.values[order.key].value)] if rows and order.key in rows[0].values \
        else []
    rest = [r for r in rows if r not in valued]
    valued.sort(key=lambda r: (r.values[order.key].value, r.item.run.model), reverse=order.descending)
    return valued + rest


@dataclass(frozen=True)
class Panel:
    """One model's per-family consistency heatmap, laid out like the robustness paper's Figure 1.

    Attributes:
        model: The model.
        families: The columns (perturbation families, in first-seen order).
        rows: (row label, run id, family -> consistency) per dataset (with its condition set when the model
            has more than one for the dataset).
    """

    model: str
    families: list[str]
    rows: list[tuple[str, str, dict[str, float]]]


def panels(items: Sequence[RunEvidence]) -> list[Panel]:
    """Per model, mean consistency with the baseline per dataset and family (``consistency/<family>``)."""
    by_model: dict[str, list[RunEvidence]] = {}
    for item in items:
        by_model.setdefault(item.run.model, []).append(item)
    built = []
    for model, members in by_model.items():
        families: list[str] = []
        rows = []
        datasets = Counter(cell_of(i.run).dataset for i in members)
        for item in sorted(members, key=lambda i: (cell_of(i.run).dataset, cell_of(i.run).conditions)):
            cell: Cell = cell_of(item.run)
            values = {name.split("/")[1]: v for name, v in item.metrics.items()
                      if name.startswith(CONSISTENCY_PREFIX) and name.count("/") == 1}
            families += [f for f in values if f not in families]
            label = cell.dataset if datasets[cell.dataset] == 1 else f"{cell.dataset} · {cell.conditions}"
            rows.append((label, item.run.run_id, values))
        if families:
            built.append(Panel(model, families, rows))
    return built


def shade(value: float | None) -> str:
    """The heatmap class of a consistency value: ``h0`` (0-10%) to ``h9`` (90-100%), ``hn`` when undefined."""
    if value is None or math.isnan(value):
        return "hn"
    return f"h{min(9, max(0, int(value * 10)))}"


def per_condition(item: RunEvidence) -> list[dict[str, float | str]]:
    """Per condition of the run: its role, its logged rates and its consistency with the baseline."""
    rows: list[dict[str, float | str]] = []
    variants = {name.split("/")[2]: (name.split("/")[1], v) for name, v in item.metrics.items()
                if name.startswith(CONSISTENCY_PREFIX) and name.count("/") == 2}
    for condition in item.run.conditions:
        family, consistency = variants.get(condition, ("", math.nan))
        # A run logs causal/<condition> only for a condition whose step moved the key (prism.results.roles).
        role = "causal" if CAUSAL_PREFIX + condition in item.metrics else "invariant"
        row: dict[str, float | str] = {"condition": condition, "family": family, "consistency": consistency,
                                       "role": role}
        for name in (METRIC_ACCURACY, METRIC_ANSWER_RECOVERY, METRIC_INSTRUCTION_COMPLIANCE,
                     METRIC_LIKELIHOOD_ACCURACY):
            row[name] = item.metrics.get(condition_metric(name, condition), math.nan)
        rows.append(row)
    return rows


def disagreements(item: RunEvidence, limit: int = 8) -> list[tuple[str, float, pd.DataFrame]]:
    """The questions whose answers differ most across conditions: (question id, agreement, its responses).

    Lowest mean agreement first (then most distinct answers); questions without a recovered answer last.
    """
    frame, scored = item.question_metrics, item.scored
    if frame is None or frame.empty or scored is None or scored.empty:
        return []
    per_question = frame.groupby("question_id", sort=False)["agreement"].mean()
    ranked = per_question[per_question < 1].sort_values(kind="stable").head(limit)
    observed = scored[scored["error"].isna()] if "error" in scored else scored
    order = {c: i for i, c in enumerate(item.run.conditions)}
    found = []
    for question_id, agreement in ranked.items():
        cells = observed[observed["question_id"].astype(str) == str(question_id)]
        cells = cells.assign(_c=cells["condition"].map(order)).sort_values(["_c", "repetition"], kind="stable")
        found.append((str(question_id), float(agreement), cells))
    return found
