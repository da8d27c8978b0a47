"""Consistency across perturbations: how often a variant's answer is the baseline's answer.

Pure pandas, no I/O. For one question, one repetition and one non-baseline condition, the variant is
*consistent* when its canonical answer equals the baseline condition's canonical answer for the same
question and repetition. Answers are canonical options (``scoring`` mapped every displayed label back
through the prompt), so ``B`` under a reversed order and ``C`` under the frozen order are the same answer.
UNKNOWN (no answer recovered) is an outcome of its own: UNKNOWN under both is consistent, UNKNOWN under
one only is not. Failed requests are not observed responses: a pair is compared only when both the
variant's and the baseline's responses were observed.

- Per question and family: ``consistency`` = consistent pairs / compared pairs over the family's
  variants (and repetitions); NaN when nothing could be compared.
- Per family: the mean of its questions' consistency (questions with NaN left out).
- Per variant: consistent pairs / compared pairs over all questions (and repetitions).

The baseline condition itself is never compared (it is always consistent with itself).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from prism.names import CONSISTENCY_PREFIX

QUESTION_COLUMNS = ("question_id", "family", "n_compared", "n_consistent", "consistency")
SUMMARY_COLUMNS = ("family", "variant", "n_questions", "n_compared", "n_consistent", "consistency")
_KEY = ["question_id", "repetition"]


def pairs(scored: pd.DataFrame, families: Mapping[str, str], baseline: str) -> pd.DataFrame:
    """Pair every observed non-baseline response with the observed baseline response of its cell.

    Args:
        scored: Scored records with ``question_id``, ``condition``, ``repetition``, ``answer`` (canonical
            label or null for UNKNOWN) and ``error`` (null for an observed response).
        families: Condition name -> family, for every condition in the records.
        baseline: Name of the baseline condition.

    Returns:
        One row per compared pair: ``question_id``, ``repetition``, ``condition``, ``family``, ``answer``,
        ``baseline_answer``, ``consistent``.

    Raises:
        ValueError: If a record names a condition without a family.
    """
    columns = ["question_id", "repetition", "condition", "answer"]
    scored = scored if len(scored) else pd.DataFrame(columns=[*columns, "error"])
    # The baseline's and the variants' observed rows are taken from the records directly, never all the
    # observed rows first: at a million cells that copy is the largest thing here.
    observed = scored["error"].isna()
    unknown = sorted(set(scored.loc[observed, "condition"].unique()) - set(families))
    if unknown:
        raise ValueError(f"records name conditions without a family: {unknown}")
    is_baseline = scored["condition"] == baseline
    base = scored.loc[observed & is_baseline, [*_KEY, "answer"]].rename(columns={"answer": "baseline_answer"})
    variants = scored.loc[observed & ~is_baseline, columns]
    paired = variants.merge(base, on=_KEY, how="inner")
    paired["family"] = paired["condition"].map(dict(families))
    both_unknown = paired["answer"].isna() & paired["baseline_answer"].isna()
    same = paired["answer"].notna() & (paired["answer"] == paired["baseline_answer"])
    paired["consistent"] = (both_unknown | same).astype(bool)
    return paired[["question_id", "repetition", "condition", "family", "answer", "baseline_answer", "consistent"]]


def _family_order(families: Mapping[str, str], baseline: str) -> list[str]:
    return list(dict.fromkeys(f for name, f in families.items() if name != baseline))


def question_consistency(
    scored: pd.DataFrame, families: Mapping[str, str], baseline: str, question_ids: Sequence[str]
) -> pd.DataFrame:
    """Consistency per question and family (every question x family, NaN where nothing was compared).

    Returns:
        Columns :data:`QUESTION_COLUMNS`, ordered by question (as in ``question_ids``) then family (in
        the order families first appear among the conditions).
    """
    paired = pairs(scored, families, baseline)
    index = pd.MultiIndex.from_product([list(question_ids), _family_order(families, baseline)],
                                       names=["question_id", "family"])
    counts = paired.groupby(["question_id", "family"])["consistent"].agg(["size", "sum"])
    counts = counts.reindex(index, fill_value=0)
    table = pd.DataFrame({"n_compared": counts["size"].astype("int64"), "n_consistent": counts["sum"].astype("int64")},
                         index=index)
    table["consistency"] = table["n_consistent"] / table["n_compared"].where(table["n_compared"] > 0)
    return table.reset_index()[list(QUESTION_COLUMNS)]


def consistency_summary(
    scored: pd.DataFrame, families: Mapping[str, str], baseline: str, question_ids: Sequence[str]
) -> pd.DataFrame:
    """Consistency per family (``variant`` empty) followed by each of its variants.

    Returns:
        Columns :data:`SUMMARY_COLUMNS`. A family row's ``consistency`` is the mean over its questions'
        consistency; ``n_questions`` counts the questions with at least one compared pair. A variant row's
        is its consistent pairs over its compared pairs.
    """
    per_question = question_consistency(scored, families, baseline, question_ids)
    paired = pairs(scored, families, baseline)
    rows = []
    for family in _family_order(families, baseline):
        mine = per_question[per_question["family"] == family]
        compared = mine[mine["n_compared"] > 0]
        rows.append((family, "", len(compared), int(mine["n_compared"].sum()), int(mine["n_consistent"].sum()),
                     float(compared["consistency"].mean()) if len(compared) else float("nan")))
        for variant in (name for name, f in families.items() if f == family and name != baseline):
            cells = paired[paired["condition"] == variant]
            n, k = len(cells), int(cells["consistent"].sum())
            rows.append((family, variant, int(cells["question_id"].nunique()), n, k, k / n if n else float("nan")))
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def consistency_metrics(summary: pd.DataFrame) -> dict[str, float]:
    """The MLflow metrics of a :func:`consistency_summary`.

    Returns:
        ``consistency/<family>`` for each family row and ``consistency/<family>/<variant>`` for each variant.
    """
    metrics: dict[str, float] = {}
    for family, variant, value in zip(summary["family"], summary["variant"], summary["consistency"], strict=True):
        metrics[CONSISTENCY_PREFIX + family + (f"/{variant}" if variant else "")] = float(value)
    return metrics
