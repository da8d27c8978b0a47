"""How long each stage of a comparison took (``timings=true`` prints them when it ends).

Wall seconds per stage, in the order the stages ran, measured with ``time.perf_counter``; the lines are
also logged at debug level whatever ``timings`` says.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)


class Stopwatch:
    """Wall time per named stage."""

    def __init__(self) -> None:
        self.stages: list[tuple[str, float]] = []
        self._started = time.perf_counter()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as the stage ``name``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.stages.append((name, time.perf_counter() - start))
            log.debug("compare stage %s: %.2f s", name, self.stages[-1][1])

    def lines(self) -> list[str]:
        """One line per stage, then the total since the stopwatch was made."""
        width = max((len(name) for name, _ in self.stages), default=5)
        total = time.perf_counter() - self._started
        return [f"  {name:<{width}}  {seconds:7.2f} s" for name, seconds in self.stages] + [
            f"  {'total':<{width}}  {total:7.2f} s"]
