"""``build_tables``: every table of a comparison, from the compared runs' cells.

Pure: no MLflow, and no files but the differences table when it is given one to stream to
(:mod:`prism.compare.differences_file`). :func:`prism.compare.core.compare` downloads the runs, calls this,
and writes what it returns; the tests call it on synthetic runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from prism.compare.by_type import consistency_by_type_table
from prism.compare.cloze_tables import (
    cloze_disagreements_table,
    cloze_readings_table,
    has_cloze,
    merged_readings_table,
)
from prism.compare.differences_file import stream_differences
from prism.compare.groups import group_pairs, question_sets_table
from prism.compare.label_prob_tables import disagreements_table, has_probabilities, readings_table
from prism.compare.noise import check_measures, gee_tables, profile_table, shifts_table
from prism.compare.rank_robustness import rank_robustness_table
from prism.compare.readouts import readout_tables
from prism.compare.role_tables import roles_table
from prism.compare.select import CompareError
from prism.compare.tables import (
    ModelCells,
    accuracy_table,
    condition_disagreement_table,
    differences,
    divergence_table,
    model_pairs,
    sensitivity_table,
)
from prism.stats.shifts import DEFAULT_MEASURE, EMBEDDING_MEASURES, Embed


def build_tables(models: Sequence[ModelCells], baseline: str, n_boot: int, seed: int,
                 measures: Sequence[str] = (DEFAULT_MEASURE,), permutations: int = 2000, *, pairs: str = "all",
                 reference: str | None = None, max_per_pair: int | None = None,
                 references: Mapping[str, str] | None = None, power_simulations: int = 1000,
                 embed: Embed | None = None, differences_csv: Path | None = None) -> dict[str, pd.DataFrame]:
    """Every comparison table; with one model, sensitivity, accuracy, shifts and the clustered model.

    The cross-model tables (divergence, differences and their counts) pair cells only between runs on the
    same frozen question set (:mod:`prism.compare.groups`): within each set, the pairs of
    :func:`prism.compare.tables.model_pairs` (``pairs`` and the set's reference run). They are left out
    when no two runs share a set. ``question_sets`` says which runs each set holds. ``max_per_pair`` caps
    only the cells the differences table lists.

    Args:
        models: The compared runs, in table order.
        baseline: The baseline condition.
        n_boot: Bootstrap resamples.
        seed: Their seed.
        measures: The shifts' measures.
        permutations: The shifts' permutations.
        pairs: ``reference`` or ``all``.
        reference: The reference run id of the question set it is on (``pairs=reference``; None: the first run).
        max_per_pair: Most differing cells listed per pair; None lists all.
        references: Question set -> reference run id for the other sets (a set missing here, and not
            holding ``reference``, takes its first run).
        power_simulations: Resamples of questions and prompt behind ``rank_robustness`` (two or more runs).
        embed: The responses' embeddings (texts -> vectors, :func:`prism.compare.embedding.embeddings_for`),
            which ``embedding_cosine`` needs.
        differences_csv: Where to write the differences table as it is made, pair by pair
            (:func:`prism.compare.differences_file.stream_differences`); ``differences`` then holds only its
            first rows, marked as written there. None: the whole table in memory.

    Raises:
        CompareError: If a model lacks the baseline condition, a measure is unknown, ``pairs`` is unknown,
            the reference is not a compared run, the cap is negative, or ``embedding_cosine`` has no ``embed``.
    """
    try:
        tables = {"sensitivity": sensitivity_table(models, baseline, n_boot=n_boot, seed=seed)}
        measures = check_measures(measures)
        if embed is None and set(measures) & set(EMBEDDING_MEASURES):
            raise ValueError("the embedding_cosine measure needs the responses' embeddings: pass embed= "
                             "(prism.compare.embedding.embeddings_for)")
        chosen = dict(references or {})
        if reference is not None:
            model_pairs(models, pairs, reference)  # refuses a reference that is not a compared run
            chosen.update({m.question_set: reference for m in models if m.run_id == reference})
        compared = group_pairs(models, pairs, chosen)
    except ValueError as exc:
        raise CompareError(str(exc)) from exc
    tables["accuracy"] = accuracy_table(models, n_boot=n_boot, seed=seed)
    if len(models) >= 2:
        tables["question_sets"] = question_sets_table(models, compared, pairs)
        tables["condition_disagreement"] = condition_disagreement_table(models, n_boot=n_boot, seed=seed)
    # How sure the ranking is over the prompts (prism.compare.rank_robustness; empty without two runs to rank).
    tables["rank_robustness"] = rank_robustness_table(models, resamples=power_simulations, seed=seed)
    if compared:
        tables["divergence"] = divergence_table(models, n_boot=n_boot, seed=seed, pairs=compared)
        try:
            tables["differences"], tables["difference_counts"] = (
                differences(models, compared, max_per_pair) if differences_csv is None
                else stream_differences(differences_csv, models, compared, max_per_pair))
        except ValueError as exc:
            raise CompareError(str(exc)) from exc
    # Change beyond noise: shifts per step and measure, and the clustered model of consistency.
    tables["shifts"] = shifts_table(models, baseline, measures, n_boot=n_boot, n_permutations=permutations, seed=seed,
                                    embed=embed)
    tables["profile"] = profile_table(models, tables["shifts"])
    tables["roles"] = roles_table(models, tables["shifts"])  # each step's role from the keys, beside its shift
    tables["gee_wald"], tables["gee_by_dataset"] = gee_tables(models, baseline)
    tables["consistency_by_type"] = consistency_by_type_table(models, baseline)
    # Where to look: scorecard, axes ranked, measure agreement, divergence beyond noise (prism.compare.readouts).
    tables.update(readout_tables(models, tables, baseline, measures, compared, n_boot=n_boot,
                                 n_permutations=permutations, seed=seed, embed=embed))
    # The readings (runs with generation.label_probs=true or generation.cloze=true): label_prob_tables'
    # and cloze_tables' columns side by side in one readings.csv, and the cells where each parts from the text.
    if any(has_probabilities(m) or has_cloze(m) for m in models):
        tables["readings"] = merged_readings_table(models, readings_table(models, baseline),
                                                   cloze_readings_table(models))
        tables["reading_disagreements"] = disagreements_table(models)
    if any(has_cloze(m) for m in models):
        tables["cloze_disagreements"] = cloze_disagreements_table(models)
    return tables
