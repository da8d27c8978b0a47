"""The generation parameters of a run's repetitions, and the check of ``generation.*`` before anything is asked.

Shared by a run (:mod:`prism.run.pipeline`, which re-exports them) and a dry run (:mod:`prism.run.dry_run`).
"""

from __future__ import annotations

import hashlib
from typing import Any

from prism.config import GenerationConfig
from prism.errors import ConfigError
from prism.types import GenerationParams


def repetition_seed(seed: int, repetition: int) -> int:
    """Seed of one repetition: the run seed itself for repetition 0, else derived from both by hashing."""
    if repetition == 0:
        return seed
    return int(hashlib.sha256(f"{seed}:{repetition}".encode()).hexdigest()[:8], 16)


def check_generation(generation: GenerationConfig) -> None:
    """Refuse generation values that Hydra's types allow but no backend can honour as meant.

    A backend does not refuse them either: llama.cpp reads ``max_tokens`` <= 0 as "until the context is
    full" and a negative seed as "pick a random one", which would quietly change what is measured.

    Raises:
        ConfigError: Naming the key, the value and the accepted range.
    """
    rules: list[tuple[str, Any, str]] = [
        ("repetitions", lambda v: v >= 1, "a whole number >= 1"),
        ("max_tokens", lambda v: v >= 1, "a whole number >= 1"),
        ("temperature", lambda v: 0 <= v < float("inf"), "a number >= 0 (0 is greedy decoding)"),
        ("seed", lambda v: v >= 0, "a whole number >= 0 (llama.cpp takes a negative seed as 'random')"),
        ("top_p", lambda v: v is None or 0 < v <= 1, "null or a number in (0, 1]"),
        ("top_k", lambda v: v is None or v >= 1, "null or a whole number >= 1"),
        ("cloze_target", lambda v: v in ("label", "text"), "label (the continuation ' B') or text (' <option text>')"),
    ]
    for key, valid, accepted in rules:
        value = getattr(generation, key)
        if not valid(value):
            raise ConfigError(f"generation.{key}={value!r} cannot be used: it must be {accepted}. "
                              f"Set it with generation.{key}=VALUE (or pick another generation=... group).")


def repetition_params(generation: GenerationConfig) -> list[GenerationParams]:
    """The generation parameters of each repetition, in repetition order."""
    return [
        GenerationParams(
            temperature=float(generation.temperature),
            max_tokens=generation.max_tokens,
            seed=repetition_seed(generation.seed, repetition),
            top_p=generation.top_p,
            top_k=generation.top_k,
            label_probs=generation.label_probs,
            cloze=generation.cloze,
            cloze_target=generation.cloze_target,
        )
        for repetition in range(generation.repetitions)
    ]
