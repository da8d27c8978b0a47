"""The third reading of every answer: each option's log-likelihood as a continuation of the prompt.

Most published multiple-choice figures (the Open LLM Leaderboard's ARC and MMLU, model cards) are not
parsed text: lm-evaluation-harness scores a question by the log-probability of each option's continuation
after the prompt and takes the likeliest, ``acc`` on the summed log-probability and ``acc_norm`` on the sum
divided by the option's length in characters. With ``generation.cloze=true`` PRISM reads the same numbers
for every cell, beside the generated answer, under every condition.

What is scored, as lm-eval scores it (facts taken from its source, no code):

- The continuation is the target delimiter (one space) and either the displayed label (``label``: `` B``, as
  its MMLU task does) or the displayed option text (``text``: `` <option text>``, as its ARC tasks do). A
  condition may fix its own target (``conditions=cloze``: C0 text, C1 label); elsewhere
  ``generation.cloze_target`` decides.
- Tokenisation (lm-eval's ``_encode_pair``): white space at the end of the context moves to the front of
  the continuation; the context and continuation are encoded together, and the continuation's tokens are
  those after the context's own encoding's length. The model sees the context's tokens then those.
- ``acc_norm`` divides by the length in characters of the choice string itself, without the delimiter.

No I/O here: the backends compute the log-probabilities and these functions name and score them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prism.errors import PrismError
from prism.types import Prompt

#: The raw-record fields of the reading, present only in runs with ``generation.cloze=true``.
CLOZE_FIELDS: tuple[str, ...] = ("cloze_logprobs", "cloze_tokens", "cloze_chars", "cloze_source")
#: The scored-record fields derived from them (absent when the record has no ``cloze_logprobs``).
CLOZE_SCORED_FIELDS: tuple[str, ...] = ("cloze_answer", "cloze_norm_answer", "cloze_correct", "cloze_norm_correct")
#: The continuation's forms: the displayed label, or the displayed option text.
TARGETS: tuple[str, ...] = ("label", "text")
#: lm-eval's ``target_delimiter``: the continuation starts with one space.
DELIMITER = " "
EMBEDDED = "embedded"
ECHO = "echo"


class ClozeError(PrismError, ValueError):
    """The cloze reading was asked for but cannot be read as meant; the message says what to do."""


@dataclass(frozen=True)
class Continuation:
    """One option's continuation.

    Attributes:
        label: The canonical label of the option.
        text: The continuation as appended to the context (the delimiter, then the label or the option text).
        chars: The choice's length in characters, without the delimiter (``acc_norm``'s divisor).
    """

    label: str
    text: str
    chars: int


def target_of(prompt: Prompt, default: str) -> str:
    """The continuation form for ``prompt``: its condition's own (``conditions=cloze``), else ``default``."""
    return prompt.cloze_target or default


def continuations(prompt: Prompt, default_target: str) -> list[Continuation]:
    """Each displayed option's continuation, in display order, keyed by its canonical label.

    Raises:
        ClozeError: If the target is not one of :data:`TARGETS`.
    """
    target = target_of(prompt, default_target)
    if target not in TARGETS:
        raise ClozeError(f"cloze target {target!r} is not one of {', '.join(TARGETS)}; set "
                         "generation.cloze_target=label or generation.cloze_target=text.")
    choices = prompt.displayed_labels if target == "label" else prompt.displayed_options
    return [Continuation(canonical, DELIMITER + choice, len(choice))
            for canonical, choice in zip(prompt.canonical_labels, choices, strict=True)]


def split_pair(context: str, continuation: str) -> tuple[str, str]:
    """Move white space ending the context to the front of the continuation (lm-eval's ``_encode_pair``)."""
    stripped = context.rstrip()
    moved = context[len(stripped):]
    return stripped, moved + continuation


def continuation_ids(encode: Callable[[str], list[int]], context: str, continuation: str,
                     where: str) -> tuple[list[int], list[int]]:
    """The context's tokens and the continuation's, split as lm-eval splits them.

    Args:
        encode: The model's tokenizer, as its completion call tokenizes a prompt (BOS included when it adds one).
        context: The text before the continuation.
        continuation: The continuation (:attr:`Continuation.text`).
        where: What to name in an error (question, condition, option).

    Raises:
        ClozeError: If the continuation tokenises to nothing.
    """
    context, continuation = split_pair(context, continuation)
    context_ids = encode(context)
    whole = encode(context + continuation)
    tail = whole[len(context_ids):]
    if not tail:
        raise ClozeError(f"{where}: the continuation {continuation!r} tokenises to nothing after the prompt, so it "
                         "has no log-likelihood. Use generation.cloze_target=text (or label), or a condition whose "
                         "options are not empty.")
    return context_ids, tail


def _best(scores: Sequence[tuple[str, float]]) -> str:
    """The label with the largest score; a tie goes to the first in display order."""
    best_label, best = scores[0]
    for label, value in scores[1:]:
        if value > best:
            best_label, best = label, value
    return best_label


def cloze_answers(logprobs: Mapping[str, float], chars: Mapping[str, int],
                  order: Sequence[str]) -> tuple[str, str]:
    """``acc``'s answer (argmax of the sum) and ``acc_norm``'s (argmax of the sum per character).

    Args:
        logprobs: Canonical label -> summed log-probability.
        chars: Canonical label -> the choice's length in characters.
        order: The canonical labels in display order (ties go to the first).
    """
    sums = [(label, float(logprobs[label])) for label in order]
    norms = [(label, float(logprobs[label]) / max(int(chars[label]), 1)) for label in order]
    return _best(sums), _best(norms)


def cloze_fields(record: Mapping[str, Any], prompt: Prompt, correct_answer: str | None) -> dict[str, Any]:
    """The scored-record fields of a raw record with a cloze reading (none without one, or for a failed request)."""
    logprobs = record.get("cloze_logprobs")
    if not logprobs or record.get("error") is not None:
        return {}
    answer, norm = cloze_answers(logprobs, record["cloze_chars"], prompt.canonical_labels)
    fields: dict[str, Any] = {"cloze_answer": answer, "cloze_norm_answer": norm}
    if correct_answer is not None:
        fields["cloze_correct"] = answer == correct_answer
        fields["cloze_norm_correct"] = norm == correct_answer
    return fields


def echo_logprob(token_logprobs: Sequence[float | None], offsets: Sequence[int], context_chars: int,
                 prompt_chars: int) -> tuple[float, int]:
    """The continuation's summed log-probability from a server's echoed prompt, and its token count.

    The continuation's tokens are the echoed ones whose text starts at or after the context's end and before
    the prompt's end (lm-eval reads the echo the same way; a token generated after the prompt is left out).

    Raises:
        ClozeError: If the echo has no continuation token, or a continuation token has no log-probability.
    """
    picked = [lp for lp, offset in zip(token_logprobs, offsets, strict=True) if context_chars <= offset < prompt_chars]
    if not picked:
        raise ClozeError("the server's echoed prompt has no token after the context, so the continuation has no "
                         "log-likelihood; check that the server echoes the whole prompt (echo=true).")
    if any(value is None for value in picked):
        raise ClozeError("the server's echoed prompt lacks a log-probability of a continuation token, so it cannot "
                         "serve the cloze reading; use the embedded backend.")
    return float(sum(v for v in picked if v is not None)), len(picked)
