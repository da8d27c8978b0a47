"""Read the chosen option out of a model's free-text response, without ever seeing the answer key.

The rules, tried in order; the first that decides wins:

1. ``exact``: the stripped response is one label (any case). Only this is compliant.
2. ``bare``: one label wrapped in markdown or punctuation: ``(B)``, ``**B**``, ``B.``, ``[B]``.
3. Signals: the *leading* label (``B. mitochondria``) and every answer *statement* from a closed list
   ("the answer is B", "I choose B", "option B is correct", ...).
   - ``enumeration``: two or more lines start with different labels, so the model listed the options;
     UNKNOWN unless the statements name one single label (then ``statement``).
   - one label named in all -> ``leading`` (leading label alone) or ``statement``; several -> ``ambiguous``.
   A label followed on its line by exactly the text of *another* option ("B. 100 degrees Celsius" when
   that is C's text) names both, so it is ``ambiguous`` too: SmolLM2 does this often (see the test table).
4. ``option_text``: the whole response, trimmed of punctuation, is exactly one option's text.
5. ``none``: nothing recognised. An empty or blank response is ``empty``.

Labels are whatever was displayed (``A``-``D``, ``1``-``4``, ``i``-``iv``, symbols): patterns are built
from the escaped labels, never from an assumed alphabet, and a label outside ``labels`` (``E`` for a
four-option question) is never recovered. The parser is total: it returns a ``Parsed`` for any string.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from prism.types import Parsed

# Bump on ANY change that could alter what a response parses to: it is logged with every run.
PARSER_VERSION = "1"

METHODS = (
    "exact",
    "bare",
    "leading",
    "statement",
    "enumeration",
    "ambiguous",
    "option_text",
    "none",
    "empty",
)

# "Not preceded / followed by a letter or digit." \b is useless for symbol labels, and underscore must
# not count as a letter so that markdown ``_B_`` still reads as B.
_NO_ALNUM_BEFORE = r"(?<![^\W_])"
_NO_ALNUM_AFTER = r"(?![^\W_])"
# Markdown and punctuation a label may be wrapped in.
_OPEN = r"[(\[{'\"‘“*_]*"
_CLOSE = r"[)\]}'\"’”*_]*"
# Start a wrapped-label search only where a run of wrappers starts: trying every position inside a long
# run of "(((" or "***" would make the search quadratic.
_NOT_AFTER_OPEN = r"(?<![(\[{'\"‘“*_])"
# After a label inside a sentence: only punctuation, then white space or the end. This is what keeps
# "3.5 m/s" from naming label 3 and "B's" or "B-type" from naming B, while "B." and "(B)," still do.
_LABEL_END = r"(?=(?:[^\w\s]|_)*(?:\s|$))"

# Single-letter labels that are also English words. Followed by white space and a word they are the
# word ("the answer is a plant", "I think"), never the label. Only the lowercase article counts: a
# capital "A" after a cue ("the answer is A because ...") is how models write the label, while a
# capital article mid-sentence is rare. "A.", "(a)", "**A**" and "a," are always labels.
_WORD_LABELS = frozenset({"a", "i", "I"})
_FOLLOWED_BY_WORD = re.compile(r"\s+[^\W\d_]")

# The closed list of phrases that introduce an answer; the label is read right after the match.
# Label-independent, so compiled once. The gap after the cue takes white space, colons and markdown
# ("**Answer:** B") and an optional "option"/"choice"/"letter" word; brackets and quotes around the
# label are left to ``label_at``, so a label that itself contains one ("[1]") can still match.
_CUE = re.compile(
    _NO_ALNUM_BEFORE
    + r"(?:answer[*_\s]*(?:(?:is|would\s+be)" + _NO_ALNUM_AFTER + r"|:)"
    + r"|correct\s+(?:option|choice)[*_\s]*is" + _NO_ALNUM_AFTER
    + r"|I\s+(?:choose|select|pick)" + _NO_ALNUM_AFTER
    + r")[\s*_:]*"
    + r"(?:(?:option|choice|letter)" + _NO_ALNUM_AFTER + r"[\s:#]*)?",
    re.IGNORECASE,
)
# "B or C", "A and B": a hedge between labels is not an answer.
_HEDGE = re.compile(r"[)\]}'\"’”*_]*\s+(?:or|and)\s+", re.IGNORECASE)
# Characters trimmed from both ends before comparing a response with option texts: white space,
# zero-width characters, and punctuation or markdown around a phrase. Signs, units and currency ("-5",
# "5 °C", "$3") are kept so that distinct options stay distinct. ``str.strip`` keeps this linear.
_TRIM_CHARS = (
    "".join(c for c in map(chr, range(0x3001)) if c.isspace())
    + "\u200b\u200c\u200d\u2060\ufeff"
    + ".,;:!?'\"`*_()[]{}‘’“”"
)
# What separates a label from the option text echoed after it: "B. text", "(B) text", "B - text".
_ECHO_START = re.compile(r"[)\]}'\"’”*_.:]*[^\S\n]*(?:[-–—][^\S\n]+)?")


@dataclass(frozen=True)
class _Patterns:
    """Compiled patterns for one tuple of displayed labels."""

    matchers: tuple[tuple[str, re.Pattern[str]], ...]  # (label, full-match pattern), for resolving
    bare: re.Pattern[str]  # rule 2, on the stripped response
    line: re.Pattern[str]  # a line starting with a label and a delimiter (leading, enumeration)
    label_at: re.Pattern[str]  # a label at a given position, as the object of a cue
    suffix: tuple[re.Pattern[str], ...]  # "option X is correct", "X is the correct answer"


@lru_cache(maxsize=256)
def _patterns(labels: tuple[str, ...]) -> _Patterns | None:
    """Compile the label-dependent patterns once per label tuple; None if no label is usable."""
    tokens = sorted({label.strip() for label in labels if label.strip()}, key=len, reverse=True)
    if not tokens:
        return None
    # Longest first, so "iii" is tried before "ii" and "i".
    lab = "(?:" + "|".join(re.escape(token) for token in tokens) + ")"
    label = _NO_ALNUM_BEFORE + "(?P<label>" + lab + ")" + _NO_ALNUM_AFTER
    flags = re.IGNORECASE
    return _Patterns(
        matchers=tuple((lb, re.compile(re.escape(lb.strip()), flags)) for lb in labels if lb.strip()),
        bare=re.compile(r"[\W_]*?" + label + r"[\W_]*", flags),
        # Optional bullet, wrapper, label, then a delimiter (".", ")", "]" or ":" followed by white space,
        # or " - "), then more text. "3.5 m/s" has no white space after its "." and is not a label line.
        line=re.compile(
            r"^[^\S\n]*(?:[-*•+][^\S\n]+)?" + _OPEN + label
            + r"[*_]*(?:[.):\]][*_]*\s|[^\S\n]+[-–—][^\S\n])(?=\s*\S)",
            flags | re.MULTILINE,
        ),
        label_at=re.compile(_OPEN + label + _LABEL_END, flags),
        suffix=(
            re.compile(
                _NO_ALNUM_BEFORE + r"option[\s:#]*" + _OPEN + label + _CLOSE
                + r"\s+is\s+(?:the\s+)?correct" + _NO_ALNUM_AFTER,
                flags,
            ),
            re.compile(
                _NOT_AFTER_OPEN + _OPEN + label + _CLOSE
                + r"\s+is\s+the\s+correct\s+(?:answer|option|choice)" + _NO_ALNUM_AFTER,
                flags,
            ),
        ),
    )


def _resolve(token: str, patterns: _Patterns) -> str | None:
    """Map matched text back to the label exactly as displayed (an exact-case match wins)."""
    for label, _ in patterns.matchers:
        if label.strip() == token:
            return label
    for label, matcher in patterns.matchers:
        if matcher.fullmatch(token):
            return label
    return None


def _label_token_at(text: str, pos: int, patterns: _Patterns) -> re.Match[str] | None:
    """Match a label at ``pos`` as the object of a cue, unless it is the word "a" or "I"."""
    match = patterns.label_at.match(text, pos)
    if match is None:
        return None
    if match.group("label") in _WORD_LABELS and _FOLLOWED_BY_WORD.match(text, match.end("label")):
        return None  # the article "a" / the pronoun "I", not a label
    return match


def _label_at(text: str, pos: int, patterns: _Patterns) -> list[re.Match[str]]:
    """Return the label matches that a cue ending at ``pos`` names.

    Usually one; "B or C" names both, which later makes the response ambiguous rather than B.
    """
    match = _label_token_at(text, pos, patterns)
    if match is None:
        return []
    hedge = _HEDGE.match(text, match.end("label"))
    second = None if hedge is None else _label_token_at(text, hedge.end(), patterns)
    return [match] if second is None else [match, second]


def _statements(text: str, patterns: _Patterns) -> list[re.Match[str]]:
    """Every label match named by an answer statement, in no particular order."""
    found: list[re.Match[str]] = []
    for cue in _CUE.finditer(text):
        found.extend(_label_at(text, cue.end(), patterns))
    for pattern in patterns.suffix:
        found.extend(pattern.finditer(text))
    return found


def _norm(value: str) -> str:
    """Normalize an option text or response for comparison: trimmed, white space collapsed, any case."""
    return " ".join(value.strip(_TRIM_CHARS).split()).casefold()


def _named(text: str, match: re.Match[str], patterns: _Patterns, echo: dict[str, set[str]]) -> set[str]:
    """The label a signal names, plus any *other* option whose exact text follows it on the same line.

    SmolLM2 often writes a label with another option's text ("B. 100 degrees Celsius" where C is
    "100 degrees Celsius"); a careful reader cannot tell which it meant, so both are named.
    """
    label = _resolve(match.group("label"), patterns)
    if label is None:
        return set()
    rest = text[match.end("label") :].split("\n", 1)[0]
    start = _ECHO_START.match(rest)
    echoed = echo.get(_norm(rest[start.end() if start else 0 :]), set())
    return {label} if not echoed or label in echoed else {label} | echoed


def _answer(label: str, method: str, *, compliant: bool = False) -> Parsed:
    return Parsed(displayed=label, recovered=True, compliant=compliant, method=method)


def _unknown(method: str) -> Parsed:
    return Parsed(displayed=None, recovered=False, compliant=False, method=method)


def _signals(text: str, patterns: _Patterns, echo: dict[str, set[str]]) -> Parsed | None:
    """Rule 3: the leading label, listed options and answer statements; None when there are none."""
    listed = {m.start("label"): m for m in patterns.line.finditer(text)}
    statements = _statements(text, patterns)
    if len({_resolve(m.group("label"), patterns) for m in listed.values()} - {None}) >= 2:
        # A statement whose label merely starts one of the listed lines ("Answer:\nA. x\nB. y") is part
        # of the list, not a choice.
        chosen = [m for m in statements if m.start("label") not in listed]
        named = set().union(*(_named(text, m, patterns, echo) for m in chosen))
        return _answer(named.pop(), "statement") if len(named) == 1 else _unknown("enumeration")
    lead = patterns.line.match(text)
    leading = set() if lead is None else _named(text, lead, patterns, echo)
    named = set().union(leading, *(_named(text, m, patterns, echo) for m in statements))
    if not named:
        return None
    if len(named) > 1:
        return _unknown("ambiguous")
    return _answer(named.pop(), "statement" if statements else "leading")


def parse_response(text: str, labels: Sequence[str], options: Sequence[str] | None = None) -> Parsed:
    """Recover the option a response chose, as the label displayed to the model.

    Args:
        text: The model's response, verbatim.
        labels: The labels as displayed, in display order (matching is case-insensitive).
        options: The option texts in the same order, or None: they let rule 4 match a response that is
            an option's text, and rule 3 notice a label followed by another option's text.

    Returns:
        The parse: ``displayed`` is exactly one of ``labels`` or None (UNKNOWN), ``method`` is one of
        :data:`METHODS`. Never raises on any string.
    """
    stripped = text.strip()
    if not stripped:
        return _unknown("empty")
    # Normalized option text -> the labels showing it (several when a question repeats an option).
    echo: dict[str, set[str]] = {}
    for shown, option in zip(labels, options or (), strict=False):
        if shown.strip() and _norm(option):
            echo.setdefault(_norm(option), set()).add(shown)
    patterns = _patterns(tuple(labels))
    if patterns is not None:
        # Rule 1: exact.
        label = _resolve(stripped, patterns)
        if label is not None:
            return _answer(label, "exact", compliant=True)
        # Rule 2: one label wrapped in punctuation or markdown.
        bare = patterns.bare.fullmatch(stripped)
        if bare is not None and (label := _resolve(bare.group("label"), patterns)) is not None:
            return _answer(label, "bare")
        decided = _signals(stripped, patterns, echo)
        if decided is not None:
            return decided
    # Rule 4: the whole response is one option's text.
    hits = echo.get(_norm(stripped), set())
    if len(hits) == 1:
        return _answer(hits.pop(), "option_text")
    # Two options with the same text: no way to tell which was meant.
    return _unknown("ambiguous" if hits else "none")
