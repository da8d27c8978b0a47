"""Scoring: the parser's reading of a response, mapped to the canonical option and checked against the key.

This is the only module that uses the answer key. The parser (``prism.parsing``) returns the label as it
was *displayed* to the model; scoring maps it back to the canonical option through the prompt, so
conditions that relabel or reorder options stay comparable, and only then compares it with the key.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from prism.types import Parsed, Prompt

# Bumped on any change that could alter a scored record.
SCORER_VERSION = "1"

# The ``method`` of a scored record whose request failed (no completion, so nothing was parsed).
FAILED_METHOD = "failed"

# Keys that scoring adds to a raw record (docs/architecture.md, "Scored record").
SCORED_FIELDS: tuple[str, ...] = (
    "displayed",
    "answer",
    "recovered",
    "compliant",
    "method",
    "correct_answer",
    "correct",
    "parser_version",
    "scorer_version",
)


def score_record(
    raw: Mapping[str, Any],
    prompt: Prompt,
    parsed: Parsed | None,
    correct_answer: str,
    parser_version: str,
) -> dict[str, Any]:
    """Score one raw response record against the answer key.

    The result is a new dict (the input is deep-copied, never mutated): every key of ``raw`` plus
    :data:`SCORED_FIELDS`, which overwrite any same-named keys already in ``raw`` (so a scored record can
    be re-scored under a new parser):

    - ``displayed``: the label the parser recovered, as displayed to the model, or None for UNKNOWN;
    - ``answer``: the canonical label of that option (``prompt.canonical_for(displayed)``), or None;
    - ``recovered``, ``compliant``, ``method``: copied from ``parsed``;
    - ``correct_answer``: the canonical label of the correct option;
    - ``correct``: ``answer == correct_answer``; always False for UNKNOWN;
    - ``parser_version`` (as given) and ``scorer_version`` (:data:`SCORER_VERSION`).

    A failed request (``raw["error"]`` set, ``raw["response"]`` None) was never parsed: pass
    ``parsed=None``. It scores as ``displayed``/``answer`` None, ``recovered``/``compliant``/``correct``
    False and ``method`` ``"failed"``; it is not an observed response and metrics exclude it (they select
    observed responses by ``error`` being null).

    Args:
        raw: A raw response record (docs/architecture.md, "Raw response record").
        prompt: The prompt the response answered; it maps displayed labels to canonical ones.
        parsed: The parser's reading of ``raw["response"]``, or None when the request failed.
        correct_answer: Canonical label of the correct option (``Question.answer``).
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
    scored = copy.deepcopy(dict(raw))
    if parsed is None:
        displayed: str | None = None
        answer: str | None = None
        recovered = compliant = False
        method = FAILED_METHOD
    else:
        displayed = parsed.displayed
        answer = None if displayed is None else prompt.canonical_for(displayed)
        recovered, compliant, method = parsed.recovered, parsed.compliant, parsed.method
    scored.update(
        displayed=displayed,
        answer=answer,
        recovered=recovered,
        compliant=compliant,
        method=method,
        correct_answer=correct_answer,
        correct=answer is not None and answer == correct_answer,
        parser_version=parser_version,
        scorer_version=SCORER_VERSION,
    )
    return scored


def _check_consistent(
    raw: Mapping[str, Any], prompt: Prompt, parsed: Parsed | None, correct_answer: str
) -> None:
    """Raise ValueError when the pieces handed to :func:`score_record` do not belong together."""
    failed = raw.get("error") is not None
    if failed != (raw.get("response") is None):
        # Metrics tell observed from failed by `error` alone, so the two must agree (docs/architecture.md).
        raise ValueError(
            "a raw record must have either an error and a null response (failed request) or a response "
            f"and no error; got error={raw.get('error')!r}, response={raw.get('response')!r}"
        )
    if failed and parsed is not None:
        raise ValueError("a failed request (error set, response null) has nothing to parse: pass parsed=None")
    if not failed and parsed is None:
        raise ValueError("parsed is None but the record has a response: parse it before scoring")
    # A record scored against the wrong prompt would silently map labels to the wrong options.
    for key, expected in (("question_id", prompt.question_id), ("condition", prompt.condition)):
        if key in raw and raw[key] != expected:
            raise ValueError(f"record {key}={raw[key]!r} does not match the prompt's {expected!r}")
    if correct_answer not in prompt.canonical_labels:
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
