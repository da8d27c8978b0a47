"""Budgets: ``budget.max_usd`` and ``budget.max_requests`` cap what one run may ask.

Two checks, one before and one during the run:

- Before any request (even a remote backend's identity probe) the run's plan (:func:`prism.run.dry_run.plan_run`)
  is checked: more requests left than ``budget.max_requests``, or an estimated prompt cost alone above
  ``budget.max_usd``, refuses the run with the figures. The prompt side is what can be estimated before
  anything is asked (the output length is the model's to choose), so a plan is refused only when it is
  certain, by the estimate, to exceed the cap.
- During the run a :class:`BudgetGuard` stops handing out cells once the requests sent reach
  ``max_requests`` or the spending of the answered cells (their recorded tokens at ``model.pricing``)
  reaches ``max_usd``. Cells already in flight are still answered and kept (with ``model.concurrency`` N
  the spending can pass the cap by at most N-1 requests); the run then stops with a :class:`BudgetReached`
  that gives the figures. Every answered cell is in the store, so the same command with a higher cap
  resumes where it stopped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, TypeVar

from prism.config import BudgetConfig, PricingConfig
from prism.errors import PrismError
from prism.records import RawRecord
from prism.run.usage import cost_usd

if TYPE_CHECKING:
    from prism.run.dry_run import RunPlan

T = TypeVar("T")


class BudgetReached(PrismError, RuntimeError):
    """A run refused, or stopped, because its budget would be or was exceeded; the message has the figures."""


def budget_guard(budget: BudgetConfig, pricing: PricingConfig, plan_run: Callable[[], RunPlan]) -> BudgetGuard | None:
    """Refuse, before any request, a run whose plan exceeds ``budget``; else the guard for the run (module docstring).

    Args:
        budget: The run's ``budget`` group.
        pricing: The model's prices (``model.pricing``).
        plan_run: Makes the run's plan (:func:`prism.run.dry_run.plan_run`); called only when a cap is set.

    Returns:
        The guard that holds cells back during the run, or None when no cap is set.

    Raises:
        ConfigError: As :meth:`prism.config.BudgetConfig.check`.
        BudgetReached: With the plan's figures and the cap it exceeds.
    """
    budget.check(pricing)
    if not budget.limited:
        return None
    plan = plan_run()
    held = "an unknown number (no identity of this server recorded yet)" if plan.held is None else str(plan.held)
    figures = f"{plan.cells} cells, {held} held by the store, {plan.requests} requests left"
    max_requests = budget.max_requests
    if max_requests is not None and plan.requests > max_requests:
        raise BudgetReached(f"this run would send {plan.requests} requests ({figures}), more than "
                            f"budget.max_requests={max_requests}, so nothing was asked. Raise budget.max_requests, "
                            "or ask fewer cells (dataset.n, generation.repetitions); dry_run=true shows the plan.")
    max_usd = budget.max_usd
    if max_usd is not None:
        prompt_cost = cost_usd(plan.prompt_tokens, 0, pricing)
        if prompt_cost > max_usd:
            raise BudgetReached(
                f"this run's prompts alone would cost about ${prompt_cost:.4f} ({plan.prompt_tokens} prompt tokens "
                f"by {plan.token_method} over {figures}, at model.pricing.input_per_mtok="
                f"{pricing.input_per_mtok:g}), more than budget.max_usd={max_usd:g}, so nothing was "
                "asked. Raise budget.max_usd, or ask fewer cells; dry_run=true shows the plan.")
    return BudgetGuard(budget, pricing)


class BudgetGuard:
    """Hands out cells while the run is within its budget; counts what was sent and spent (thread-safe)."""

    def __init__(self, budget: BudgetConfig, pricing: PricingConfig) -> None:
        self._budget, self._pricing = budget, pricing
        self.sent = 0
        self.spent_usd = 0.0
        self.stopped = False
        self._lock = threading.Lock()

    def _allows_next(self) -> bool:
        with self._lock:
            if self._budget.max_requests is not None and self.sent >= self._budget.max_requests:
                return False
            if self._budget.max_usd is not None and self.spent_usd >= self._budget.max_usd:
                return False
            self.sent += 1
            return True

    def cells(self, cells: Iterable[T]) -> Iterator[T]:
        """``cells`` until the budget is reached; :attr:`stopped` says whether some were held back."""
        for cell in cells:
            if not self._allows_next():
                self.stopped = True
                return
            yield cell

    def spend(self, record: RawRecord) -> None:
        """Count the answered cell's tokens at the model's prices."""
        if not self._pricing.priced:
            return
        with self._lock:
            self.spent_usd += cost_usd(record.prompt_tokens or 0, record.completion_tokens or 0, self._pricing)

    def reached(self, left: int) -> BudgetReached:
        """The error that stops the run, with ``left`` cells not asked."""
        caps = []
        if self._budget.max_requests is not None:
            caps.append(f"budget.max_requests={self._budget.max_requests}")
        if self._budget.max_usd is not None:
            caps.append(f"budget.max_usd={self._budget.max_usd:g}")
        spent = f", spending ${self.spent_usd:.4f} at model.pricing" if self._pricing.priced else ""
        return BudgetReached(
            f"the run reached its budget ({', '.join(caps)}): it sent {self.sent} requests{spent}, and {left} cells "
            "were not asked. Every answered cell is kept: run the same command with a higher cap and it resumes "
            "where this run stopped."
        )
