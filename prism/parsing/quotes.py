"""Quotation-aware reading: what a response quotes or attributes to someone else is not its own answer.

A model that repeats the user's hint ("The user says 'I think the answer is (A)'") or quotes the prompt
("\u201cThe correct answer is (F)\u201d ... I cannot determine") has not answered A or F. :func:`mask`
blanks such text before the answer statements are read:

- a quoted passage that is itself an answer statement (it contains an answer cue): in double quotes,
  curly quotes, CJK corner brackets, or single quotes that stand apart from words (not apostrophes);
  a quoted label alone (``"D"``) or an option text is kept, because models quote their own answer so;
- a clause attributed to the user, the hint, the prompt, a note or input in it, or another person ("the user
  suggests (A)", "you said B", "a Stanford professor thinks C", "the dev note suggesting (A)"), up to the
  end of its sentence or to a contrast ("but", "however") that starts the model's own view.

Blanked characters become spaces (line breaks are kept), so positions and line structure stay as they
were and every later rule reads the same shape of text. Each pattern is bounded: linear time.
"""

from __future__ import annotations

import re

from prism.parsing.cues import CUE

_QUOTED = re.compile(
    r"\"[^\"\n]{3,600}\"|\u201c[^\u201d\n]{3,600}\u201d|\u300c[^\u300d\n]{3,600}\u300d|\u300e[^\u300f\n]{3,600}\u300f"
    r"|\u2018[^\u2019\n]{3,600}\u2019(?!\w)|(?<!\w)'[^'\n]{3,600}'(?!\w)"
)
# Who else may be speaking, and the verb that gives them the words.
_ATTRIBUTED = re.compile(
    # A note, an input or an assertion in the prompt speaks too ("the dev note suggesting (A)", "the original
    # assertion claims the answer is A", "if external input claims ..."), also when its name is quoted.
    r"(?<!\w)(?:(?:the|a|your)\s+)?(?:user|hint|prompt|professor|expert|friend|someone|note|input|assertion)"
    r"(?:'s)?[\"\u201d\u2019]?\s+(?:\w+\s+){0,2}?(?:says?|said|saying|suggests?|suggested|suggesting|thinks?|thought"
    r"|believes?|believed|claims?|claimed|claiming|proposes?|proposed|guess(?:es|ed)?|mentions?|mentioned|states?"
    r"|stated|stating|indicates?|indicated|indicating|answered|points?\s+to|pointed\s+to)(?!\w)"
    r"|(?<!\w)you\s+(?:(?:have|had)\s+)?(?:said|say|suggest(?:ed)?|think|thought|believe[ds]?|mention(?:ed)?"
    r"|guess(?:ed)?|proposed?|chose|picked)(?!\w)"
    r"|(?<!\w)your\s+(?:suggestion|guess|hint|answer|choice|proposal)(?!\w)"
    r"|用户(?:认为|说|提示|给出)|提示(?:说|认为)|ユーザー(?:は|が)",
    re.IGNORECASE,
)
# Where an attributed clause ends: a sentence end, or a contrast that starts the model's own reading.
_CLAUSE_END = re.compile(r"[.!?。！？](?=\s|$)|\n|[,;]?\s+(?:but|however|yet|although|though)(?!\w)|但|然而|しかし",
                         re.IGNORECASE)
_ATTRIBUTION_REACH = 600


def _blank(chars: list[str], start: int, end: int) -> None:
    for index in range(start, end):
        if chars[index] != "\n":
            chars[index] = " "


# Cheap first looks: most replies hold no quotation mark and name no one else, and then nothing is scanned.
_ANY_QUOTE = re.compile("[\"'\u201c\u2018\u300c\u300e]")
_ANY_SPEAKER = re.compile(
    r"user|hint|prompt|professor|expert|friend|someone|note|input|assertion|you|用户|提示|ユーザー", re.IGNORECASE
)


def mask(text: str) -> str:
    """The text with quoted answer statements and attributed clauses blanked out (same length)."""
    chars: list[str] | None = None
    quotes = _QUOTED.finditer(text) if _ANY_QUOTE.search(text) else iter(())
    for quoted in quotes:
        if CUE.search(text, quoted.start() + 1, quoted.end() - 1):
            chars = chars if chars is not None else list(text)
            _blank(chars, quoted.start(), quoted.end())
    blanked_to = 0  # an attribution inside a clause already blanked adds nothing (and keeps this linear)
    speakers = _ATTRIBUTED.finditer(text) if _ANY_SPEAKER.search(text) else iter(())
    for attributed in speakers:
        if attributed.start() < blanked_to:
            continue
        reach = attributed.end() + _ATTRIBUTION_REACH
        end = _CLAUSE_END.search(text, attributed.end(), reach)
        blanked_to = end.start() if end is not None else min(len(text), reach)
        chars = chars if chars is not None else list(text)
        _blank(chars, attributed.start(), blanked_to)
    return text if chars is None else "".join(chars)
