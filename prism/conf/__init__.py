"""PRISM's Hydra config tree, shipped inside the package so an installed PRISM finds it (``pkg://prism.conf``).

:func:`register_configs` puts every schema the tree's defaults lists name into Hydra's ConfigStore: the
top-level schemas of :mod:`prism.config`, and one ``schema/model/<backend>`` per registered backend
(:mod:`prism.backends.registry`), so a backend's schema is declared once, beside the backend.
"""

from __future__ import annotations


def register_configs() -> None:
    """Register the schemas so the config tree's defaults lists can name them.

    ``config.yaml``, ``compare.yaml``, ``reproduce.yaml``, ``plan.yaml``, ``import.yaml`` and ``export.yaml`` name
    ``prism_schema``, ``compare_schema``, ``reproduce_schema``, ``plan_schema``, ``import_schema`` and
    ``export_schema``; each model YAML names its backend's schema first in its defaults, merged into
    the model group itself: ``- /schema/model/llamacpp@_here_`` (or ``ollama``, ``openai``, ``replay``).
    """
    # Imported here: Hydra imports this package to find the YAML files, and that must stay cheap.
    from hydra.core.config_store import ConfigStore

    from prism.backends.registry import backend_entries
    from prism.config import CompareConfig, ExportConfig, ImportConfig, PlanConfig, PrismConfig, ReproduceConfig

    store = ConfigStore.instance()
    store.store(name="prism_schema", node=PrismConfig)
    store.store(name="reproduce_schema", node=ReproduceConfig)
    store.store(name="compare_schema", node=CompareConfig)
    store.store(name="plan_schema", node=PlanConfig)
    store.store(name="import_schema", node=ImportConfig)
    store.store(name="export_schema", node=ExportConfig)
    for name, entry in backend_entries().items():
        # Outside the model group, so `--help` lists only model files as its options.
        store.store(group="schema/model", name=name, node=entry.schema)
