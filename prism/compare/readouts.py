"""The read-outs of a comparison: the tables that say where to look, built after the shifts table.

- ``scorecard`` (:mod:`prism.compare.scorecard`): model x condition x metric with intervals;
- ``sensitivity_axes`` (:mod:`prism.compare.sensitivity_axes`): axes ranked by their largest excess;
- ``measure_agreement`` (:mod:`prism.compare.measure_agreement`): whether the measures find the same shifts,
  always present;
- ``divergence_noise`` (:mod:`prism.compare.divergence_noise`): where two models differ beyond both models'
  noise, with two or more runs.

:func:`readout_tables` is what :func:`prism.compare.build.build_tables` calls; each table becomes
``comparison/<name>.csv``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import pandas as pd

from prism.compare.divergence_noise import divergence_noise_table
from prism.compare.measure_agreement import measure_agreement_table
from prism.compare.scorecard import scorecard_table
from prism.compare.sensitivity_axes import sensitivity_axes_table
from prism.compare.tables import ModelCells, Pair
from prism.stats.shifts import Embed


class Readouts(NamedTuple):
    """The read-out tables (``divergence_noise`` is None with one run)."""

    scorecard: pd.DataFrame
    sensitivity_axes: pd.DataFrame
    measure_agreement: pd.DataFrame
    divergence_noise: pd.DataFrame | None


def readout_tables(models: Sequence[ModelCells], shifts: pd.DataFrame, baseline: str,
                   measures: Sequence[str], pairs: Sequence[Pair], *, n_boot: int, n_permutations: int,
                   seed: int, embed: Embed | None = None) -> Readouts:
    """The read-out tables of the compared runs, from their cells and the shifts table.

    Args:
        models: The compared runs.
        shifts: The shifts table (:func:`prism.compare.noise.shifts_table`).
        baseline: The baseline condition.
        measures: The shift measures used.
        pairs: The pairs of runs of the cross-model tables.
        n_boot: Bootstrap resamples.
        n_permutations: Permutations behind each p-value.
        seed: Every resample's seed.
        embed: Texts -> embeddings, for ``embedding_cosine``.
    """
    scorecard = scorecard_table(models, baseline, n_boot=n_boot, seed=seed)
    axes = sensitivity_axes_table(models, shifts)
    agreement = measure_agreement_table(shifts, measures)
    noise = (divergence_noise_table(pairs, measures, n_boot=n_boot, n_permutations=n_permutations, seed=seed,
                                    embed=embed) if len(models) >= 2 else None)
    return Readouts(scorecard, axes, agreement, noise)
