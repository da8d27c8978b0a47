"""Patterns built from the displayed labels, and the way a matched token maps back to its label.

Labels are whatever was displayed (``A``-``J``, ``a``-``j``, ``1``-``10``, ``i``-``x``, symbols): patterns
are built from the escaped labels, never from an assumed alphabet, longest first so that ``iii`` is
tried before ``ii`` and ``10`` before ``1``. Matching ignores case, so a lowercase label answered in
upper case still reads as that label; an exact-case match wins when two labels differ only in case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from prism.parsing.phrases import tolerant
from prism.parsing.text import CJK, normalize

# "Not preceded / followed by a letter or digit." \b is useless for symbol labels; underscore must not
# count as a letter so that markdown ``_B_`` still reads as B; CJK characters do not count either.
NO_ALNUM_BEFORE = rf"(?<![^\W_{CJK}])"
NO_ALNUM_AFTER = rf"(?![^\W_{CJK}])"
# Markdown and punctuation a label may be wrapped in.
OPEN = r"[(\[{'\"‘“*_「『【]*"
CLOSE = r"[)\]}'\"’”*_」』】]*"
# Start a wrapped-label search only where a run of wrappers starts: trying every position inside a long
# run of "(((" or "***" would make the search quadratic.
_NOT_AFTER_OPEN = r"(?<![(\[{'\"‘“*_「『【])"
# After a label inside a sentence: only punctuation, then white space, the end or a CJK character. This
# keeps "3.5 m/s" from naming label 3 and "B's" or "B-type" from naming B, while "B." and "(B)," do.
_LABEL_END = rf"(?=(?:[^\w\s]|_)*(?:\s|$|[{CJK}])|[\u3000-\u303f])"  # or CJK punctuation: "B、D"
# Words a completion-style reply may put before its label, continuing the prompt's own cue
# ("... the answer is" -> " most likely D, backpack.").
_FILLER = r"(?:most[^\S\n]+likely[^\S\n]+)?"
# "Option B", "Choice B" at the start of a line.
_OPTION_WORD = r"(?:(?:option|choice)[^\S\n]*[:#]?[^\S\n]*)?"

# Single-letter labels that are also English words. Followed by white space and a word they are the
# word ("the answer is a plant", "I think"), never the label. Only the lowercase article counts: a
# capital "A" after a cue ("the answer is A because ...") is how models write the label, while a
# capital article mid-sentence is rare. "A.", "(a)", "**A**" and "a," are always labels.
_WORD_LABELS = frozenset({"a", "i", "I"})
_FOLLOWED_BY_WORD = re.compile(r"\s+[^\W\d_]")


@dataclass(frozen=True)
class Patterns:
    """Compiled patterns for one tuple of displayed labels."""

    matchers: tuple[tuple[str, str, re.Pattern[str]], ...]  # (label, its normalized token, full match)
    bare: re.Pattern[str]  # the stripped response is one wrapped label
    line: re.Pattern[str]  # a line starting with a label and a delimiter, or a label alone on its line
    head: re.Pattern[str]  # a label at the start, then anything on its line (label + its own text)
    label_at: re.Pattern[str]  # a label at a given position, as the object of a cue
    closing: re.Pattern[str]  # "... is (E)." / "... endoscopy (H)." at the very end
    suffix: tuple[re.Pattern[str], ...]  # "option X is correct", "X is the correct answer"


@lru_cache(maxsize=256)
def patterns_for(labels: tuple[str, ...]) -> Patterns | None:
    """Compile the label-dependent patterns once per label tuple; None if no label is usable."""
    normalized = [(label, normalize(label).strip()) for label in labels]
    normalized = [(label, token) for label, token in normalized if token]
    tokens = sorted({token for _, token in normalized}, key=len, reverse=True)
    if not tokens:
        return None
    # A multi-word label ("Strongly disagree") may be written with other spacing or hyphens.
    lab = "(?:" + "|".join(tolerant(token) for token in tokens) + ")"
    label = NO_ALNUM_BEFORE + "(?P<label>" + lab + ")" + NO_ALNUM_AFTER
    flags = re.IGNORECASE
    start = r"^[^\S\n]*(?:[-*•+][^\S\n]+)?" + _FILLER + _OPTION_WORD + OPEN + label
    return Patterns(
        matchers=tuple((lb, token, re.compile(tolerant(token), flags)) for lb, token in normalized),
        # "(B)", "**B**", and "(Option C)" / "**Choice B**" with the option word inside the wrapping.
        bare=re.compile(r"[\W_]*?(?:(?<=[(\[{*_])(?:option|choice)[^\S\n]*[:#]?[^\S\n]*)?" + label + r"[\W_]*", flags),
        # After the label: a delimiter (".", ")", "]", ":", ",", a closing quote, or several: "(B).")
        # then white space, or " - ", and more text; or the end of the line ("B\n\nBecause ...").
        # "3.5 m/s" has no white space after its "." and is not a label line.
        line=re.compile(
            start + r"[*_]*(?:(?:[)\]'\"’”」』】]+[*_]*[.:,]?|[.:,])[*_]*\s(?=\s*\S)|[^\S\n]+[-–—][^\S\n](?=\s*\S)"
            + r"|[)\]'\"’”.:*_]*[^\S\n]*$)",
            flags | re.MULTILINE,
        ),
        head=re.compile(start + CLOSE, flags),
        label_at=re.compile(OPEN + label + _LABEL_END, flags),
        closing=re.compile(
            r"(?:" + NO_ALNUM_BEFORE + r"(?:is|are|be|to)[^\S\n]*:?[^\S\n]*(?:(?:option|choice)[^\S\n]+)?" + OPEN
            + r"|[(\[]|(?:选项|選択肢)[^\S\n]*" + OPEN + ")" + label + CLOSE
            + r"[.!。]?[*_]*\s*(?:answer[^\S\n]*:?\s*)?\Z",
            flags,
        ),
        suffix=(
            re.compile(
                NO_ALNUM_BEFORE + r"option[\s:#]*" + OPEN + label + CLOSE
                + r"\s+(?:is\s+(?:the\s+)?correct|(?:is\s+)?the\s+(?:correct|right|best)\s+(?:answer|option|choice))"
                + NO_ALNUM_AFTER,
                flags,
            ),
            # "X is the correct answer", and in Spanish, French, German and Japanese "B es la correcta",
            # "C est la bonne réponse", "B ist richtig", "Bが正解" (one pattern: one scan of the text).
            re.compile(
                _NOT_AFTER_OPEN + OPEN + label + CLOSE
                + r"(?:\s+is\s+the\s+(?:correct|right|best|better)\s+(?:answer|option|choice|explanation|statement|one)"
                + NO_ALNUM_AFTER
                + r"|\s+(?:es|est|ist)\s+(?:la\s+|die\s+)?(?:correcta|respuesta\s+correcta|correcte|bonne\s+réponse"
                + r"|richtig|korrekt|richtige\s+Antwort)" + NO_ALNUM_AFTER + r"|\s*(?:が|は)(?:正解|正しい))",
                flags,
            ),
            # Chinese: "选项C正确", "选项A是正确答案", "A项正确" (not "C是错误的").
            re.compile(
                r"(?:选项|選択肢)[^\S\n]*" + OPEN + label + CLOSE
                + r"[^\S\n]*(?:是|为)?(?:正确|符合题意)(?:答案|选项|的)?(?![^\n。]{0,2}错)",
                flags,
            ),
        ),
    )


def resolve(token: str, patterns: Patterns) -> str | None:
    """Map matched text back to the label exactly as displayed (an exact-case match wins)."""
    for label, normalized, _ in patterns.matchers:
        if normalized == token:
            return label
    for label, _, matcher in patterns.matchers:
        if matcher.fullmatch(token):
            return label
    return None


def label_token_at(text: str, pos: int, patterns: Patterns) -> re.Match[str] | None:
    """Match a label at ``pos`` as the object of a cue, unless it is the word "a" or "I"."""
    match = patterns.label_at.match(text, pos)
    if match is None:
        return None
    if match.group("label") in _WORD_LABELS and _FOLLOWED_BY_WORD.match(text, match.end("label")):
        return None  # the article "a" / the pronoun "I", not a label
    return match
