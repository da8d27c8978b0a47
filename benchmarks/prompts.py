"""The exact prompts and generation parameters a PRISM run sends, for scripts that bypass PRISM.

The side-by-side benchmarks compare ``python -m prism`` with a minimal llama.cpp loop over the same
requests. Both must see byte-identical prompts in the same order with the same parameters, so the list is
taken from PRISM's own composition and rendering (``pipeline.build_requests``), not rebuilt by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.common import REPO


def compose(overrides: list[str]) -> dict[str, Any]:
    """Compose ``conf/config.yaml`` as ``python -m prism`` would, resolved to a plain dict."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    from prism.config import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "prism" / "conf"), version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=overrides)
    container = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    assert isinstance(container, dict)
    return container  # type: ignore[return-value]


def write_requests(overrides: list[str], path: Path, order: str = "condition") -> int:
    """Write the run's requests as JSONL (one ``{question_id, condition, messages, kwargs}`` per line).

    Args:
        overrides: The Hydra overrides of the PRISM run being mirrored.
        path: Where to write.
        order: ``condition`` (PRISM's order: every question under P0, then P1, ...) or ``question``
            (every condition of question 1, then question 2, ...).

    Returns:
        The number of requests written.
    """
    from prism.backends.llamacpp import build_request
    from prism.conditions import condition_set_from_config
    from prism.pipeline import build_requests
    from prism.questions import freeze_question_set

    cfg = compose(overrides)
    dataset = cfg["dataset"]
    frozen = freeze_question_set(dataset=dataset["name"], split=dataset["split"], n=int(dataset["n"]),
                                 seed=int(dataset["sample_seed"]), data_dir=dataset.get("data_dir"),
                                 cache_dir=dataset.get("cache_dir") or ".prism/frozen")
    requests = build_requests(frozen, condition_set_from_config(cfg["conditions"]), cfg["generation"])
    if order == "question":
        position = {q.question_id: i for i, q in enumerate(frozen.questions)}
        requests.sort(key=lambda r: position[r.prompt.question_id])  # stable: conditions keep their order
    elif order != "condition":
        raise ValueError(f"order must be 'condition' or 'question', not {order!r}")
    with path.open("w", encoding="utf-8") as handle:
        for request in requests:
            line = {"question_id": request.prompt.question_id, "condition": request.prompt.condition,
                    "kwargs": build_request(request)}
            handle.write(json.dumps(line) + "\n")
    return len(requests)
