"""The comparison's typed results: :class:`ComparisonTables` (one field per table) and :class:`ReadoutTables`.

Every stage after :func:`prism.compare.build.build_tables` (the CSV writer, the figures, the report page,
the terminal, the headline metrics) reads the fields it needs from a :class:`ComparisonTables` instead of
looking tables up by string key. A field's name is its file's name: ``comparison/<field>.csv``.

:class:`ReadoutTables` is the part the read-out sections show (the report's and the site's). The site
rebuilds it from the CSVs an earlier comparison logged, so each of its fields may be missing (None).
Pure: pandas only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields

import pandas as pd


@dataclass(frozen=True, kw_only=True)
class ComparisonTables:
    """Every table of one comparison, in the order its CSVs are written.

    The tables every comparison has are plain fields; the others are None when the comparison has none:
    ``question_sets`` and ``condition_disagreement`` need two or more runs, ``divergence``,
    ``differences`` and ``difference_counts`` two runs on one question set, ``divergence_noise`` two or
    more runs, ``readings`` and ``reading_disagreements`` a run with label probabilities or the cloze
    reading, ``cloze_disagreements`` a run with the cloze reading. Each table's columns are documented by
    the function that makes it (:mod:`prism.compare.tables`, :mod:`prism.compare.noise`,
    :mod:`prism.compare.readouts`, ...).

    Attributes:
        sensitivity: Per run and condition: agreement with the baseline and the other headline measures.
        accuracy: Per run and condition: accuracy and its interval.
        question_sets: Which runs each frozen question set holds, and its reference run.
        condition_disagreement: Per run: how often two conditions' answers to one question differ.
        rank_robustness: Per pair of runs: how sure their order is over the prompts (empty with one run).
        divergence: Per pair of runs and condition: how often their answers differ.
        differences: The differing cells listed (at most ``differences.max_per_pair`` per pair).
        difference_counts: Per pair: cells paired, differing and listed.
        shifts: Per run, measure and step: the change beyond noise.
        profile: Per run, axis and measure: where along a dose axis the measure first shifts.
        roles: Per run and step: the role the step plays (from the condition keys), beside its shift.
        gee_wald: The clustered model's Wald tests of each term.
        gee_by_dataset: The clustered model's consistency per dataset.
        consistency_by_type: Per run and family: consistency by dataset type.
        scorecard: Per run, condition and metric: the read-out scorecard.
        sensitivity_axes: Per run and axis: the axes ranked by how many steps shift.
        measure_agreement: How often the shift measures agree on a step.
        divergence_noise: Per pair, condition and measure: divergence beyond the runs' own noise.
        readings: Per run and condition: the text reading beside label probabilities and cloze.
        reading_disagreements: The cells where the label-probability reading parts from the text.
        cloze_disagreements: The cells where the cloze reading parts from the text.
    """

    sensitivity: pd.DataFrame
    accuracy: pd.DataFrame
    question_sets: pd.DataFrame | None = None
    condition_disagreement: pd.DataFrame | None = None
    rank_robustness: pd.DataFrame
    divergence: pd.DataFrame | None = None
    differences: pd.DataFrame | None = None
    difference_counts: pd.DataFrame | None = None
    shifts: pd.DataFrame
    profile: pd.DataFrame
    roles: pd.DataFrame
    gee_wald: pd.DataFrame
    gee_by_dataset: pd.DataFrame
    consistency_by_type: pd.DataFrame
    scorecard: pd.DataFrame
    sensitivity_axes: pd.DataFrame
    measure_agreement: pd.DataFrame
    divergence_noise: pd.DataFrame | None = None
    readings: pd.DataFrame | None = None
    reading_disagreements: pd.DataFrame | None = None
    cloze_disagreements: pd.DataFrame | None = None

    def items(self) -> Iterator[tuple[str, pd.DataFrame]]:
        """``(file name without .csv, table)`` for each table the comparison has, in field order."""
        for spec in fields(self):
            table = getattr(self, spec.name)
            if table is not None:
                yield spec.name, table

    def readouts(self) -> ReadoutTables:
        """The tables the read-out sections show."""
        return ReadoutTables(sensitivity=self.sensitivity, shifts=self.shifts, scorecard=self.scorecard,
                             sensitivity_axes=self.sensitivity_axes, measure_agreement=self.measure_agreement,
                             divergence_noise=self.divergence_noise, rank_robustness=self.rank_robustness)


def size(table: pd.DataFrame | None) -> int:
    """How many rows a table of the comparison has (0 for one it does not have)."""
    return 0 if table is None else len(table)


@dataclass(frozen=True, kw_only=True)
class ReadoutTables:
    """The tables behind the read-out sections (scorecard, axes, measure agreement, steps, noise, ranking).

    Built from a :class:`ComparisonTables` (:meth:`ComparisonTables.readouts`) or, by the site, from the
    CSVs a logged comparison holds (:meth:`from_files`), where a comparison made before a table existed
    lacks it (None). The fields are those of :class:`ComparisonTables` of the same names.
    """

    sensitivity: pd.DataFrame | None = None
    shifts: pd.DataFrame | None = None
    scorecard: pd.DataFrame | None = None
    sensitivity_axes: pd.DataFrame | None = None
    measure_agreement: pd.DataFrame | None = None
    divergence_noise: pd.DataFrame | None = None
    rank_robustness: pd.DataFrame | None = None

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The tables' file names (without ``.csv``), in field order."""
        return tuple(spec.name for spec in fields(cls))

    @classmethod
    def from_files(cls, tables: Mapping[str, pd.DataFrame]) -> ReadoutTables:
        """The read-out tables from CSVs read back by file name (names not given are missing).

        Raises:
            ValueError: If a name is not one of :meth:`names`.
        """
        unknown = sorted(set(tables) - set(cls.names()))
        if unknown:
            raise ValueError(f"not read-out tables: {', '.join(unknown)}; known: {', '.join(cls.names())}")
        return cls(**tables)
