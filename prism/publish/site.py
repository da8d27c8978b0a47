"""``publish(cfg)``: from MLflow runs to a static site of plain files.

select (MLflow) -> read each run -> leaderboard, heatmaps -> pages (``prism/templates/site/``) in
``publish.out``: ``index.html`` (and one page per pre-rendered sort order), ``models/<model>.html``,
``runs/<run id>.html`` and ``style.css``. Every page carries a Content-Security-Policy that forbids any
request to another host; there is no script, and links are relative, so the directory opens from disk
or from any static host. No Hydra import here: the entry point calls :func:`publish` on a
:class:`~prism.publish.config.PublishConfig`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prism.compare.evidence import RunEvidence, has_no_key
from prism.compare.readings import THRESHOLDS, read_patterns
from prism.compare.select import CompareError
from prism.names import METRIC_N_CLOZE, METRIC_N_LABEL_PROBS, METRIC_READING_AGREEMENT
from prism.publish import board
from prism.publish.comparison_page import comparison_page
from prism.publish.comparisons import ComparisonEvidence, comparison_heading
from prism.publish.config import PublishConfig
from prism.publish.runs import cell_of
from prism.publish.trace import Trace

log = logging.getLogger(__name__)

# Nothing from another host, no script, no plugin, no form; the stylesheet and any figure from beside the
# page. (``'self'`` covers files beside the page when it is opened from disk, too.)
CSP = ("default-src 'none'; style-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'")
STYLESHEET = "style.css"
# The list of files a build wrote: a rebuild replaces them and removes pages of runs no longer shown,
# and never touches a directory without it.
MANIFEST = ".prism-site"


@dataclass
class Site:
    """A built site.

    Attributes:
        out: Its directory.
        pages: Every page written, relative to ``out``.
        runs: The runs shown.
        tracking_uri: The store they were read from.
    """

    out: Path
    pages: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    tracking_uri: str = ""

    def describe(self) -> str:
        """What the terminal shows after a build."""
        return (f"Published {len(self.runs)} run(s) from {self.tracking_uri} as {len(self.pages)} page(s) in "
                f"{self.out}\nOpen it: {self.out / 'index.html'}")


def publish(cfg: PublishConfig) -> Site:
    """Build the site described by a ``publish.yaml`` config.

    Raises:
        CompareError: If the selection is contradictory, no run qualifies, a named run cannot be used, or
            bootstrap is below 1.
        TrackingError: If the tracking store cannot be used.
    """
    import mlflow

    from prism.compare.core import _experiment_id, selection_from_config
    from prism.config import CompareConfig
    from prism.publish.comparisons import comparison_runs, read_comparisons
    from prism.publish.runs import read_runs, select_runs
    from prism.publish.trace import read_prompts
    from prism.run.tracking import resolve_tracking_uri

    if cfg.bootstrap < 1:
        raise CompareError(f"bootstrap must be at least 1, got {cfg.bootstrap}")
    # The selection keys are compare's, read by compare's own rules.
    selection = selection_from_config(CompareConfig(tracking=cfg.tracking, runs=list(cfg.runs), filters=cfg.filters))
    experiment = cfg.tracking.experiment
    uri = resolve_tracking_uri(cfg.tracking.uri, cfg.tracking.require_server) or mlflow.get_tracking_uri()
    client = mlflow.tracking.MlflowClient(uri)
    experiment_id = _experiment_id(client, experiment, uri)
    runs = select_runs(client, experiment_id, experiment, uri, selection)
    evidence = read_runs(client, [experiment_id], runs, uri)
    comparisons = read_comparisons(comparison_runs(client, experiment_id, [r.run_id for r in runs]), uri) \
        if cfg.publish.comparisons else []
    title = cfg.publish.title or f"PRISM results: {experiment}"
    return write_site(Path(cfg.publish.out), evidence,
                      Context(title, uri, experiment, experiment_id, cfg.bootstrap, cfg.seed), comparisons,
                      read_prompts(evidence, uri))


@dataclass(frozen=True)
class Context:
    """What every page says about where its numbers come from.

    Attributes:
        title: The site's title.
        tracking_uri: The tracking store the runs were read from.
        experiment: The experiment's name.
        experiment_id: Its id.
        n_boot: Bootstrap resamples of every interval.
        seed: The bootstrap seed.
    """

    title: str
    tracking_uri: str
    experiment: str
    experiment_id: str
    n_boot: int
    seed: int

    @property
    def server(self) -> bool:
        """Whether the store is a tracking server (its run pages can be linked)."""
        return self.tracking_uri.startswith(("http://", "https://"))

    def run_url(self, run_id: str) -> str | None:
        """The run's page on the tracking server, when there is one."""
        if not self.server:
            return None
        return f"{self.tracking_uri.rstrip('/')}/#/experiments/{self.experiment_id}/runs/{run_id}"


def model_page(model: str) -> str:
    """The model's page, relative to the site's root."""
    return f"models/{board.slug(model)}.html"


def run_page(run_id: str) -> str:
    """The run's page, relative to the site's root."""
    return f"runs/{board.slug(run_id)}.html"


def write_site(out: Path, evidence: Sequence[RunEvidence], context: Context,
               comparisons: Sequence[ComparisonEvidence] = (),
               prompts: Mapping[str, Mapping[str, str]] | None = None) -> Site:
    """Write every page of the site into ``out`` and return what was written.

    ``comparisons`` get a page each (their read-outs); ``prompts`` (run id -> prompt sha256 -> text) fill
    the trace pages every number links to (:mod:`prism.publish.trace`).
    """
    from importlib.resources import files

    from prism.compare import report_sections as sections
    from prism.render import render

    previous = _claim(out)
    for folder in ("models", "runs", "comparisons"):
        (out / folder).mkdir(exist_ok=True)
    templates = files("prism") / "templates"
    (out / STYLESHEET).write_text((templates / "style.css").read_text(encoding="utf-8")
                                  + (templates / "site" / "site.css").read_text(encoding="utf-8"), encoding="utf-8")
    built = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    common = {"csp": CSP, "site": context, "built": built, "NOT_CLAIMED": sections.NOT_CLAIMED,
              "rules": sections.pattern_rules(THRESHOLDS)}
    site = Site(out, runs=[item.run.run_id for item in evidence], tracking_uri=context.tracking_uri)
    trace = Trace({item.run.run_id: item for item in evidence}, prompts or {})
    groups = board.groups(evidence, context.n_boot, context.seed)
    from prism.publish.ranks import rank_marks

    ranks = rank_marks(comparisons)  # run id -> its rank over the prompts, from the comparisons shown
    panels = board.panels(evidence)
    metrics = board.LEADERBOARD + tuple(m for m in board.LIKELIHOOD if any(m in g.likelihood for g in groups))
    for order in board.orders(metrics):
        page = order.page
        sorted_groups = [(g, board.sort_rows(g.rows, order)) for g in groups]
        text = render("site/index.html.j2", **common, **_links(""), title=context.title, stylesheet=STYLESHEET,
                      groups=sorted_groups, panels=panels, order=order, metrics=board.LEADERBOARD,
                      first_order=lambda key: board.first_order(key, metrics), shade=board.shade,
                      index_page=page == "index.html", n_runs=len(evidence),
                      models=sorted({item.run.model for item in evidence}), cells_page=trace.at("").run,
                      comparisons=[(c.page, comparison_heading(c, evidence)) for c in comparisons], ranks=ranks)
        _write(out, page, text, site)

    rows = {row.item.run.run_id: row for g in groups for row in g.rows}
    by_model: dict[str, list[RunEvidence]] = {}
    for item in evidence:
        by_model.setdefault(item.run.model, []).append(item)
    for model, items in by_model.items():
        panel = next((p for p in panels if p.model == model), None)
        text = render("site/model.html.j2", **common, **_links("../"), title=f"{model} · {context.title}",
                      stylesheet="../" + STYLESHEET, model=model, items=items,
                      rows=[rows[i.run.run_id] for i in items],
                      heat=panel, shade=board.shade, metrics=board.LEADERBOARD, cells_page=trace.at("../").run,
                      setup=sections.setup_rows(items, absent="not recorded"))
        _write(out, model_page(model), text, site)

    for item in evidence:
        row = rows[item.run.run_id]
        numbers = board.reading_numbers(row)
        card = sections.reading_cards([numbers], [read_patterns(numbers)])[0]
        title = f"{item.run.model} on {cell_of(item.run).dataset} · {context.title}"
        text = render("site/run.html.j2", **common, title=title,
                      **_links("../"), stylesheet="../" + STYLESHEET, item=item, row=row,
                      metrics=(*board.LEADERBOARD, *(m for m in board.LIKELIHOOD if m.key in row.values)),
                      conditions=board.per_condition(item), card=card,
                      setup=sections.setup_rows([item], absent="not recorded"),
                      template_groups=sections.template_groups([item]), problems=sections.problems([item]),
                      disagreements=board.disagreements(item), options=sections.option_lines,
                      run_url=context.run_url(item.run.run_id), sampling=sections.sampling_used([item]),
                      trace=trace.at("../"),
                      two_readings=two_readings_section(item))
        _write(out, run_page(item.run.run_id), text, site)
    for comparison in comparisons:
        _write(out, comparison.page, comparison_page(comparison, evidence, trace.at("../"), common), site)
    site.pages += trace.write(out, render, common)
    for stale in sorted(previous - set(site.pages)):  # pages of runs no longer selected must not linger
        (out / stale).unlink(missing_ok=True)
    (out / MANIFEST).write_text("".join(f"{page}\n" for page in [STYLESHEET, *site.pages]), encoding="utf-8")
    return site


def two_readings_section(item: RunEvidence) -> dict[str, Any] | None:
    """A run page's readings section (:mod:`prism.compare.two_readings`), or None for a run without one.

    The rows are the run's logged per-condition metrics; the parted cells come from its scored records.
    """
    from prism.compare import two_readings
    from prism.compare.label_prob_tables import parted_cells

    if not two_readings.has_two_readings(item.metrics):
        return None
    run = item.run
    rows = two_readings.site_rows(run.model, run.run_id, run.conditions, item.metrics, has_no_key(item))
    scored = item.scored
    kept = None if scored is None or scored.empty else scored[scored["error"].isna()] if "error" in scored else scored
    observed = [] if kept is None else parted_cells(kept, run.model, {})
    cloze = [] if kept is None else two_readings.cloze_parted_rows(kept, run.model)
    return {"rows": rows, "cells": two_readings.parted(observed, item.questions), "total": len(observed),
            "measures": two_readings.shown_measures(rows), "keyed": two_readings.KEYED,
            "baseline": run.baseline or "the baseline",
            "whole_in": "the run's results/scored.jsonl", "readable": scored is not None and not scored.empty,
            "label_probs": METRIC_N_LABEL_PROBS in item.metrics or METRIC_READING_AGREEMENT in item.metrics,
            "cloze": METRIC_N_CLOZE in item.metrics, "cloze_cells": two_readings.cloze_parted(cloze, item.questions),
            "cloze_total": len(cloze), "cloze_whole_in": "the run's results/scored.jsonl"}


def _claim(out: Path) -> set[str]:
    """Make ``out`` the site's directory and return the pages an earlier build wrote there.

    Raises:
        CompareError: If ``out`` is a file, or a non-empty directory that no build of the site made (its
            files are never overwritten or removed).
    """
    if out.exists() and not out.is_dir():
        raise CompareError(f"publish.out={out} is a file; name a directory for the site (it is created).")
    manifest = out / MANIFEST
    if out.is_dir() and any(out.iterdir()) and not manifest.is_file():
        raise CompareError(f"publish.out={out} is a directory with files that prism.publish did not write (no "
                           f"{MANIFEST}); name a new or empty directory, so nothing in it is overwritten.")
    out.mkdir(parents=True, exist_ok=True)
    if not manifest.is_file():
        return set()
    return {line for line in manifest.read_text(encoding="utf-8").splitlines()
            if line.endswith(".html") and ".." not in line}


def _links(root: str) -> dict[str, Any]:
    """The page-link functions of a page ``root`` below the site's root (``""`` or ``"../"``)."""
    return {"run_page": lambda run_id: root + run_page(run_id), "model_page": lambda model: root + model_page(model)}


def _write(out: Path, page: str, text: str, site: Site) -> None:
    (out / page).write_text(text, encoding="utf-8")
    site.pages.append(page)
