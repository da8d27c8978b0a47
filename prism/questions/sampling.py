"""Seeded samples of a pool: plain (``freeze``) or drawn evenly across groups (``freeze_stratified``).

Both rank each question by the sha256 of ``seed:question_id``, so a sample depends on neither the source
order nor the rest of the pool, and a larger ``n`` extends the smaller sample with the same seed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from prism.questions.spec import DataError
from prism.types import Question, sha256_text


def _check_n(n: int, pool: int) -> None:
    if not 0 < n <= pool:
        raise DataError(
            f"cannot draw n={n} questions: n must be between 1 and the pool of {pool} eligible questions"
        )


def _ranked(questions: Sequence[Question], seed: int) -> list[Question]:
    return sorted(questions, key=lambda q: (sha256_text(f"{seed}:{q.question_id}"), q.question_id))


def freeze(questions: Sequence[Question], n: int, seed: int) -> list[Question]:
    """Draw ``n`` questions with ``seed`` so that a larger ``n`` extends the smaller sample.

    Each question's rank is the sha256 of ``seed:question_id``, so the order depends on neither the source
    order nor the rest of the pool, and the first ``n`` of the ranking are the sample.

    Raises:
        DataError: ``n`` is not between 1 and the pool size.
    """
    _check_n(n, len(questions))
    return _ranked(questions, seed)[:n]


def freeze_stratified(questions: Sequence[Question], n: int, seed: int) -> list[Question]:
    """Draw ``n`` questions in total, as evenly as possible across their groups, seeded.

    The groups are put in a seeded order (sha256 of ``seed:group``), each group's questions in their
    seeded rank, and the sample is taken round-robin: one question from each group in turn, skipping a
    group once it is used up. So every group gets ``n // k`` questions (of ``k`` groups), the first
    ``n % k`` groups of the seeded order one more, a small group gives all it has and the others share
    its shortfall the same way; and a larger ``n`` still extends the smaller sample.

    Raises:
        DataError: ``n`` is not between 1 and the pool size, or a question has no group.
    """
    _check_n(n, len(questions))
    by_group: dict[str, list[Question]] = defaultdict(list)
    for question in questions:
        if question.group is None:
            raise DataError(f"question {question.question_id!r} has no group to stratify by; set "
                            "dataset.fields.group or drop dataset.stratify.")
        by_group[question.group].append(question)
    order = sorted(by_group, key=lambda g: (sha256_text(f"{seed}:{g}"), g))
    queues = {group: _ranked(by_group[group], seed) for group in order}
    sample: list[Question] = []
    depth = 0
    while len(sample) < n:
        for group in order:
            if depth < len(queues[group]) and len(sample) < n:
                sample.append(queues[group][depth])
        depth += 1
    return sample
