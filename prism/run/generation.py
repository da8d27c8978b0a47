"""The generation parameters of a run's repetitions, and the check of ``generation.*`` before anything is asked.

Shared by a run (:mod:`prism.run.pipeline`, which re-exports them) and a dry run (:mod:`prism.run.dry_run`).
"""

from __future__ import annotations

import hashlib

from prism.config import GenerationConfig
from prism.types import GenerationParams


def repetition_seed(seed: int, repetition: int) -> int:
    """Seed of one repetition: the run seed itself for repetition 0, else derived from both by hashing."""
    if repetition == 0:
        return seed
    return int(hashlib.sha256(f"{seed}:{repetition}".encode()).hexdigest()[:8], 16)


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
