"""Scoring: the parser's reading of a response, mapped to the canonical option and checked against the key.

This is the only module that uses the answer key. The parser (``prism.parsing``) returns the label as it
was *displayed* to the model; scoring maps it back to the canonical option through the prompt, so
conditions that relabel or reorder options stay comparable, and only then compares it with the key.
"""

from __future__ import annotations

from dataclasses import fields

from prism.records import RawRecord, ScoredRecord
from prism.types import Parsed, Prompt

# Bumped on any change that could alter a scored record.
SCORER_VERSION = "1"

# The ``method`` of a scored record whose request failed (no completion, so nothing was parsed).
FAILED_METHOD = "failed"

# Keys that scoring adds to a raw record (docs/architecture.md, "Scored record").
SCORED_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(ScoredRecord) if f.name != "raw")


def score_record(
    raw: RawRecord,
    prompt: Prompt,
    parsed: Parsed | None,
    correct_answer: str | None,
    parser_version: str,
) -> ScoredRecord:
    """Score one raw response record against the answer key.

    The one place a scored record is made: ``raw`` plus :data:`SCORED_FIELDS` (a scored record is
    re-scored under a new parser by scoring its ``raw`` again):

    - ``displayed``: the label the parser recovered, as displayed to the model, or None for UNKNOWN;
    - ``answer``: the canonical label of that option (``prompt.canonical_for(displayed)``), or None;
    - ``recovered``, ``compliant``, ``method``: copied from ``parsed``;
    - ``correct_answer``: the canonical label of the correct option;
    - ``correct``: ``answer == correct_answer``; always False for UNKNOWN;
    - for an item without an answer key (``correct_answer`` None, a survey item) both ``correct_answer``
      and ``correct`` are None: there is nothing to be right about, and metrics leave accuracy out;
    - ``parser_version`` (as given) and ``scorer_version`` (:data:`SCORER_VERSION`).

    A failed request (``raw.error`` set, ``raw.response`` None) was never parsed: pass
    ``parsed=None``. It scores as ``displayed``/``answer`` None, ``recovered``/``compliant``/``correct``
    False and ``method`` ``"failed"``; it is not an observed response and metrics exclude it (they select
    observed responses by ``error`` being null).

    Args:
        raw: A raw response record (docs/architecture.md, "Raw response record").
        prompt: The prompt the response answered; it maps displayed labels to canonical ones.
        parsed: The parser's reading of ``raw.response``, or None when the request failed.
        correct_answer: Canonical label of the correct option (``Question.answer``), or None without a key.
        parser_version: Version of the parser that produced ``parsed`` (``prism.parsing.PARSER_VERSION``).

    Returns:
        The scored record.

    Raises:
        ValueError: If the inputs contradict each other: ``raw`` has both an error and a response (or
            neither), ``parsed`` is None for an observed response (or given for a failed one), the record
            belongs to another question or condition than ``prompt``, ``correct_answer`` is not one of the
            prompt's options, or ``parsed`` is inconsistent (recovered without a label, or a label the
            prompt did not display).
    """
    _check_consistent(raw, prompt, parsed, correct_answer)
    if parsed is None:
        displayed: str | None = None
        answer: str | None = None
        recovered = compliant = False
        method = FAILED_METHOD
    else:
        displayed = parsed.displayed
        answer = None if displayed is None else prompt.canonical_for(displayed)
        recovered, compliant, method = parsed.recovered, parsed.compliant, parsed.method
    return ScoredRecord(
        raw=raw,
        displayed=displayed,
        answer=answer,
        recovered=recovered,
        compliant=compliant,
        method=method,
        correct_answer=correct_answer,
        correct=None if correct_answer is None else answer is not None and answer == correct_answer,
        parser_version=parser_version,
        scorer_version=SCORER_VERSION,
    )


def _check_consistent(raw: RawRecord, prompt: Prompt, parsed: Parsed | None, correct_answer: str | None) -> None:
    """Raise ValueError when the pieces handed to :func:`score_record` do not belong together."""
    failed = raw.error is not None
    if failed != (raw.response is None):
        # Metrics tell observed from failed by `error` alone, so the two must agree (docs/architecture.md).
        raise ValueError(
            "a raw record must have either an error and a null response (failed request) or a response "
            f"and no error; got error={raw.error!r}, response={raw.response!r}"
        )
    if failed and parsed is not None:
        raise ValueError("a failed request (error set, response null) has nothing to parse: pass parsed=None")
    if not failed and parsed is None:
        raise ValueError("parsed is None but the record has a response: parse it before scoring")
    # A record scored against the wrong prompt would silently map labels to the wrong options.
    for key, got, expected in (("question_id", raw.question_id, prompt.question_id),
                               ("condition", raw.condition, prompt.condition)):
        if got != expected:
            raise ValueError(f"record {key}={got!r} does not match the prompt's {expected!r}")
    if correct_answer is not None and correct_answer not in prompt.canonical_labels:
        raise ValueError(
            f"correct_answer {correct_answer!r} is not one of the canonical labels {prompt.canonical_labels}"
        )
    if parsed is None:
        return
    if parsed.recovered != (parsed.displayed is not None):
        raise ValueError(f"inconsistent Parsed: recovered={parsed.recovered} displayed={parsed.displayed!r}")
    if parsed.displayed is not None and parsed.displayed not in prompt.displayed_labels:
        raise ValueError(
            f"parsed label {parsed.displayed!r} is not one of the displayed labels {prompt.displayed_labels}"
        )
