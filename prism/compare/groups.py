"""Which compared runs each table holds, when the runs are on different frozen question sets.

A comparison may hold runs on different datasets (an objective and a subjective one, say). Tables that
describe each run on its own -- sensitivity, accuracy, shifts, profiles, per-family consistency, the
readings -- and the clustered model (:mod:`prism.stats.gee_fits`, with dataset and dataset type as factors)
hold every run. Tables that pair cells of two runs on (question, condition, repetition) -- divergence,
differences and their counts -- only mean something between runs on the same frozen question set, so
the runs are grouped by question set (``prism.question_set_sha256``) and pairs are made within each
group, with ``pairs=reference`` or ``pairs=all`` as usual (:func:`prism.compare.tables.model_pairs`).

``comparison/question_sets.csv`` lists the groups: which runs, on which dataset, which of them is the
group's reference run, and how many pairs the paired tables hold for it. Pure pandas, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from prism.compare.tables import ModelCells, Pair, model_pairs

QUESTION_SET_COLUMNS = ("question_set", "dataset", "dataset_type", "n_questions", "runs", "run_ids", "reference",
                        "pairs")
# Which tables hold every run, and which pair runs within a question set (as the report names them).
PER_RUN_TABLES = ("sensitivity", "accuracy", "condition_disagreement", "shifts", "profile", "readings",
                  "consistency_by_type", "gee_by_dataset")
PAIRED_TABLES = ("divergence", "differences", "difference_counts")


def question_set_groups(models: Sequence[ModelCells]) -> dict[str, list[ModelCells]]:
    """The runs by frozen question set, each group and its runs in table order."""
    groups: dict[str, list[ModelCells]] = {}
    for model in models:
        groups.setdefault(model.question_set, []).append(model)
    return groups


def group_pairs(models: Sequence[ModelCells], pairs: str, references: Mapping[str, str]) -> list[Pair]:
    """The pairs the paired tables hold: within each question set, as :func:`model_pairs` makes them.

    Args:
        models: The compared runs, in table order.
        pairs: ``reference`` or ``all``.
        references: Question set -> its reference run id (``pairs=reference``); a group missing here takes
            its first run.

    Raises:
        ValueError: If ``pairs`` is unknown, or a group's reference is not among its runs.
    """
    found: list[Pair] = []
    for question_set, members in question_set_groups(models).items():
        reference = references.get(question_set) if pairs == "reference" else None
        found += model_pairs(members, pairs, reference)
    return found


def question_sets_table(models: Sequence[ModelCells], compared: Sequence[Pair], pairs: str) -> pd.DataFrame:
    """One row per question set: its dataset, runs, reference run (``pairs=reference``) and pair count.

    Returns:
        Columns :data:`QUESTION_SET_COLUMNS`; ``runs`` and ``run_ids`` are comma-separated in table order.
    """
    rows = []
    for question_set, members in question_set_groups(models).items():
        ids = {m.run_id for m in members}
        held = [(a, b) for a, b in compared if a.run_id in ids]
        references = list(dict.fromkeys(a.label for a, _ in held)) if pairs == "reference" else []
        rows.append({
            "question_set": question_set,
            "dataset": ",".join(dict.fromkeys(m.dataset for m in members)),
            "dataset_type": ",".join(dict.fromkeys(m.dataset_type for m in members)),
            "n_questions": int(pd.concat([m.cells["question_id"] for m in members]).nunique()),
            "runs": ",".join(m.label for m in members), "run_ids": ",".join(m.run_id for m in members),
            "reference": references[0] if len(references) == 1 else "", "pairs": len(held),
        })
    return pd.DataFrame(rows, columns=list(QUESTION_SET_COLUMNS))


def coverage_lines(table: pd.DataFrame | None) -> list[str]:
    """Which tables hold which runs, one sentence per line, for the terminal and the report.

    Empty when every run is on one question set (or one run was compared, so there is no ``table``): then
    every table holds every run (as it always did).
    """
    if table is None or len(table) < 2:
        return []
    n_runs = sum(len(str(runs).split(",")) for runs in table["runs"])
    lines = [f"The {n_runs} runs are on {len(table)} different frozen question sets. Every run is in the per-run "
             f"tables ({', '.join(PER_RUN_TABLES)}), and the clustered model fits them together with dataset "
             "and dataset type as factors. The paired tables (divergence, differences) pair cells only between runs "
             "on the same question set:"]
    for row in table.to_dict("records"):
        runs = str(row["runs"]).split(",")
        where = (f"question set {str(row['question_set'])[:12] or '?'} ({row['dataset']}, {row['dataset_type']}, "
                 f"{row['n_questions']} questions)")
        if int(row["pairs"]) == 0:
            lines.append(f"{where}: {runs[0]} only, so no pair of runs there.")
            continue
        how = (f"each run against the reference {row['reference']}" if row["reference"]
               else "every pair of its runs")
        lines.append(f"{where}: {', '.join(runs)}; {row['pairs']} pair(s), {how}.")
    return lines
