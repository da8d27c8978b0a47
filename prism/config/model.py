"""The ``model`` group: which model answers, through which backend, at which prices."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from omegaconf import MISSING

from prism.errors import ConfigError


@dataclass
class PricingConfig:
    """Prices of one model, in US dollars per million tokens, as the provider charges them (``model.pricing``).

    PRISM ships no price list: prices change, and a stale one would pass for current. Set them from the
    provider's price page for the model being run.
    """

    # Both or neither: with neither, no cost_usd is logged.
    input_per_mtok: float | None = None
    output_per_mtok: float | None = None
    # The discount of a batch API (0.5: half price), for the batch APIs of a later release; not applied yet.
    batch_discount: float = 0.5

    @property
    def priced(self) -> bool:
        """Whether both prices are set (a run then logs cost_usd)."""
        return self.input_per_mtok is not None and self.output_per_mtok is not None

    def check(self) -> None:
        """Refuse prices that cannot be meant, before anything is asked.

        Raises:
            ConfigError: If only one of the two prices is set, or a price or the discount is out of range.
        """
        given = {"input_per_mtok": self.input_per_mtok, "output_per_mtok": self.output_per_mtok}
        unset = [k for k, v in given.items() if v is None]
        if len(unset) == 1:
            other = next(k for k in given if k not in unset)
            raise ConfigError(f"model.pricing.{other} is set but model.pricing.{unset[0]} is not: set both (US "
                              "dollars per million tokens, from the provider's price page), or neither for no "
                              "cost_usd.")
        for key, value in given.items():
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"model.pricing.{key}={value!r} must be a price >= 0 in US dollars per million "
                                  "tokens.")
        if not (math.isfinite(self.batch_discount) and 0 < self.batch_discount <= 1):
            raise ConfigError(f"model.pricing.batch_discount={self.batch_discount!r} must be in (0, 1]: the "
                              "fraction of the price a batch API charges (0.5: half price).")


def check_model_name(name: str) -> None:
    """Refuse a model name with a path segment ``.`` or ``..``, or a control character (see ``ModelConfig.check``).

    Raises:
        ConfigError: Naming the value and what is allowed.
    """
    if any(segment.strip() in (".", "..") for segment in name.split("/")) or any(ord(c) < 32 for c in name):
        raise ConfigError(f"model.name={name!r} cannot name a model: it may not be '.' or '..', contain such "
                          "a path segment, or hold control characters. Set model.name=NAME to the model's tag "
                          "or served id (e.g. llama3:8b or org/model).")


@dataclass
class ModelConfig:
    """Which model answers and through which backend: the base of one schema per backend.

    Each model YAML names its backend's schema first in its defaults (``- /schema/model/llamacpp@_here_``),
    so a key that backend does not read fails at composition instead of being carried along unused.
    """

    name: str = MISSING
    backend: str = MISSING
    # false: send the rendered prompt as plain text with no chat template (a base model; llama.cpp
    # create_completion, OpenAI-compatible /v1/completions, Ollama /api/generate raw). Joins the completion
    # key only when false.
    chat: bool = True
    # What the provider charges, for the run's cost_usd metric (user data: PRISM ships no price list).
    pricing: PricingConfig = field(default_factory=PricingConfig)

    def check(self) -> None:
        """Refuse a model name no run can carry, and prices that cannot be meant.

        The name becomes metric names (``sensitivity/<model>/...``), run names and tags; a slash is kept,
        since served ids are often ``org/model`` (vLLM, ``hf.co/...`` Ollama tags), and any file named after
        a model goes through :func:`prism.types.safe_filename`. An empty name is left to the backend, which
        says what it needs. Each backend's schema checks its own settings when the backend is created.

        Raises:
            ConfigError: Naming the value and what is allowed.
        """
        check_model_name(self.name or "")
        self.pricing.check()
