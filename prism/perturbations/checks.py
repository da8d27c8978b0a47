"""The checks every variant passes before any model sees it.

``check_step`` holds one step to its contract: the options are the frozen options (same multiset, each
still the canonical option it claims to be, so the key maps through the permutation), the labels can be
told apart and are named by the closing, nothing outside the step's declared attributes changed, numbers
in the stem are untouched, the same seed gives the same variant, and the step's own ``verify`` holds.
``check_prompt`` then reads the rendered text: it ends with the output requirement and shows the stem and
every option line, in display order. A failure raises ``PerturbationError`` naming the question, the
condition and the step.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from prism.perturbations.labels import closing_for, label_kind
from prism.perturbations.step import Step
from prism.perturbations.variant import ATTRIBUTE_FIELDS, PerturbationError, Variant, option_lines
from prism.types import Prompt, Question

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def _options(question: Question, variant: Variant) -> str | None:
    if Counter(variant.options) != Counter(question.options):
        return (f"the option texts are not the frozen ones (same multiset): shown {list(variant.options)}, "
                f"frozen {list(question.options)}")
    if len(variant.canonical) != len(variant.options):
        return f"{len(variant.options)} options but {len(variant.canonical)} canonical labels"
    if sorted(variant.canonical) != sorted(question.labels):
        return f"the canonical labels {list(variant.canonical)} are not a permutation of {list(question.labels)}"
    # An item without a key has no correct option to follow; the position check below still covers it.
    key = None if question.answer is None else variant.canonical.index(question.answer)
    correct = None if question.answer is None else question.options[question.labels.index(question.answer)]
    if key is not None and variant.options[key] != correct:
        return (f"the key {question.answer} maps to position {key + 1}, which shows {variant.options[key]!r} "
                f"instead of the correct option {correct!r}")
    for position, (text, label) in enumerate(zip(variant.options, variant.canonical, strict=True)):
        if text != question.options[question.labels.index(label)]:
            return (f"position {position + 1} claims canonical option {label} but shows {text!r}, not "
                    f"{question.options[question.labels.index(label)]!r}")
    return None


def _labels(question: Question, variant: Variant, closing_template: str) -> str | None:
    if len(variant.labels) != len(variant.options):
        return f"{len(variant.options)} options but {len(variant.labels)} labels {list(variant.labels)}"
    if any(not label.strip() or label != label.strip() or " " in label for label in variant.labels):
        return f"a label is empty or has white space: {list(variant.labels)}"
    # The parser matches labels in any case, so "a" and "A" could not be told apart.
    if len({label.casefold() for label in variant.labels}) != len(variant.labels):
        return f"the labels {list(variant.labels)} repeat (ignoring case)"
    if label_kind(variant.labels) is None:
        return f"the labels {list(variant.labels)} are of no single kind the closing could name"
    expected = closing_for(closing_template, variant.labels)
    if variant.closing != expected:
        return f"the closing {variant.closing!r} does not name these labels; expected {expected!r}"
    return None


def check_variant(question: Question, variant: Variant, closing_template: str) -> str | None:
    """Check one variant against its frozen question; None when it passes, else what failed."""
    if variant.question_id != question.question_id:
        return f"the question id changed to {variant.question_id!r}"
    return _options(question, variant) or _labels(question, variant, closing_template)


def _declared(step: Step, before: Variant, after: Variant) -> str | None:
    allowed = {name for attribute in step.changes for name in ATTRIBUTE_FIELDS[attribute]}
    undeclared = sorted(before.changed_fields(after) - allowed)
    if undeclared:
        return f"changed {undeclared}, outside its declared attributes {sorted(step.changes)}"
    return None


def _numbers(before: Variant, after: Variant) -> str | None:
    if _NUMBER.findall(before.stem) != _NUMBER.findall(after.stem):
        return f"the numbers in the stem changed: {_NUMBER.findall(before.stem)} -> {_NUMBER.findall(after.stem)}"
    return None


def check_step(
    question: Question, step: Step, before: Variant, after: Variant, seed: int, closing_template: str
) -> str | None:
    """Check one step's output; None when it passes, else the first failed check and why."""
    checks: tuple[tuple[str, Callable[[], str | None]], ...] = (
        ("variant", lambda: check_variant(question, after, closing_template)),
        ("declared attributes", lambda: _declared(step, before, after)),
        ("numbers", lambda: _numbers(before, after)),
        ("same seed, same variant",
         lambda: None if step.apply(before, seed) == after else "applying it again with the same seed differs"),
        ("step", lambda: step.verify(before, after)),
    )
    for name, check in checks:
        problem = check()
        if problem is not None:
            return f"{name}: {problem}"
    return None


def check_prompt(variant: Variant, prompt: Prompt) -> str | None:
    """Check the rendered prompt; None when it passes, else what is wrong with the text."""
    text = prompt.text
    if not text.endswith(variant.closing):
        return f"the prompt does not end with the output requirement {variant.closing!r}"
    if variant.stem not in text:
        return "the stem is not in the prompt"
    position = 0
    for line in option_lines(variant):
        found = text.find(line, position)
        if found < 0:
            return f"the option line {line!r} is missing or out of order"
        position = found + len(line)
    if (prompt.displayed_labels, prompt.canonical_labels, prompt.displayed_options) != (
        variant.labels, variant.canonical, variant.options
    ):
        return "the prompt's label map is not the variant's"
    return None


def fail(question_id: str, condition: str, step: str, problem: str) -> PerturbationError:
    """The error that stops a run: which question, which condition, which step, what failed."""
    return PerturbationError(
        f"question {question_id!r}, condition {condition!r}, step {step}: check failed: {problem}. No model "
        "was asked anything; fix the step or its data in the condition set (prism/conf/conditions/)."
    )
