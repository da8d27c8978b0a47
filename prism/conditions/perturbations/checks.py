"""The checks every variant passes before any model sees it.

``check_step`` holds one step to its contract: the options are the frozen options (same multiset, each
still the canonical option it claims to be, so the key maps through the permutation), the labels can be
told apart and are named by the closing, nothing outside the step's declared attributes changed, numbers
in the stem are untouched, the same seed gives the same variant, and the step's own ``verify`` holds.
``check_prompt`` then reads the rendered text: it ends with the output requirement and shows the stem and
every option line, in display order, and its turns: the system turn is the variant's own and the
instruction sits in the turn the variant says, word for word. A failure raises ``PerturbationError``
naming the question, the condition and the step.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from prism.conditions.perturbations.labels import closing_for, label_kind
from prism.conditions.perturbations.step import Step
from prism.conditions.perturbations.variant import (
    ANSWER_SEPARATOR,
    ATTRIBUTE_FIELDS,
    PerturbationError,
    Variant,
    body_text,
    demonstration_answer,
    demonstration_text,
    option_lines,
    system_text,
    user_turns,
)
from prism.types import Prompt, Question, Turn

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def _options(question: Question, variant: Variant) -> str | None:
    if variant.added or variant.key != question.answer:
        return _moved_options(question, variant)
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


def _moved_options(question: Question, variant: Variant) -> str | None:
    """The options of a variant whose option set or key a step changed (attribute ``answer``).

    Every shown option is a frozen one or one a step added, each under its own canonical label; the only
    frozen option that may be left out is the correct one, and then the key is an added option; while the
    correct option is shown, it is the key.
    """
    added = dict(variant.added)
    clash = sorted(set(added) & set(question.labels))
    if clash or len(added) != len(variant.added):
        return f"an added option reuses the canonical label(s) {clash or list(added)} of another option"
    table = {**dict(zip(question.labels, question.options, strict=True)), **added}
    if len(variant.canonical) != len(variant.options) or len(set(variant.canonical)) != len(variant.canonical):
        return (f"the canonical labels {list(variant.canonical)} do not name each of the {len(variant.options)} "
                "options once")
    for position, (text, label) in enumerate(zip(variant.options, variant.canonical, strict=True)):
        if label not in table:
            return f"position {position + 1} claims canonical option {label}, which is neither frozen nor added"
        if text != table[label]:
            return f"position {position + 1} claims canonical option {label} but shows {text!r}, not {table[label]!r}"
    unshown = sorted(set(added) - set(variant.canonical))
    if unshown:
        return f"the added option(s) {unshown} are not shown"
    removed = [label for label in question.labels if label not in variant.canonical]
    if question.answer is None:
        return "a step changed the options or the key of an item without an answer key"
    if any(label != question.answer for label in removed):
        return (f"the frozen option(s) {[label for label in removed if label != question.answer]} were left out; "
                "only the correct option may be removed")
    if removed and variant.key not in added:
        return (f"the correct option {question.answer} was removed, so the key must be an added option, not "
                f"{variant.key!r}")
    if not removed and variant.key != question.answer:
        return f"the correct option {question.answer} is still shown, but the key says {variant.key!r}"
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


def _normalised(text: str) -> str:
    return " ".join(text.casefold().split())


def _demonstrations(question: Question, variant: Variant) -> str | None:
    """Demonstrations come from the question's frozen draw only, each once, none the question itself."""
    if variant.pool != question.demonstrations:
        return "the pool of demonstrations is not the question's frozen draw"
    drawn = {d.question_id: d for d in variant.pool}
    shown = [d.question_id for d in variant.demonstrations]
    if len(set(shown)) != len(shown):
        return f"a demonstration is shown twice: {shown}"
    for demonstration in variant.demonstrations:
        if drawn.get(demonstration.question_id) != demonstration:
            return f"demonstration {demonstration.question_id!r} is not one of the question's frozen draw"
        if (demonstration.question_id == question.question_id
                or _normalised(demonstration.question) == _normalised(question.question)):
            return f"demonstration {demonstration.question_id!r} is the question itself"
        if demonstration.answer is None:
            return f"demonstration {demonstration.question_id!r} has no answer to show"
        if len(demonstration.options) > len(variant.labels):
            return (f"demonstration {demonstration.question_id!r} has {len(demonstration.options)} options, more than "
                    f"the {len(variant.labels)} labels the question is shown with")
    if variant.shot_turns and not variant.demonstrations:
        return "the demonstrations are said to sit in turns, but none is shown"
    return None


def check_variant(question: Question, variant: Variant, closing_template: str) -> str | None:
    """Check one variant against its frozen question; None when it passes, else what failed."""
    if variant.question_id != question.question_id:
        return f"the question id changed to {variant.question_id!r}"
    return (_options(question, variant) or _labels(question, variant, closing_template)
            or _demonstrations(question, variant))


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


def check_prompt(variant: Variant, prompt: Prompt, question: Question | None = None) -> str | None:
    """Check the rendered prompt; None when it passes, else what is wrong with the text.

    With the ``question``, a frozen option the variant left out (:mod:`prism.conditions.perturbations.missing`) must
    appear nowhere in the text beyond what the question's remaining words already hold (:func:`removed_text`).
    """
    problem = _shown_demonstrations(variant, prompt)
    if problem is not None:
        return problem
    # The question's own part: after the demonstrations when they sit inline (their options are not its options).
    text = prompt.text
    if variant.demonstrations and not variant.shot_turns:
        text = text[len(text) - len(body_text(variant)):]
    problem = None if question is None else removed_text(question, variant, text)
    if problem is not None:
        return problem
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
    return _turns(variant, prompt)


def _shown_demonstrations(variant: Variant, prompt: Prompt) -> str | None:
    """Each demonstration, answered, sits where the variant says, in order, and the question comes last on its own.

    Inline: the last user turn is the instruction (if it sits there), each demonstration and its answer, then
    the question's own text, exactly. In turns: each demonstration is a user turn answered by its label in the
    assistant turn after it, and the last user turn is the question's own text alone.
    """
    if not variant.demonstrations:
        return None
    body = body_text(variant)
    shots = [(demonstration_text(variant, d), demonstration_answer(variant, d)) for d in variant.demonstrations]
    if variant.shot_turns:
        turns = [turn for turn in prompt.earlier_turns if turn.role != "system"]
        if len(turns) != 2 * len(shots):
            return f"{len(shots)} demonstrations should be {2 * len(shots)} earlier turns, not {len(turns)}"
        for index, (text, answer) in enumerate(shots):
            asked, answered = turns[2 * index], turns[2 * index + 1]
            if asked.role != "user" or not asked.content.endswith(text):
                return f"turn {2 * index + 1} after the system turn is not demonstration {index + 1} as a user turn"
            if answered != Turn("assistant", answer):
                return f"demonstration {index + 1} is not answered {answer!r} in the assistant turn after it"
        if prompt.text != body:
            return "the last user turn is not the question alone"
        return None
    position = 0
    for index, (text, answer) in enumerate(shots):
        found = prompt.text.find(f"{text}{ANSWER_SEPARATOR}{answer}", position)
        if found < 0:
            return f"demonstration {index + 1}, answered {answer!r}, is missing or out of order"
        position = found + len(text) + len(ANSWER_SEPARATOR) + len(answer)
    if not prompt.text.endswith(variant.format.paragraph + body) or len(prompt.text) - len(body) < position:
        return "the question's own text does not follow the demonstrations, a paragraph apart, at the end"
    return None


def _turns(variant: Variant, prompt: Prompt) -> str | None:
    """The system turn is the variant's own, and its instruction sits in exactly the turn the variant says."""
    system = system_text(variant)
    expected = ((Turn("system", system),) if system else ()) + user_turns(variant)[0]
    if prompt.earlier_turns != expected:
        return f"the turns before the user turn are {list(prompt.earlier_turns)}, not the variant's {list(expected)}"
    if variant.instruction:
        # With the demonstrations in turns, the user's part of the conversation is every user turn.
        asked = "\n".join(turn.content for turn in prompt.turns if turn.role == "user")
        user, other = (asked, system) if variant.instruction_turn == "user" else (system, asked)
        if variant.instruction not in user or variant.instruction in other:
            return (f"the instruction must sit in the {variant.instruction_turn} turn only, word for word: "
                    f"{variant.instruction!r}")
    return None


def removed_text(question: Question, variant: Variant, text: str) -> str | None:
    """Whether the text of a removed option shows through anywhere in the prompt ``text``.

    It must not be a shown option (ignoring case and edge space), and the prompt may hold it (ignoring
    case) no more often than the question's remaining words hold it anyway: the stem, the shown options and
    labels, the closing and the format (not the instruction, which the condition set writes). So an ARC
    stem that names its own answer ("... light ...") passes, while the option itself, or any trace a step
    left of it, fails.
    """
    shown = {option.strip().casefold() for option in variant.options}
    parts = (variant.stem, *variant.options, *variant.labels, variant.closing,
             variant.format.layout, variant.format.option, variant.format.option_separator, variant.format.paragraph)
    for label, option in zip(question.labels, question.options, strict=True):
        if label in variant.canonical:
            continue
        needle = option.strip().casefold()
        if needle in shown:
            return f"the removed option {label} ({option!r}) is still shown as an option"
        allowed = sum(part.casefold().count(needle) for part in parts)
        found = text.casefold().count(needle)
        if found > allowed:
            return (f"the removed option {label} ({option!r}) appears {found} times in the prompt, more than the "
                    f"{allowed} its remaining words hold")
    return None


def fail(question_id: str, condition: str, step: str, problem: str) -> PerturbationError:
    """The error that stops a run: which question, which condition, which step, what failed."""
    return PerturbationError(
        f"question {question_id!r}, condition {condition!r}, step {step}: check failed: {problem}. No model "
        "was asked anything; fix the step or its data in the condition set (prism/conf/conditions/)."
    )
