"""The run's few-shot demonstrations: drawn and frozen beside the question set, attached, recorded, balanced.

A condition set whose steps show demonstrations (``conditions=fewshot``) needs each frozen question's draw
(:mod:`prism.questions.demonstrations`) before anything is rendered; :func:`with_demonstrations` freezes it (or
verifies the frozen one) and hands back the frozen set whose questions carry it. The run logs the draw as
``questions/demonstrations.jsonl`` with its sha256 as the tag ``prism.demonstrations_sha256``, and writes
``results/demonstrations.csv``: per condition, where the demonstrations' answers sit and how often their
majority position is the question's own key (a model may copy the majority label).
"""

from __future__ import annotations

import csv
import logging
import shutil
from dataclasses import replace
from pathlib import Path

from prism.conditions import ConditionSet
from prism.conditions.fewshot import conditions_with_demonstrations, demonstrations_needed, label_balance
from prism.config import DatasetConfig
from prism.names import DEMONSTRATION_BALANCE_ARTIFACT, DEMONSTRATIONS_ARTIFACT
from prism.questions import FrozenSet
from prism.questions.demonstrations import DemonstrationDraw, attach, freeze_demonstrations

log = logging.getLogger(__name__)



def with_demonstrations(dataset: DatasetConfig, frozen: FrozenSet,
                        condition_set: ConditionSet) -> tuple[FrozenSet, DemonstrationDraw | None]:
    """The frozen set with each question's demonstrations attached, and their frozen draw (None: the set shows none).

    Raises:
        DataError: The dataset names no pool, a pool split is missing (naming the file to provide), the pool
            has items without a key or is too small for some question (with the counts), or the frozen draw
            on disk changed.
    """
    need = demonstrations_needed(condition_set)
    if not need:
        return frozen, None
    names = conditions_with_demonstrations(condition_set)
    why = (f"condition set {condition_set.name!r} (conditions {', '.join(names[:4])}"
           f"{', ...' if len(names) > 4 else ''})")
    draw = freeze_demonstrations(dataset, dataset.demonstrations, frozen.questions, frozen.path, frozen.seed, need, why)
    log.info("%d demonstrations per question drawn from %s/%s (a pool of %d; frozen as %s)", need, frozen.dataset,
             "+".join(draw.splits), draw.pool_size, draw.path.name)
    return replace(frozen, questions=attach(frozen.questions, draw.by_question)), draw


def write_demonstrations(out: Path, draw: DemonstrationDraw | None, frozen: FrozenSet,
                         condition_set: ConditionSet) -> None:
    """Copy the frozen draw to ``questions/`` and write ``results/demonstrations.csv``, saying how balanced it is."""
    if draw is None:
        return
    (out / "questions").mkdir(parents=True, exist_ok=True)
    shutil.copy(draw.path, out / DEMONSTRATIONS_ARTIFACT)
    rows = label_balance(frozen.questions, condition_set)
    (out / "results").mkdir(parents=True, exist_ok=True)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with (out / DEMONSTRATION_BALANCE_ARTIFACT).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, restval=0.0)
        writer.writeheader()
        writer.writerows(rows)
    for row in rows:
        shares = ", ".join(f"{key.removeprefix('answer_')} {value:.0%}" for key, value in row.items()
                           if key.startswith("answer_"))
        log.info("demonstrations of %s: answers at %s; a majority position in %.0f%% of prompts, the key's in %.0f%%",
                 row["condition"], shares, 100 * row["majority_share"], 100 * row["majority_is_key"])
