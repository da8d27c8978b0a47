"""Roles: whether a step moves the correct answer, read off the reference answers, never labelled by hand.

A step (from one condition to another) is *causal* when the reference answer (the canonical label of the
correct option each cell was scored against, ``correct_answer``) differs between its two conditions for
some question, and *invariant* otherwise. Every PRISM family keeps the answer where it was, except a step
that removes the correct option (:mod:`prism.conditions.perturbations.missing`), whose reference becomes the added
option. A condition's role is that of the step to it from the baseline.

Question-level metrics across conditions (agreement, majority, unanimity, prompt sensitivity,
prompt-invariant incorrectness) only mean something over conditions that share one correct answer, so a run
computes them over its invariant conditions (:func:`invariant_conditions`); causal conditions are read
through their roles (``prism.compare.role_tables``). Items without a key have no reference: every step is
invariant. Pure pandas, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

CAUSAL = "causal"
INVARIANT = "invariant"
ROLE_COLUMNS = ("condition", "role", "moved_questions")


def references(scored: pd.DataFrame) -> dict[str, dict[str, str]]:
    """Condition -> question -> its reference answer (cells without a key left out).

    Raises:
        ValueError: If one question has two references under one condition (cells scored against two keys).
    """
    if scored.empty or "correct_answer" not in scored:
        return {}
    keyed = scored.loc[scored["correct_answer"].notna(), ["condition", "question_id", "correct_answer"]]
    distinct = keyed.drop_duplicates()
    repeated = distinct.duplicated(subset=["condition", "question_id"], keep=False)
    if repeated.any():
        first = distinct[repeated].iloc[0]
        raise ValueError(f"question {first['question_id']!r} has several reference answers under condition "
                         f"{first['condition']!r}; every cell of one prompt is scored against one key")
    out: dict[str, dict[str, str]] = {}
    # The columns as lists (the values rows would hold), not a tuple per row: a comparison reads every run's cells.
    for condition, question, answer in zip(distinct["condition"].tolist(), distinct["question_id"].tolist(),
                                           distinct["correct_answer"].tolist(), strict=True):
        out.setdefault(str(condition), {})[str(question)] = str(answer)
    return out


def moved(refs: Mapping[str, Mapping[str, str]], start: str, to: str) -> dict[str, str]:
    """Question -> its reference under ``to``, for the questions whose reference differs from ``start``'s."""
    before, after = refs.get(start, {}), refs.get(to, {})
    return {q: key for q, key in after.items() if q in before and before[q] != key}


def step_role(refs: Mapping[str, Mapping[str, str]], start: str, to: str) -> str:
    """``causal`` when the step from ``start`` to ``to`` moves the reference of some question, else ``invariant``."""
    return CAUSAL if moved(refs, start, to) else INVARIANT


def role_table(scored: pd.DataFrame, conditions: Sequence[str], baseline: str) -> pd.DataFrame:
    """Each condition's role (its step from the baseline) and how many questions' references it moves.

    Returns:
        Columns :data:`ROLE_COLUMNS`, one row per condition in order (the baseline invariant, 0 moved).
    """
    refs = references(scored)
    rows = [{"condition": c, "role": step_role(refs, baseline, c), "moved_questions": len(moved(refs, baseline, c))}
            for c in conditions]
    return pd.DataFrame(rows, columns=list(ROLE_COLUMNS))


def invariant_conditions(roles: pd.DataFrame) -> list[str]:
    """The conditions of a :func:`role_table` whose role is invariant, in order."""
    return [str(c) for c, role in zip(roles["condition"], roles["role"], strict=True) if role == INVARIANT]
