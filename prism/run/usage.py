"""Tokens and cost of a run, summed over its raw records as they are scored.

A run's records are of two kinds: cells asked in this run (``cached`` false) and cells the completion store
served (``cached`` true, their tokens counted when another run asked them). The metrics keep them apart:

- ``tokens_prompt``, ``tokens_completion``: the backend's counts summed over the cells asked in this run (a
  failed request, or a backend that counts nothing, adds 0), and per condition ``tokens_prompt/<condition>``,
  ``tokens_completion/<condition>``;
- ``tokens_from_store_prompt``, ``tokens_from_store_completion``: the same sums over the cells the store served;
- ``tokens_provider_cached``: the prompt tokens the provider served from its own prompt cache
  (``provider_cached_tokens``), over the cells asked in this run; logged only when some reply reported them;
- ``cost_usd``: with ``model.pricing`` set, ``(tokens_prompt * input_per_mtok + tokens_completion *
  output_per_mtok) / 1e6``, what this run asked. Provider cache discounts are not applied, so for OpenAI,
  whose ``prompt_tokens`` include the cached ones, it is an upper bound; Anthropic's ``input_tokens`` leave
  cache reads out, so they are not priced at all. ``batch_discount`` is for the batch APIs of a later release.

The identity probe a remote backend sends before the first cell is not a cell and is in none of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from prism.config import PricingConfig
from prism.names import (
    METRIC_COST_USD,
    METRIC_TOKENS_COMPLETION,
    METRIC_TOKENS_FROM_STORE_COMPLETION,
    METRIC_TOKENS_FROM_STORE_PROMPT,
    METRIC_TOKENS_PROMPT,
    METRIC_TOKENS_PROVIDER_CACHED,
    USAGE_METRIC_PREFIXES,
    condition_metric,
)
from prism.records import RawRecord

#: Metric name prefixes of what a run cost rather than what it measured: they differ between a run and its
#: rerun from the store by design, so comparisons of results (a reproduction) leave them out.
USAGE_METRICS = USAGE_METRIC_PREFIXES


def is_usage_metric(name: str) -> bool:
    """Whether ``name`` is a token or cost metric (:data:`USAGE_METRICS`)."""
    return name.startswith(USAGE_METRICS)


def cost_usd(prompt_tokens: int, completion_tokens: int, pricing: PricingConfig) -> float:
    """What these tokens cost at ``pricing`` (both prices set), in US dollars."""
    assert pricing.input_per_mtok is not None and pricing.output_per_mtok is not None
    return (prompt_tokens * pricing.input_per_mtok + completion_tokens * pricing.output_per_mtok) / 1e6


@dataclass
class Usage:
    """Token sums of one run's records (module docstring), added one record at a time."""

    prompt: int = 0
    completion: int = 0
    store_prompt: int = 0
    store_completion: int = 0
    provider_cached: int | None = None
    per_condition: dict[str, list[int]] = field(default_factory=dict)

    def add(self, record: RawRecord) -> None:
        """Count one record."""
        prompt, completion = record.prompt_tokens or 0, record.completion_tokens or 0
        if record.cached:
            self.store_prompt += prompt
            self.store_completion += completion
            return
        self.prompt += prompt
        self.completion += completion
        sums = self.per_condition.setdefault(record.condition, [0, 0])
        sums[0] += prompt
        sums[1] += completion
        if record.provider_cached_tokens is not None:
            self.provider_cached = (self.provider_cached or 0) + record.provider_cached_tokens

    def through(self, records: Iterable[RawRecord]) -> Iterator[RawRecord]:
        """``records`` unchanged, each counted as it passes."""
        for record in records:
            self.add(record)
            yield record

    def metrics(self, conditions: Iterable[str], pricing: PricingConfig) -> dict[str, float]:
        """The run's token (and, with prices, cost) metrics; every condition gets its own, 0 when none was asked."""
        metrics: dict[str, float] = {
            METRIC_TOKENS_PROMPT: float(self.prompt), METRIC_TOKENS_COMPLETION: float(self.completion),
            METRIC_TOKENS_FROM_STORE_PROMPT: float(self.store_prompt),
            METRIC_TOKENS_FROM_STORE_COMPLETION: float(self.store_completion),
        }
        for name in conditions:
            prompt, completion = self.per_condition.get(name, [0, 0])
            metrics[condition_metric(METRIC_TOKENS_PROMPT, name)] = float(prompt)
            metrics[condition_metric(METRIC_TOKENS_COMPLETION, name)] = float(completion)
        if self.provider_cached is not None:
            metrics[METRIC_TOKENS_PROVIDER_CACHED] = float(self.provider_cached)
        if pricing.priced:
            metrics[METRIC_COST_USD] = cost_usd(self.prompt, self.completion, pricing)
        return metrics
