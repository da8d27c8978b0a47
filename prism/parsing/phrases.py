"""Labels that are phrases (survey scales: "Strongly disagree", "Tout à fait d'accord"), matched forgivingly.

A person reads "strongly-disagree", "Strongly  disagree", "tout a fait d'accord" and "Strongly disagree (4)"
as the label "Strongly disagree": spacing, hyphens, accents, case and a scale digit written beside it do
not change which option was meant. :func:`fold` is that reading of a string; :func:`phrase_label` reads a
whole answer part that is one label in this sense, and never when two labels fold to the same text.
:func:`tolerant` is the pattern a multi-word label is searched with inside a statement.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

_SEPARATORS = re.compile(r"[\s_\-‐‑–—/]+")
# A scale position written before or after the phrase: "4 - Agree", "(4) Agree", "Agree (4)", "Agree: 4".
_SCALE = re.compile(
    r"\A\s*[(\[]?\d{1,2}[)\].:]?\s*(?:[-–—:]\s*)?(?=\D)|(?<=\D)\s*(?:[-–—:]\s*)?[(\[]?\d{1,2}[)\]]?\s*\Z"
)
_ENDS = " .,;:!?\"'`*()[]{}‘’“”«»。、"
# Characters a multi-word label's words may be separated by in a response.
_GAP = r"[\s_\-‐‑–—]+"


def fold(value: str) -> str:
    """The text without accents, case, or differences of spacing and hyphenation; trimmed of punctuation."""
    decomposed = unicodedata.normalize("NFKD", value)
    bare = "".join(char for char in decomposed if not unicodedata.combining(char))
    return _SEPARATORS.sub(" ", bare.casefold()).strip(_ENDS)


def is_phrase(label: str) -> bool:
    """Whether a label is a phrase (two letters or more), not a letter, digit or numeral label."""
    return sum(char.isalpha() for char in label) >= 2 and not label.strip().isdigit()


def phrase_label(text: str, labels: Sequence[str], options: Sequence[str] | None = None) -> str | None:
    """The label whose phrase the whole text is, as :func:`fold` reads both; None when none or two.

    The phrase is the label itself when the label is a phrase ("Strongly disagree"), or the option's text
    ("A" showing "Strongly disagree"). Two phrases that fold to the same text name no single label.
    """
    if len(text) > 400:
        return None
    phrases = [(label, label) for label in labels if is_phrase(label)]
    phrases += [(label, option) for label, option in zip(labels, options or (), strict=False) if is_phrase(option)]
    if not phrases:
        return None
    candidates = {fold(text), fold(_SCALE.sub("", text))}
    hits = {label for label, phrase in phrases if fold(phrase) in candidates}
    return next(iter(hits)) if len(hits) == 1 else None


def tolerant(token: str) -> str:
    """The pattern of a label token: a multi-word label's words may be joined by any spacing or hyphens.

    A single-word token is matched as itself (escaped), so letter, digit and symbol labels keep their
    exact patterns.
    """
    words = [word for word in _SEPARATORS.split(token) if word]
    if len(words) < 2:
        return re.escape(token)
    return _GAP.join(re.escape(word) for word in words)
