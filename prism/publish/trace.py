"""The trace of the published site: from a number on a page to the cells behind it.

A cell is one (question, condition, repetition) of a run; a trace page, beside the site's pages under
``trace/``, lists the cells one number was computed from, question by question: the question, its key,
and for each side the number compares (a condition of a run; two conditions of a step; two runs at one
condition) the prompt as sent, then per repetition the raw response, the parser rule that decided
(``method``), the displayed label it recovered and the reading of it: the canonical answer (or UNKNOWN),
whether it is the key, and the likelihood reading where label probabilities were recorded. Failed
requests are listed too, marked as not observed (no statistic counts them).

Pages are made on demand: each ``cells``/``step``/``pair``/``run`` call returns the link a page puts on
a number and remembers the page it needs; :meth:`Trace.write` renders every page asked for, once. A
page's file name is its kind and a digest of what it shows, so the same cells are one file however many
numbers link to them. Everything is static HTML under the site's Content-Security-Policy: nothing is
loaded, and the prompts open with ``<details>``, which needs no script.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from prism.compare.evidence import RunEvidence
from prism.publish.board import slug

log = logging.getLogger(__name__)

TRACE_DIR = "trace"
# Columns a trace page shows of each cell, when the scored records have them.
_CELL_FIELDS = ("question_id", "condition", "repetition", "prompt_sha256", "response", "method", "displayed",
                "answer", "correct", "correct_answer", "likelihood_answer", "likelihood_correct", "error")


@dataclass(frozen=True)
class Side:
    """One set of cells a trace page shows: a condition of a run.

    Attributes:
        run_id: The run.
        label: How the page names the run (its model).
        condition: The condition.
    """

    run_id: str
    label: str
    condition: str


@dataclass(frozen=True)
class TracePage:
    """One page of the trace: what it backs and the cells it lists.

    Attributes:
        name: Its file name under ``trace/``.
        title: Its heading (what the cells are behind).
        what: One sentence on the number it backs.
        sides: The sets of cells, side by side per question (empty for a run's index page).
        conditions: For a run's index page, (condition, page name, cells) of each of its conditions.
        run_id: For a run's index page, the run (its page is linked).
    """

    name: str
    title: str
    what: str
    sides: tuple[Side, ...]
    conditions: tuple[tuple[str, str, int], ...] = ()
    run_id: str = ""


def _digest(*parts: str) -> str:
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()[:16]


@dataclass
class Trace:
    """The site's trace pages, asked for by the pages that link to them.

    Attributes:
        evidence: The site's runs by id (their scored records and frozen questions).
        prompts: Per run id, prompt sha256 -> the prompt text as sent.
        root: The path from a linking page to the site's root (``"../"`` for pages one folder down, see :meth:`at`).
        pages: Every page asked for so far, by file name.
    """

    evidence: Mapping[str, RunEvidence]
    prompts: Mapping[str, Mapping[str, str]]
    root: str = ""
    pages: dict[str, TracePage] = field(default_factory=dict)

    def _label(self, run_id: str) -> str:
        item = self.evidence.get(run_id)
        return item.run.model if item is not None else run_id

    def _ask(self, page: TracePage) -> str:
        self.pages.setdefault(page.name, page)
        return f"{self.root}{TRACE_DIR}/{page.name}"

    def has(self, run_id: str | None) -> bool:
        """Whether the run's cells are on the site (a run it does not show has no trace)."""
        item = self.evidence.get(run_id or "")
        return item is not None and item.scored is not None

    def cells(self, run_id: str, condition: str, metric: str = "", baseline: str = "") -> str | None:
        """The link to the cells behind a number of one condition, or None when the run's cells are not on the site.

        ``all`` (pooled over conditions) links to the run's index of conditions; ``consistency`` (agreement
        with ``baseline``, by default the run's first condition) to the step from the baseline.
        """
        if not self.has(run_id):
            return None
        if condition == "all":
            return self.run(run_id)
        if metric == "consistency":
            return self.step(run_id, baseline or self.baseline(run_id), condition)
        label = self._label(run_id)
        return self._ask(TracePage(f"cells-{_digest(run_id, condition)}.html", f"{label} · {condition}",
                                   f"The cells of {label} under {condition}: every number of this condition on the "
                                   "site is computed from them.", (Side(run_id, label, condition),)))

    def step(self, run_id: str | None, start: str, to: str) -> str | None:
        """The link to the cells of a step: the from-condition's beside the to-condition's, question by question."""
        if run_id is None or not self.has(run_id):
            return None
        label = self._label(run_id)
        return self._ask(TracePage(f"step-{_digest(run_id, start, to)}.html", f"{label} · {start} → {to}",
                                   f"The cells behind the step from {start} to {to} of {label}: each question's "
                                   f"responses under {start} beside its responses under {to}.",
                                   (Side(run_id, label, start), Side(run_id, label, to))))

    def pair(self, run_a: str, run_b: str, condition: str) -> str | None:
        """The link to two runs' cells under one condition, side by side."""
        if not (self.has(run_a) and self.has(run_b)):
            return None
        a, b = self._label(run_a), self._label(run_b)
        return self._ask(TracePage(f"pair-{_digest(run_a, run_b, condition)}.html", f"{a} vs {b} · {condition}",
                                   f"The cells behind {a} against {b} under {condition}: each question's responses "
                                   "of both models.", (Side(run_a, a, condition), Side(run_b, b, condition))))

    def run(self, run_id: str) -> str | None:
        """The link to a run's index of conditions, each linking to its cells (numbers pooled over conditions)."""
        if not self.has(run_id):
            return None
        item = self.evidence[run_id]
        scored = item.scored if item.scored is not None else pd.DataFrame()
        counts = {str(k): int(v) for k, v in scored.groupby("condition").size().items()} if "condition" in scored \
            else {}
        conditions = []
        for condition in item.run.conditions or tuple(counts):
            link = self.cells(run_id, condition)
            conditions.append((condition, (link or "").rsplit("/", 1)[-1], int(counts.get(condition, 0))))
        return self._ask(TracePage(f"run-{_digest(run_id)}.html", f"{item.run.model} · every condition",
                                   f"The cells of {item.run.model}'s run, one page per condition: numbers pooled "
                                   "over its conditions are computed from all of them.", (), tuple(conditions),
                                   run_id))

    def baseline(self, run_id: str) -> str:
        """The run's baseline condition (``conditions.baseline``; a run that did not log it: its first condition)."""
        run = self.evidence[run_id].run
        return run.baseline or (run.conditions[0] if run.conditions else "P0")

    def at(self, root: str) -> Trace:
        """The same trace, for pages at ``root`` from the site's root (``""`` or ``"../"``); pages are shared."""
        return Trace(self.evidence, self.prompts, root, self.pages)

    def write(self, out: Path, render: Callable[..., str], common: Mapping[str, Any]) -> list[str]:
        """Render every page asked for into ``out/trace/``; returns their paths relative to ``out``."""
        (out / TRACE_DIR).mkdir(exist_ok=True)
        written = []
        for name, page in sorted(self.pages.items()):
            text = render("site/trace.html.j2", **common, title=page.title, stylesheet="../style.css", page=page,
                          run_page=lambda run_id: f"../runs/{slug(run_id)}.html",
                          questions=self.questions(page.sides), observed=self.observed(page.sides))
            (out / TRACE_DIR / name).write_text(text, encoding="utf-8")
            written.append(f"{TRACE_DIR}/{name}")
        return written

    def side_cells(self, side: Side) -> pd.DataFrame:
        """The side's cells (observed and failed), in question and repetition order."""
        scored = self.evidence[side.run_id].scored
        if scored is None or scored.empty:
            return pd.DataFrame(columns=list(_CELL_FIELDS))
        cells = scored[scored["condition"].astype(str) == side.condition].reindex(columns=list(_CELL_FIELDS))
        return cells.sort_values("repetition", kind="stable")

    def observed(self, sides: Sequence[Side]) -> list[int]:
        """How many observed cells (failed requests left out) each side has: what the numbers are computed over."""
        return [int(self.side_cells(s)["error"].isna().sum()) for s in sides]

    def questions(self, sides: Sequence[Side]) -> list[dict[str, Any]]:
        """Per question (in the first side's order): its text and key, and per side its prompt and cells."""
        frames = [self.side_cells(s) for s in sides]
        order = list(dict.fromkeys(str(q) for f in frames for q in f["question_id"]))
        found = []
        for question_id in order:
            frozen = next((self.evidence[s.run_id].questions.get(question_id) for s in sides
                           if self.evidence[s.run_id].questions.get(question_id)), None)
            per_side = []
            for side, frame in zip(sides, frames, strict=True):
                rows = [_cell(r) for r in frame[frame["question_id"].astype(str) == question_id].to_dict("records")]
                prompts = self.prompts.get(side.run_id, {})
                shas = list(dict.fromkeys(str(r["prompt_sha256"]) for r in rows if r["prompt_sha256"]))
                per_side.append({"side": side, "rows": rows, "prompts": [prompts.get(s) for s in shas]})
            found.append({"question_id": question_id, "question": frozen, "sides": per_side})
        return found


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _cell(record: Mapping[Any, Any]) -> dict[str, Any]:
    """One cell as a trace page shows it; ``reading`` says what the answer was read as."""
    row = {str(k): (v if _present(v) else None) for k, v in record.items()}
    failed = row.get("error") is not None
    answer = row.get("answer")
    if failed:
        reading = "failed request: not observed"
    else:
        correct = row.get("correct")
        verdict = "" if row.get("correct_answer") is None else (" (the key)" if correct else
                                                                   f" (key {row['correct_answer']})")
        reading = f"{answer if answer is not None else 'UNKNOWN'}{verdict}"
        if row.get("likelihood_answer") is not None:
            reading += f"; likeliest option {row['likelihood_answer']}"
    return {**row, "failed": failed, "reading": reading, "prompt_sha256": row.get("prompt_sha256") or ""}


def read_prompts(evidence: Sequence[RunEvidence], uri: str | None) -> dict[str, dict[str, str]]:
    """Per run, prompt sha256 -> prompt text, from its ``responses/responses.jsonl`` (scored records drop the text).

    A run whose responses cannot be read gets none: its trace pages say the prompt was not recorded.
    """
    import tempfile

    from prism.compare.select import CompareError, download, load_prompts
    from prism.names import RESPONSES_ARTIFACT

    found: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="prism-publish-prompts-") as tmp:
        for item in evidence:
            try:
                found[item.run.run_id] = load_prompts(download(item.run.run_id, RESPONSES_ARTIFACT, uri,
                                                               Path(tmp) / item.run.run_id))
            except (CompareError, ValueError) as exc:
                log.warning("site, run %s: the prompts could not be read (%s); its trace shows none", item.run.run_id,
                            exc)
    return found
