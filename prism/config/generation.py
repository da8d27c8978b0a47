"""The ``generation`` group: canonical generation parameters, repetitions and the extra readings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args

from omegaconf import II, MISSING

from prism.config.choices import ClozeTarget, ClozeTargetField
from prism.errors import ConfigError


@dataclass
class GenerationConfig:
    """Canonical generation parameters plus how many repetitions of each cell to ask for."""

    name: str = MISSING
    temperature: float = 0.0
    max_tokens: int = 64
    seed: int = II("seed")
    top_p: float | None = None
    top_k: int | None = None
    repetitions: int = 1
    # Also record the first reply token's probabilities over the option labels (prism.label_probs); joins
    # the canonical parameters (store keys, records) only when true.
    label_probs: bool = False
    # Also record each option's continuation log-likelihood after the prompt, as lm-evaluation-harness
    # scores multiple choice (prism.cloze); joins the canonical parameters only when true.
    cloze: bool = False
    # The continuation where the condition does not fix it: label (" B", lm-eval's MMLU) or text
    # (" <option text>", its ARC tasks).
    cloze_target: ClozeTargetField = "label"

    def check(self) -> None:
        """Refuse generation values that Hydra's types allow but no backend can honour as meant.

        A backend does not refuse them either: llama.cpp reads ``max_tokens`` <= 0 as "until the context is
        full" and a negative seed as "pick a random one", which would quietly change what is measured.

        Raises:
            ConfigError: Naming the key, the value and the accepted range.
        """
        rules: list[tuple[str, Any, bool, str]] = [
            ("repetitions", self.repetitions, self.repetitions >= 1, "a whole number >= 1"),
            ("max_tokens", self.max_tokens, self.max_tokens >= 1, "a whole number >= 1"),
            ("temperature", self.temperature, 0 <= self.temperature < float("inf"),
             "a number >= 0 (0 is greedy decoding)"),
            ("seed", self.seed, self.seed >= 0, "a whole number >= 0 (llama.cpp takes a negative seed as 'random')"),
            ("top_p", self.top_p, self.top_p is None or 0 < self.top_p <= 1, "null or a number in (0, 1]"),
            ("top_k", self.top_k, self.top_k is None or self.top_k >= 1, "null or a whole number >= 1"),
            ("cloze_target", self.cloze_target, self.cloze_target in get_args(ClozeTarget),
             "label (the continuation ' B') or text (' <option text>')"),
        ]
        for key, value, valid, accepted in rules:
            if not valid:
                raise ConfigError(f"generation.{key}={value!r} cannot be used: it must be {accepted}. "
                                  f"Set it with generation.{key}=VALUE (or pick another generation=... group).")
