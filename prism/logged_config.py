"""A run's logged config read back as a :class:`~prism.config.PrismConfig` (``prism.reproduce``).

A run logs its resolved config as ``config/resolved.yaml``. Reading it back is not composition: the run
may be older than today's schemas (before each backend had its own model schema, every run logged all the
model keys of one flat schema, most null), and the reader's own ``key=value`` changes apply on top. The
schemas themselves are in :mod:`prism.config`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from prism.backends.registry import backend_entries
from prism.config import PrismConfig, to_schema
from prism.errors import ConfigError

# Keys of the single model schema every backend shared before each got its own (runs logged then carry
# all of them, most null). A logged run's model keys that its backend's schema lacks are dropped only when
# they are among these: that backend never read them.
FLAT_MODEL_KEYS = frozenset({
    "path", "package", "n_ctx", "n_threads", "chat_format", "host", "base_url", "api_key_env", "concurrency",
    "request_timeout_s", "retry_budget_s", "retry_base_delay_s", "retry_max_delay_s", "num_ctx", "extra_body",
    "send_top_k",
})


def prism_config_from_logged(logged: Mapping[str, Any], overrides: Sequence[str] = ()) -> PrismConfig:
    """A run's logged ``config/resolved.yaml`` as a :class:`PrismConfig`, with ``key=value`` overrides applied.

    Reads configs logged before datasets had field mappings (:func:`with_builtin_dataset`) and configs
    logged with the flat model schema: its keys that the run's backend never read are
    dropped; every key is then checked against the backend's schema like a composed config.

    Raises:
        ConfigError: If the logged config names an unknown backend, has a key or value its schema does
            not accept, or an override does not apply.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    data = with_builtin_dataset({str(k): v for k, v in logged.items() if k != "defaults"})
    model = dict(data.get("model") or {})
    backend = str(model.get("backend", ""))
    entries = backend_entries()
    if backend not in entries:
        raise ConfigError(f"the logged config names model.backend={backend!r}, which this PRISM does not have; "
                          f"known backends: {', '.join(sorted(entries))}.")
    schema = entries[backend].schema
    known = {f.name for f in dataclasses.fields(schema)}
    data["model"] = {k: v for k, v in model.items() if k in known or k not in FLAT_MODEL_KEYS}
    try:
        base = OmegaConf.structured(PrismConfig)
        base.model = OmegaConf.structured(schema)
        merged = OmegaConf.merge(base, data, OmegaConf.from_dotlist(list(overrides)))
    except OmegaConfBaseException as exc:
        raise ConfigError(f"the logged config cannot be read with this PRISM's schema: {exc}. Fix the named key "
                          "with an override ('overrides=[\"KEY=VALUE\"]').") from exc
    return to_schema(merged, PrismConfig)


def with_builtin_dataset(logged: dict[str, Any]) -> dict[str, Any]:
    """A config logged before datasets had field mappings names a built-in dataset only: its YAML says the rest.

    Without this, the schema's generic defaults would stand in for the dataset's own mapping.
    """
    from prism.questions.spec import builtin_names, builtin_yaml

    dataset = logged.get("dataset") or {}
    if "fields" in dataset or str(dataset.get("name")) not in builtin_names():
        return logged
    return {**logged, "dataset": {**builtin_yaml(str(dataset["name"])), **dataset}}
