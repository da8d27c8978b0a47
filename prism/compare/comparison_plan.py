"""The comparison's plan: what :func:`prism.compare.build.build_tables` computes, fixed and checked once.

:func:`prism.compare.core.compare` makes a :class:`ComparisonPlan` from the compare config and the selected
runs (the pairing and the references are chosen from the runs) before any run's cells are downloaded; the
tests make one directly. Once built, a plan is frozen: no later stage re-checks or re-reads the config.
Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from prism.compare.noise import check_measures
from prism.compare.select import CompareError
from prism.config.choices import ComparePairs
from prism.stats.shifts import DEFAULT_MEASURE


@dataclass(frozen=True, kw_only=True)
class ComparisonPlan:
    """What one comparison computes.

    Attributes:
        baseline: The baseline condition every step is measured from.
        n_boot: Bootstrap resamples behind every interval.
        seed: The seed of every resample.
        measures: The shifts' measures, known and without repeats.
        permutations: Permutations behind each shift's p-value.
        pairs: Which pairs of runs the paired tables hold: ``reference`` (each run against one reference
            run per question set) or ``all``.
        reference: With ``pairs=reference``, the reference run id of the question set that holds it; None
            takes each set's first run.
        references: Question set -> its reference run id, for the other sets (``pairs=reference``).
        max_per_pair: Most differing cells the differences table lists per pair; None lists them all.
        power_simulations: Resamples of questions and prompt behind the rank table.
    """

    baseline: str
    n_boot: int
    seed: int
    measures: tuple[str, ...] = (DEFAULT_MEASURE,)
    permutations: int = 2000
    pairs: ComparePairs = "all"
    reference: str | None = None
    references: Mapping[str, str] = field(default_factory=dict)
    max_per_pair: int | None = None
    power_simulations: int = 1000

    def __post_init__(self) -> None:
        """Check the measures (and drop repeats); the pairing and the cap were checked with the config.

        ``pairs``, ``reference`` with ``pairs=all`` and ``max_per_pair`` are refused once, by
        :meth:`prism.config.CompareConfig.check`; whether the reference is a compared run, once the runs are
        known (:func:`prism.compare.core.plan_for`).

        Raises:
            CompareError: If a measure is unknown or none is named.
        """
        try:
            measures = tuple(check_measures(self.measures))
        except ValueError as exc:
            raise CompareError(str(exc)) from exc
        object.__setattr__(self, "measures", measures)
        object.__setattr__(self, "references", MappingProxyType(dict(self.references)))
