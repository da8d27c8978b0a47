r"""Structured answers: the value of an answer-like key in JSON or a JSON-like object.

Evaluation harnesses that ask for JSON get ``{"answer": "B"}``, but models also write other keys
(``answer_choice``, ``choice``, ``selected_option``, ``respuesta``, ``réponse``, ``Antwort``, ``答案``,
``回答``), numbers where the labels are digits (``{"respuesta": 3}``), single quotes (Python's dict repr,
``{'answer': '2'}``), Markdown fences around the object, an object that was cut off (``{"answer": "B``)
or one followed by more text. :func:`answer_field` finds the answer-like fields wherever they stand and
returns the value the rules read (the rest of the object is the model's reasoning).

Only *quoted* keys count (``"answer":``, ``'choice':``): a plain ``Answer: B`` line is an answer cue
(:mod:`prism.parsing.cues`), not a field. A key must be one of the closed list below as a whole
(``"answer_explanation"`` is not an answer), with any case and with spaces, hyphens or underscores
between its words. Every pattern here is one bounded pass, so the reader stays linear.
"""

from __future__ import annotations

import re

# Answer-like keys, English first, then the languages the cues know. Word separators are free.
_SEP = r"[\s_-]?"
_KEYS = (
    rf"(?:final{_SEP}|correct{_SEP}|chosen{_SEP}|selected{_SEP}|best{_SEP})?"
    rf"(?:answer(?:{_SEP}(?:choice|letter|option|label|key))?|choice|prediction)",
    # "option" alone is not a key: a model that lists the options as objects writes one per option.
    rf"(?:correct|chosen|selected|best){_SEP}option",
    rf"respuesta(?:{_SEP}(?:correcta|final))?|opci[oó]n{_SEP}(?:correcta|elegida)|elecci[oó]n",
    rf"r[ée]ponse(?:{_SEP}(?:correcte|finale))?|choix",
    rf"(?:richtige{_SEP}|finale{_SEP})?antwort|auswahl",
    r"(?:最终|正确)?(?:答案|选项|選項)|答え|正解|解答|回答",
    r"(?:правильный\s+)?ответ",
)
_KEY = r"(?:" + "|".join(_KEYS) + r")"
# A quoted key and its separator. The key's quotes must match; the value starts after the colon.
_FIELD = re.compile(r"([\"'])" + _KEY + r"\1\s*[:=]\s*", re.IGNORECASE)
# Values: a quoted string (possibly cut off before its closing quote), a number, a bare token, or a
# list of quoted strings. Each is bounded so that a huge value cannot make a match quadratic.
_DOUBLE = re.compile(r'"((?:[^"\\]|\\.){0,2000})("?)', re.DOTALL)
_SINGLE = re.compile(r"'((?:[^'\\\n]|\\.){0,2000})('?)")
_NUMBER = re.compile(r"-?\d{1,6}(?:\.\d{1,6})?(?![\w.])")
_BARE = re.compile(r"[^\W_]{1,3}(?![\w])")
_LIST = re.compile(r"\[\s*((?:\"[^\"\n]{0,200}\"|'[^'\n]{0,200}'|\d{1,6}|[^\W_]{1,3})"
                   r"(?:\s*,\s*(?:\"[^\"\n]{0,200}\"|'[^'\n]{0,200}'|\d{1,6}|[^\W_]{1,3})){0,20})\s*\]?")
_LIST_ITEM = re.compile(r"\"([^\"\n]{0,200})\"|'([^'\n]{0,200})'|(\d{1,6}|[^\W_]{1,3})")
_ESCAPE = re.compile(r"\\(.)")
_NULL = frozenset({"null", "none", "nan", "true", "false"})


def _unescape(value: str) -> str:
    return _ESCAPE.sub(lambda m: {"n": "\n", "t": "\t"}.get(m[1], m[1]), value)


def _value_at(text: str, pos: int) -> list[str] | None:
    """The value that starts at ``pos``: one string, several (a list), or None (no value, or null)."""
    for pattern in (_DOUBLE, _SINGLE):
        match = pattern.match(text, pos)
        if match is not None:
            return [_unescape(match[1]).strip()]
    listed = _LIST.match(text, pos)
    if listed is not None:
        items = [next(group for group in item.groups() if group is not None).strip()
                 for item in _LIST_ITEM.finditer(listed[1])]
        return items or None
    for pattern in (_NUMBER, _BARE):
        match = pattern.match(text, pos)
        if match is not None:
            return None if match[0].casefold() in _NULL else [match[0]]
    return None


def answer_fields(text: str) -> list[list[str]]:
    """Every answer-like field's value, in order; a list value gives several strings."""
    values = []
    for field in _FIELD.finditer(text):
        value = _value_at(text, field.end())
        if value is not None:
            values.append(value)
    return values


def answer_field(text: str) -> str | None:
    """The value the rules read, or None when the text holds no answer-like field with a value.

    The last field with a non-empty value is the answer (the earlier ones are drafts or the fields of
    few-shot examples the model repeated). A list of several values is returned joined with " or ",
    which the statement rules read as a hedge between them.
    """
    chosen: list[str] | None = None
    for value in answer_fields(text):
        if any(item for item in value):
            chosen = value
    if chosen is None:
        return None
    items = [item for item in chosen if item]
    return items[0] if len(items) == 1 else "The answer is " + " or ".join(items)
