"""What a source log holds, one cell at a time, whatever tool wrote it (:class:`SourceCell`).

Each reader (``lm_eval``, ``inspect_log``) turns its tool's samples into these; ``build`` turns them into an
ordinary PRISM run. A cell's question is already canonical (labels ``A``.. in the doc's order); the labels
the source's prompt displayed are kept beside it, so PRISM's parser reads the response against what the
model saw, and the source's own extracted answer is mapped to a canonical label the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from prism.types import Question, Turn, sha256_text

LETTERS = tuple("ABCDEFGHIJ")


@dataclass(frozen=True)
class SourceCell:
    """One (question, prompt, repetition) of a source log.

    Attributes:
        where: ``FILE:LINE`` (lm-eval) or ``FILE, sample ID`` (inspect): named in every error about it.
        question: The canonical question (labels ``A``.. in doc order, the key a canonical label).
        displayed_labels: The labels the prompt showed, in display order.
        canonical_labels: The canonical label of the option at each displayed position.
        displayed_options: The option texts in display order.
        text: The last user turn as sent (for a log-likelihood task: the context the options continue).
        earlier_turns: The turns before it (a system turn, few-shot turns).
        repetition: 0-based repetition (lm-eval's ``repeats``, inspect's epochs).
        response: The generated text; None for a log-likelihood cell, which generated none.
        finish_reason: Why generation stopped, when the source says.
        source_answer: The source's own extracted answer as a canonical label, None when it found none.
        source_extracted: The source's extracted answer exactly as it recorded it ("" when none).
        cloze_logprobs: Log-likelihood cells: canonical label -> the option's log-likelihood, unchanged.
        cloze_chars: Log-likelihood cells: canonical label -> the option text's length in characters.
        source_metrics: The source's own per-sample scores (lm-eval's ``acc``, ``exact_match``, ...).
    """

    where: str
    question: Question
    displayed_labels: tuple[str, ...]
    canonical_labels: tuple[str, ...]
    displayed_options: tuple[str, ...]
    text: str
    earlier_turns: tuple[Turn, ...] = ()
    repetition: int = 0
    response: str | None = None
    finish_reason: str | None = None
    source_answer: str | None = None
    source_extracted: str = ""
    cloze_logprobs: dict[str, float] | None = None
    cloze_chars: dict[str, int] | None = None
    source_metrics: dict[str, float] = field(default_factory=dict)

    @property
    def form(self) -> str:
        """The prompt's form: its turns with the stem, option texts and labels blanked (one condition each)."""
        return prompt_form(self.question, self.displayed_labels, (*self.earlier_turns, Turn("user", self.text)))


def prompt_form(question: Question, labels: tuple[str, ...], turns: tuple[Turn, ...]) -> str:
    """The turns' text with this question's stem, options and displayed labels replaced by placeholders.

    Two prompts of one template differ only in those, so they share a form; another template (a changed
    instruction, another label style) is another form.
    """
    parts = []
    for turn in turns:
        text = turn.content.replace(question.question, "{question}")
        for option in sorted(question.options, key=len, reverse=True):  # a longer option may hold a shorter one
            text = text.replace(option, "{option}")
        pattern = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
        text = re.sub(rf"(?m)^(\s*\(?)(?:{pattern})(?=[.):\]]?\s+\{{option\}})", r"\1{label}", text)
        parts.append(f"{turn.role}: {text}")
    return "\n".join(parts)


def question_id(dataset: str, own: str | None, stem: str, options: tuple[str, ...]) -> str:
    """The doc's own id, else ``<dataset>-`` and 16 hex of the stem and options (PRISM's rule for id-less sets)."""
    if own:
        return own
    return f"{dataset}-{sha256_text(stem + chr(31) + chr(31).join(options))[:16]}"


def displayed(text: str, options: tuple[str, ...], own: tuple[str, ...] | None,
              canonical: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """How a prompt shows a question's options: (displayed labels, canonical labels, option texts), display order.

    Each option's label is the one its text follows on a line (``A. text``, ``(A) text``, ``A) text``,
    ``1: text``), so a prompt that shows the doc's own labels, letters, numbers or a shuffled order is read as
    it is. A prompt that shows not every option so (a log-likelihood context, which holds none) gets the
    doc's own labels, else letters, in doc order.
    """
    found: list[tuple[int, str, str, str]] = []
    for option, label in zip(options, canonical, strict=True):
        match = re.search(rf"(?m)^[ \t]*\(?([A-Za-z0-9]{{1,3}})[.):\]]?[ \t]+{re.escape(option)}[ \t]*$", text)
        if match is None:
            break
        found.append((match.start(), match.group(1), label, option))
    if len(found) == len(options) and len({f[1] for f in found}) == len(found):
        found.sort()
        return tuple(f[1] for f in found), tuple(f[2] for f in found), tuple(f[3] for f in found)
    return own or LETTERS[: len(options)], canonical, options


def canonical_answer(extracted: Any, labels: tuple[str, ...], canonical: tuple[str, ...]) -> str | None:
    """The canonical label of a source's extracted answer, or None when it is none of the displayed labels."""
    text = str(extracted).strip() if extracted is not None else ""
    for shown, canonical_label in zip(labels, canonical, strict=True):
        if text == shown or text.rstrip(".)").lstrip("(") == shown:
            return canonical_label
    return None


def question_of(dataset: str, split: str, own_id: str | None, stem: str, options: tuple[str, ...],
                answer_index: int | None, group: str | None = None) -> Question:
    """A canonical question (labels ``A``.. in the given order)."""
    labels = LETTERS[: len(options)]
    return Question(question_id(dataset, own_id, stem, options), stem, options, labels,
                    None if answer_index is None else labels[answer_index], dataset, split, group)
