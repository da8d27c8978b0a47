r"""A reply that opens by writing a question of its own, with options that are not the displayed ones.

Small models often continue the prompt with a new numbered question ("\n\n1. Which of the following is
a renewable resource?\nA. coal\nB. ...") instead of answering. Its first option line looks like a
leading label ("A. coal") and an answer it gives to its own question looks like an answer statement,
but neither answers the question that was asked. :func:`opens_with_invented_question` recognises the
shape: the reply's first line is a question (it ends with "?", optionally numbered or marked
"Question"), and the option lines that follow show texts none of which is a displayed option's. A reply
that restates the asked question shows the displayed options and is read in full, as before. Without
the option texts the two cannot be told apart, so the rule needs them.
"""

from __future__ import annotations

import re

from prism.parsing.labels import Patterns
from prism.parsing.signals import Options, norm

# The first line: an optional number or "Question N:", text, and a question mark at its end.
_QUESTION_LINE = re.compile(
    r"\A\s*(?:#{1,6}[^\S\n]*)?[*_]{0,2}(?:(?:question|q)[^\S\n]*\d{0,3}[^\S\n]*[:.)][^\S\n]*|\d{1,3}[^\S\n]*[.)][^\S\n]*)?"
    r"[^\n]{0,600}?[?？][*_]{0,2}[^\S\n]*\n",
    re.IGNORECASE,
)
# How many option lines after the question are looked at.
_OPTION_LINES = 12


def opens_with_invented_question(text: str, patterns: Patterns, options: Options) -> bool:
    """Whether the reply opens with a question whose listed options are none of the displayed ones."""
    if not options.own:
        return False
    question = _QUESTION_LINE.match(text)
    if question is None:
        return False
    listed = 0
    for line in patterns.line.finditer(text, question.end()):
        if listed >= _OPTION_LINES:
            break
        end = text.find("\n", line.end())
        shown = norm(text[line.end() : len(text) if end < 0 else end])
        if shown in options.echo or any(own and shown.startswith(own) for own in options.own.values()):
            return False  # the displayed options: the reply restates the asked question
        listed += 1
    return listed >= 1
