"""The exact prompts, generation parameters and condition names a PRISM run uses, for scripts that bypass PRISM.

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
    from omegaconf import DictConfig

    from prism.backends.base import Request
    from prism.config import PrismConfig


def _composed(overrides: list[str]) -> DictConfig:
    """``conf/config.yaml`` composed as ``python -m prism`` would, before any schema conversion."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from prism.conf import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "prism" / "conf"), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides)


def compose(overrides: list[str]) -> PrismConfig:
    """Compose ``conf/config.yaml`` as ``python -m prism`` would, as its schema."""
    from prism.config import PrismConfig, to_schema

    return to_schema(_composed(overrides), PrismConfig)


def condition_names(conditions: str) -> list[str]:
    """The condition names of the condition set ``conditions`` (e.g. ``robustness``), as the main app composes it.

    Scripts that write replay files for a set need its names in PRISM's own order, so they are taken from
    the composed set, never listed by hand.
    """
    from omegaconf import OmegaConf

    from prism.conditions import condition_set_from_config

    resolved = OmegaConf.to_container(_composed([f"conditions={conditions}"]), resolve=True)
    assert isinstance(resolved, dict)
    return list(condition_set_from_config(resolved["conditions"]).names)


def rendered_requests(overrides: list[str]) -> tuple[list[Request], list[str]]:
    """The run's requests in PRISM's order (condition-major) and its question ids in frozen order.

    Args:
        overrides: The Hydra overrides of the PRISM run being mirrored.
    """
    from prism.conditions import condition_set_from_config
    from prism.questions import freeze_dataset
    from prism.run.pipeline import build_requests

    cfg = compose(overrides)
    frozen = freeze_dataset(cfg.dataset)
    requests = build_requests(frozen, condition_set_from_config(cfg.conditions), cfg.generation)
    return requests, [q.question_id for q in frozen.questions]


def in_order(requests: list[Request], question_ids: list[str], order: str) -> list[Request]:
    """``requests`` (condition-major) in ``order``: ``condition`` as given, ``question`` grouped by question.

    Question-major keeps the frozen order of the questions and, within a question, the conditions' order.

    Raises:
        ValueError: If ``order`` is neither.
    """
    if order == "condition":
        return list(requests)
    if order != "question":
        raise ValueError(f"order must be 'condition' or 'question', not {order!r}")
    position = {question_id: i for i, question_id in enumerate(question_ids)}
    return sorted(requests, key=lambda r: position[r.prompt.question_id])  # stable: conditions keep their order


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

    requests, question_ids = rendered_requests(overrides)
    requests = in_order(requests, question_ids, order)
    with path.open("w", encoding="utf-8") as handle:
        for request in requests:
            line = {"question_id": request.prompt.question_id, "condition": request.prompt.condition,
                    "kwargs": build_request(request)}
            handle.write(json.dumps(line) + "\n")
    return len(requests)
