"""A condition set's few-shot demonstrations: how many each draw needs, which each prompt shows, their balance.

The demonstrations themselves are frozen with the question set (:mod:`prism.questions.demonstrations`) and
chosen by the ``shots`` steps (:mod:`prism.conditions.perturbations.shots`); this module reads a set's steps for
the run: :func:`demonstrations_needed` before the draw, :func:`label_balance` after it. A model may copy the
answer position the demonstrations favour, so the run reports, per condition, where the demonstrations' answers
sit and how often their majority position is the question's own key.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from prism.conditions.condition import Condition, ConditionSet
from prism.conditions.perturbations.build import build_variant
from prism.conditions.perturbations.labels import closing_for
from prism.conditions.perturbations.shots import demonstrations_needed as steps_need
from prism.conditions.perturbations.variant import Variant, base_variant
from prism.types import Question


def demonstrations_needed(condition_set: ConditionSet) -> int:
    """How many demonstrations each question's draw must hold for every condition of the set (0: none)."""
    return max((steps_need(c.steps or ()) for c in condition_set.conditions), default=0)


def conditions_with_demonstrations(condition_set: ConditionSet) -> list[str]:
    """The conditions that show demonstrations, in set order."""
    return [c.name for c in condition_set.conditions if steps_need(c.steps or ())]


def shown_variant(question: Question, condition: Condition, condition_set: ConditionSet) -> Variant:
    """The checked variant of ``question`` under ``condition`` (its demonstrations, labels and key)."""
    assert condition_set.base_format is not None
    if condition.steps is None:  # a template condition shows no demonstrations
        return base_variant(question, condition_set.base_format, closing_for(condition_set.closing, question.labels))
    return build_variant(question, condition.name, condition.steps, condition_set.base_format, condition_set.closing,
                         condition_set.seed, condition.keys)


def label_balance(questions: Sequence[Question], condition_set: ConditionSet) -> list[dict[str, Any]]:
    """Per condition with demonstrations: where their answers sit, and how often their majority is the key.

    Positions are counted in display order and named by the canonical label of that position (``A`` the first
    option line), so conditions that relabel stay comparable. ``majority_share`` is the share of prompts in which
    one position holds more of the demonstrations' answers than any other; ``majority_is_key`` the share in which
    that position is where the question's own key is shown (against a chance of one in the option count).

    Returns:
        One row per condition: ``condition``, ``prompts``, ``demonstrations`` (shown in all), ``answer_<label>``
        (share of the demonstrations' answers at each position), ``majority_share``, ``majority_is_key``.
    """
    rows = []
    for condition in condition_set.conditions:
        if not steps_need(condition.steps or ()):
            continue
        positions: Counter[int] = Counter()
        majority = majority_key = shown = 0
        width = 0
        for question in questions:
            variant = shown_variant(question, condition, condition_set)
            answers = Counter(d.labels.index(d.answer) for d in variant.demonstrations if d.answer is not None)
            positions.update(answers)
            shown += sum(answers.values())
            width = max(width, len(variant.labels))
            ranked = answers.most_common(2)
            if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]):
                majority += 1
                key = None if variant.key is None else variant.canonical.index(variant.key)
                majority_key += int(ranked[0][0] == key)
        row: dict[str, Any] = {"condition": condition.name, "prompts": len(questions), "demonstrations": shown}
        letters = [chr(ord("A") + i) for i in range(width)]
        row.update({f"answer_{letter}": positions[i] / shown if shown else 0.0 for i, letter in enumerate(letters)})
        row["majority_share"] = majority / len(questions) if questions else 0.0
        row["majority_is_key"] = majority_key / len(questions) if questions else 0.0
        rows.append(row)
    return rows
