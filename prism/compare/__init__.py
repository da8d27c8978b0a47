"""Compare finished PRISM runs read from MLflow: condition sensitivity and cross-model divergence.

``python -m prism.compare`` (``prism/conf/compare.yaml``) selects runs, refuses to mix runs of different
configurations, computes the tables (:mod:`prism.compare.tables`, statistics in :mod:`prism.stats.basics`),
draws the plots and records everything as an MLflow run tagged ``prism.kind=comparison``.

Modules: ``select`` (which runs, whether comparable, reading their artifacts), ``tables``, ``noise``
(shifts beyond the model's own noise and the clustered model of consistency), ``plots``,
``core`` (:func:`compare`, the whole flow), ``terminal`` (printing), ``callback`` (a Hydra sweep
callback). The names below are imported on first use, so ``import prism.compare`` loads neither MLflow
nor pandas nor scipy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prism.compare.core import ComparisonResult, compare
    from prism.compare.select import CompareError

__all__ = ["CompareError", "ComparisonResult", "compare"]


def __getattr__(name: str) -> Any:
    """Import the public names lazily (PEP 562)."""
    if name in ("ComparisonResult", "compare"):
        from prism.compare import core

        return getattr(core, name)
    if name == "CompareError":
        from prism.compare import select

        return select.CompareError
    raise AttributeError(f"module 'prism.compare' has no attribute {name!r}")
