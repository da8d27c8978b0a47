"""The exact prompts and generation parameters a PRISM run sends, for scripts that bypass PRISM.

The side-by-side benchmarks compare ``python -m prism`` with a minimal llama.cpp loop over the same
requests. Both must see byte-identical prompts in the same order with the same parameters, so the list is
taken from PRISM's own composition and rendering (``pipeline.build_requests``), not rebuilt by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.common import REPO

if TYPE_CHECKING:
    from prism.config import PrismConfig


def compose(overrides: list[str]) -> PrismConfig:
    """Compose ``conf/config.yaml`` as ``python -m prism`` would, as its schema."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from prism.config import PrismConfig, register_configs, to_schema

    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "prism" / "conf"), version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=overrides)
    return to_schema(cfg, PrismConfig)


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
    from prism.questions import freeze_dataset

    cfg = compose(overrides)
    frozen = freeze_dataset(cfg.dataset)
    requests = build_requests(frozen, condition_set_from_config(cfg.conditions), cfg.generation)
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
