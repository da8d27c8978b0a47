"""The site's page of one comparison run: its read-outs and its ranking over the prompts, every number linked.

A module of its own because the page needs both :mod:`prism.publish.comparisons` (the comparison runs as
read) and :mod:`prism.publish.ranks` (the ranking's rows), and ``ranks`` reads what ``comparisons`` read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prism.compare.evidence import RunEvidence
from prism.publish.comparisons import ComparisonEvidence, comparison_heading
from prism.publish.trace import Trace


def comparison_page(item: ComparisonEvidence, evidence: Sequence[RunEvidence], trace: Trace,
                    common: Mapping[str, Any]) -> str:
    """The comparison's page: its read-outs, every number linked to the cells behind it."""
    from prism.compare.readout_sections import READOUT_SECTIONS, readout_context
    from prism.publish.board import slug
    from prism.publish.ranks import rank_rows, rank_summary
    from prism.render import render

    runs = {e.run.run_id: e.run.model for e in evidence}
    heading = comparison_heading(item, evidence)
    ranks = rank_rows(item)  # comparison/rank_robustness.csv, when the comparison logged it
    sections = (*READOUT_SECTIONS, ("ranking", "Ranking over the prompts")) if item.tables.rank_robustness is not None \
        else READOUT_SECTIONS
    return render("site/comparison.html.j2", **common, title=f"{heading} · {common['site'].title}",
                  stylesheet="../style.css", heading=heading, item=item, r=readout_context(item.tables), slug=slug,
                  trace=trace, sections=sections, compared=[(r, runs.get(r, "")) for r in item.compared],
                  run_page=lambda run_id: f"../runs/{slug(run_id)}.html", ranks=ranks,
                  rank_summary=rank_summary(ranks) if item.tables.rank_robustness is not None else "")
