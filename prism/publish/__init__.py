"""Published results: a static site from the FINISHED runs of an MLflow experiment.

``python -m prism.publish`` (``prism/conf/publish.yaml``) selects runs as ``prism.compare`` does (by
default the latest run per model x dataset x condition set), reads each through MLflow and writes plain
files to ``publish.out``: an index with the leaderboard and the per-family consistency heatmaps, a page
per model and a page per run. Pages are the Jinja2 templates the comparison report uses
(``prism/templates/``), escaped by default, and make no request to any other host.

Modules: ``config`` (the schema), ``runs`` (selection and what is read of each run), ``board`` (the
leaderboard, its intervals, comparability markers and sort orders, the heatmaps), ``site`` (the pages).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prism.publish.site import Site, publish

__all__ = ["Site", "publish"]


def __getattr__(name: str) -> Any:
    """Import the public names lazily (PEP 562), so ``import prism.publish`` loads neither MLflow nor pandas."""
    if name in ("Site", "publish"):
        from prism.publish import site

        return getattr(site, name)
    raise AttributeError(f"module 'prism.publish' has no attribute {name!r}")
