"""``build_tables``: every table of a comparison, from the compared runs' cells.

Pure: no MLflow, and no files but the differences table when it is given one to stream to
(:mod:`prism.compare.differences_file`). :func:`prism.compare.core.compare` downloads the runs, calls this,
and writes what it returns; the tests call it on synthetic runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from prism.compare.by_type import consistency_by_type_table
from prism.compare.cloze_tables import (
    cloze_disagreements_table,
    cloze_readings_table,
    has_cloze,
    merged_readings_table,
)
from prism.compare.comparison_plan import ComparisonPlan
from prism.compare.comparison_tables import ComparisonTables
from prism.compare.differences_file import stream_differences
from prism.compare.groups import group_pairs, question_sets_table
from prism.compare.label_prob_tables import disagreements_table, has_probabilities, readings_table
from prism.compare.noise import gee_tables, profile_table, shifts_table
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
from prism.stats.shifts import EMBEDDING_MEASURES, Embed


def build_tables(models: Sequence[ModelCells], plan: ComparisonPlan, embed: Embed | None = None,
                 differences_csv: Path | None = None) -> ComparisonTables:
    """Every comparison table; with one model, sensitivity, accuracy, shifts and the clustered model.

    The cross-model tables (divergence, differences and their counts) pair cells only between runs on the
    same frozen question set (:mod:`prism.compare.groups`): within each set, the pairs of
    :func:`prism.compare.tables.model_pairs` (the plan's ``pairs`` and the set's reference run). They are
    left out when no two runs share a set. ``question_sets`` says which runs each set holds. The plan's
    ``max_per_pair`` caps only the cells the differences table lists.

    Args:
        models: The compared runs, in table order.
        plan: What to compute (:class:`prism.compare.comparison_plan.ComparisonPlan`).
        embed: The responses' embeddings (texts -> vectors, :func:`prism.compare.embedding.embeddings_for`),
            which ``embedding_cosine`` needs.
        differences_csv: Where to write the differences table as it is made, pair by pair
            (:func:`prism.compare.differences_file.stream_differences`); ``differences`` then holds only its
            first rows, marked as written there. None: the whole table in memory.

    Raises:
        CompareError: If a model lacks the baseline condition, the reference is not a compared run, or
            ``embedding_cosine`` has no ``embed``.
    """
    baseline, n_boot, seed, measures = plan.baseline, plan.n_boot, plan.seed, plan.measures
    try:
        sensitivity = sensitivity_table(models, baseline, n_boot=n_boot, seed=seed)
        if embed is None and set(measures) & set(EMBEDDING_MEASURES):
            raise ValueError("the embedding_cosine measure needs the responses' embeddings: pass embed= "
                             "(prism.compare.embedding.embeddings_for)")
        chosen = dict(plan.references)
        if plan.reference is not None:
            model_pairs(models, plan.pairs, plan.reference)  # refuses a reference that is not a compared run
            chosen.update({m.question_set: plan.reference for m in models if m.run_id == plan.reference})
        compared = group_pairs(models, plan.pairs, chosen)
    except ValueError as exc:
        raise CompareError(str(exc)) from exc
    accuracy = accuracy_table(models, n_boot=n_boot, seed=seed)
    several = len(models) >= 2
    question_sets = question_sets_table(models, compared, plan.pairs) if several else None
    condition_disagreement = condition_disagreement_table(models, n_boot=n_boot, seed=seed) if several else None
    # How sure the ranking is over the prompts (prism.compare.rank_robustness; empty without two runs to rank).
    rank_robustness = rank_robustness_table(models, resamples=plan.power_simulations, seed=seed)
    divergence = listed = counts = None
    if compared:
        divergence = divergence_table(models, n_boot=n_boot, seed=seed, pairs=compared)
        try:
            listed, counts = (differences(models, compared, plan.max_per_pair) if differences_csv is None
                              else stream_differences(differences_csv, models, compared, plan.max_per_pair))
        except ValueError as exc:
            raise CompareError(str(exc)) from exc
    # Change beyond noise: shifts per step and measure, and the clustered model of consistency.
    shifts = shifts_table(models, baseline, measures, n_boot=n_boot, n_permutations=plan.permutations, seed=seed,
                          embed=embed)
    profile = profile_table(models, shifts)
    roles = roles_table(models, shifts)  # each step's role from the keys, beside its shift
    gee_wald, gee_by_dataset = gee_tables(models, baseline)
    consistency_by_type = consistency_by_type_table(models, baseline)
    # Where to look: scorecard, axes ranked, measure agreement, divergence beyond noise (prism.compare.readouts).
    readouts = readout_tables(models, shifts, baseline, measures, compared, n_boot=n_boot,
                              n_permutations=plan.permutations, seed=seed, embed=embed)
    # The readings (runs with generation.label_probs=true or generation.cloze=true): label_prob_tables'
    # and cloze_tables' columns side by side in one readings.csv, and the cells where each parts from the text.
    readings = reading_disagreements = cloze_disagreements = None
    if any(has_probabilities(m) or has_cloze(m) for m in models):
        readings = merged_readings_table(models, readings_table(models, baseline), cloze_readings_table(models))
        reading_disagreements = disagreements_table(models)
    if any(has_cloze(m) for m in models):
        cloze_disagreements = cloze_disagreements_table(models)
    return ComparisonTables(
        sensitivity=sensitivity, accuracy=accuracy, question_sets=question_sets,
        condition_disagreement=condition_disagreement, rank_robustness=rank_robustness, divergence=divergence,
        differences=listed, difference_counts=counts, shifts=shifts, profile=profile, roles=roles,
        gee_wald=gee_wald, gee_by_dataset=gee_by_dataset, consistency_by_type=consistency_by_type,
        scorecard=readouts.scorecard, sensitivity_axes=readouts.sensitivity_axes,
        measure_agreement=readouts.measure_agreement, divergence_noise=readouts.divergence_noise,
        readings=readings, reading_disagreements=reading_disagreements, cloze_disagreements=cloze_disagreements)
