"""The leaderboard's rank intervals: each shown run's rank over the prompts, from a comparison's rank_robustness.csv.

A comparison (:mod:`prism.compare.rank_robustness`) resamples questions and the prompt together and gives, per
pair of models, the probability that the more accurate one ranks above the other and each model's rank
interval. The site reads that table back (never recomputes it) and shows, beside each run of a leaderboard
table, its rank interval and whether its order against every other compared run is robust to the prompt
(every pair at :data:`prism.compare.rank_robustness.ROBUST` or above). The latest comparison holding a run wins.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from prism.names import PARAM_COMPARED_MODELS, PARAM_COMPARED_RUN_IDS
from prism.publish.comparisons import ComparisonEvidence

# Its text columns, shown as text (empty, not "nan", where the CSV had nothing).
_TEXT_COLUMNS = ("model_a", "model_b", "dataset", "condition_set", "flips_at")


@dataclass(frozen=True)
class RankMark:
    """A run's rank over the prompts.

    Attributes:
        low: The 2.5th percentile of its rank over the resamples (1 the most accurate).
        high: The 97.5th percentile.
        robust: Whether its order against every other run compared with it is robust to the prompt.
        weakest: The lowest P(a > b) of its pairs (the least sure order it is part of).
        against: The runs' models whose order with it is not robust.
        page: The comparison page it comes from, relative to the site's root.
    """

    low: float
    high: float
    robust: bool
    weakest: float
    against: tuple[str, ...]
    page: str

    @property
    def interval(self) -> str:
        """The interval as text: ``1`` or ``1–2``."""
        return f"{self.low:g}" if self.low == self.high else f"{self.low:g}–{self.high:g}"


def rank_marks(comparisons: Sequence[ComparisonEvidence]) -> dict[str, RankMark]:
    """Run id -> its rank mark, from the comparisons' rank_robustness tables (later comparisons win)."""
    marks: dict[str, RankMark] = {}
    for item in comparisons:
        table = item.tables.rank_robustness
        if table is None or table.empty:
            continue
        ids = [i for i in str(item.run.param(PARAM_COMPARED_RUN_IDS)).split(",") if i]
        labels = [m for m in str(item.run.param(PARAM_COMPARED_MODELS)).split(",") if m]
        run_of = dict(zip(labels, ids, strict=False))
        for label, run_id in run_of.items():
            rows = []
            for r in table.to_dict("records"):
                if r["model_a"] == label:
                    rows.append((float(r["rank_a_low"]), float(r["rank_a_high"]), r, str(r["model_b"])))
                elif r["model_b"] == label:
                    rows.append((float(r["rank_b_low"]), float(r["rank_b_high"]), r, str(r["model_a"])))
            if not rows:
                continue
            weak = tuple(other for _, _, r, other in rows if not _true(r["robust"]))
            marks[run_id] = RankMark(rows[0][0], rows[0][1], not weak,
                                     min(float(r["prob_a_above_b"]) for _, _, r, _ in rows), weak, item.page)
    return marks


def _true(value: object) -> bool:
    """A CSV's boolean read back (``True``/``true`` text or a bool)."""
    return value is True or str(value).strip().lower() == "true"


def rank_rows(item: ComparisonEvidence) -> list[dict[str, object]]:
    """The comparison's rank_robustness.csv as its page shows it: one row per pair, run ids resolved.

    Each row keeps the table's columns, with ``robust`` read back as a bool and ``run_a``/``run_b`` the runs of
    ``model_a``/``model_b`` (by the comparison's logged models and run ids; empty when a label is not found).
    """
    table = item.tables.rank_robustness
    if table is None or table.empty:
        return []
    ids = [i for i in str(item.run.param(PARAM_COMPARED_RUN_IDS)).split(",") if i]
    labels = [m for m in str(item.run.param(PARAM_COMPARED_MODELS)).split(",") if m]
    run_of = dict(zip(labels, ids, strict=False))
    rows: list[dict[str, object]] = []
    for record in table.to_dict("records"):
        row = {str(k): v for k, v in record.items()}
        for column in _TEXT_COLUMNS:  # an all-empty text column (no flips) reads back as NaN
            value = row.get(column, "")
            row[column] = "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
        rows.append({**row, "robust": _true(row["robust"]), "run_a": run_of.get(str(row["model_a"]), ""),
                     "run_b": run_of.get(str(row["model_b"]), "")})
    return rows


def rank_summary(rows: Sequence[dict[str, object]]) -> str:
    """One sentence on the pairs: how many keep their order robustly over the prompts, and which do not."""
    from prism.compare.rank_robustness import ROBUST

    if not rows:
        return ("No two compared runs share a question set and condition set with an answer key, so there is no "
                "ranking to resample.")
    weak = [r for r in rows if not r["robust"]]
    text = (f"{len(rows) - len(weak)} of {len(rows)} pair(s) keep their order in at least {ROBUST:.0%} of "
            f"{int(float(str(rows[0]['resamples'])))} resamples of questions and prompt")
    if weak:
        text += "; not robust to the prompt: " + ", ".join(
            f"{r['model_a']} > {r['model_b']} ({float(str(r['prob_a_above_b'])):.2f})" for r in weak)
    return text + "."
