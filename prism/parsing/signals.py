r"""Signals in the answer part, and the one decision they lead to.

Two kinds of signal name labels:

- the *leading* label: the response starts with a label and a delimiter (``B. mitochondria``,
  ``(B) text``, ``B: text``, ``Option B``), a label alone on the first line (``B\n\nBecause ...``), or
  a label followed on its line by its own option text (``D, backpack``);
- answer *statements*: a cue from :mod:`prism.parsing.cues` followed by a label ("the answer is B",
  ``\boxed{B}``), "option B is correct", "B is the correct answer", or a cue followed by exactly one
  option's text ("The answer is mitochondria.").

A label followed on its line by exactly the text of *another* option ("B. 100 degrees Celsius" when that
is C's text) names both: a reader cannot tell which was meant.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from prism.parsing.cues import CUE, FINAL, HEDGE, IS_CUE
from prism.parsing.labels import Patterns, label_token_at, resolve

# Characters trimmed from both ends before comparing a response with option texts: white space,
# zero-width characters, and punctuation or markdown around a phrase. Signs, units and currency ("-5",
# "5 °C", "$3") are kept so that distinct options stay distinct. ``str.strip`` keeps this linear.
_TRIM_CHARS = (
    "".join(c for c in map(chr, range(0x3001)) if c.isspace())
    + "\u200b\u200c\u200d\u2060\ufeff"
    + ".,;:!?'\"`*_()[]{}‘’“”。、"
)
# The longest phrase after a label that can be another question's option text.
_PHRASE = 240
# What may close a label before the text after it: brackets, markdown, LaTeX, punctuation.
_CLOSERS = ")]}'\"’”*_$.:,;」』】 \t"
# What separates a label from the option text echoed after it: "B. text", "(B) text", "B - text".
_ECHO_START = re.compile(r"[)\]}'\"’”*_.:,」』】]*[^\S\n]*(?:[-–—][^\S\n]+)?")


def norm(value: str) -> str:
    """Normalize an option text or response for comparison: trimmed, white space collapsed, any case."""
    return " ".join(value.strip(_TRIM_CHARS).split()).casefold()


@dataclass(frozen=True)
class Options:
    """What the option texts let the rules see. Built once per response.

    Attributes:
        echo: Normalized option text -> the labels showing it (several when a question repeats one).
        own: Label -> its own normalized option text.
        window: How far past a label an echoed option text can reach; bounds every look-ahead, so
            many signals on one long line stay linear.
    """

    echo: dict[str, set[str]]
    own: dict[str, str]
    window: int


@dataclass(frozen=True)
class Signal:
    """One answer statement: where it starts and ends, where its label starts, the labels it names."""

    start: int
    end: int
    label_start: int
    labels: frozenset[str]
    foreign: bool = False


# Where a sentence ends: a conclusion must stand in a sentence of its own ("The answer is A or the
# answer is B." is a hedge, "The answer is B. Actually, the answer is C." a correction).
_SENTENCE_END = re.compile(r"[.!?。！？](?:\s|$)|\n")


def _line_after(text: str, pos: int, window: int) -> str:
    """The rest of the line from ``pos``, looking at most ``window`` characters ahead."""
    end = text.find("\n", pos, pos + window)
    return text[pos : pos + window] if end < 0 else text[pos:end]


def _named(text: str, match: re.Match[str], patterns: Patterns, options: Options) -> frozenset[str]:
    """The label a match names, plus any *other* option whose exact text follows it on the same line."""
    label = resolve(match.group("label"), patterns)
    if label is None:
        return frozenset()
    rest = _line_after(text, match.end("label"), options.window)
    start = _ECHO_START.match(rest)
    echoed = options.echo.get(norm(rest[start.end() if start else 0 :]), set())
    return frozenset({label} if not echoed or label in echoed else {label} | echoed)


def _own_text_follows(text: str, match: re.Match[str], patterns: Patterns, options: Options) -> bool:
    """Whether the label is followed on its line by its own option text ("is D. <D's text>")."""
    label = resolve(match.group("label"), patterns)
    own = options.own.get(label) if label is not None else None
    if not own:
        return False
    rest = _line_after(text, match.end("label"), options.window)
    start = _ECHO_START.match(rest)
    rest = norm(rest[start.end() if start else 0 :])
    return rest.startswith(own) and not rest[len(own) : len(own) + 1].isalnum()


def _foreign(text: str, match: re.Match[str], patterns: Patterns, options: Options) -> bool:
    """Whether the label is followed on its line by text that is no displayed option's.

    "The answer is A. Notify the parents in writing" when A's text is something else answers another
    question (a few-shot example the model summarises); used only to settle statements that differ.
    """
    if not options.own:
        return False
    pos = match.end("label")
    end = text.find("\n", pos, pos + _PHRASE)
    if end < 0 and len(text) > pos + _PHRASE:
        return False  # a long line goes on explaining: not a short phrase
    body = norm(text[pos : len(text) if end < 0 else end].lstrip(_CLOSERS))
    if not body or _SENTENCE_END.search(body) or body in options.echo:
        return False
    return not _own_text_follows(text, match, patterns, options)


def _option_text_after(text: str, cue: re.Match[str], options: Options) -> frozenset[str]:
    """The one option whose exact text a cue is followed by ("The answer is mitochondria.")."""
    rest = _line_after(text, cue.end(), options.window)
    if "boxed" in cue.group():
        rest = rest.split("}", 1)[0]  # \boxed{9.616}
    shown = options.echo.get(norm(rest), set())
    return frozenset(shown) if len(shown) == 1 else frozenset()


def _closing(text: str, patterns: Patterns, options: Options) -> list[Signal]:
    """A last sentence or line that ends the response by naming a label without a cue.

    "... is (E).", "... would be an endoscopy (H).", "... is option D." at the very end, or a last line
    that is a label with its own option text ("(I) The economy is in equilibrium ...").
    """
    tail_start = max(0, len(text) - 400)
    match = patterns.closing.search(text, tail_start)
    if match is not None:
        return [Signal(match.start(), match.end(), match.start("label"), _named(text, match, patterns, options))]
    last = text.rfind("\n", tail_start) + 1
    line = patterns.line.match(text, last) if last > 0 else None
    if line is not None and _own_text_follows(text, line, patterns, options):
        return [Signal(line.start(), line.end(), line.start("label"), _named(text, line, patterns, options))]
    return []


_OPTION_OPENING = re.compile(r"[^\W\d_]")
# "I (would) strongly disagree", "I'd agree": the reply's own choice written as an option's words.
_FIRST_PERSON = re.compile(r"(?<![^\W_])I(?:[^\S\n]+(?:would|do|will)|'d|'ll)?[^\S\n]+", re.IGNORECASE)
# The last sentence ends "... is <an option's text>." ("So, the degree of ∠BOC is 100°.").
_IS_WORD = re.compile(r"(?<![^\W_])(?:is|are|equals|=)[^\S\n]+", re.IGNORECASE)
_LAST_END = re.compile(r"[.!。]?[*_]*\s*\Z")


def _option_words(text: str, pos: int, options: Options) -> tuple[frozenset[str], str]:
    """The one option whose text starts at ``pos`` as whole words, and what follows it on the line.

    The longest text wins when texts nest; no label when none or two options show that text.
    """
    rest = norm(_line_after(text, pos, options.window))
    best = ""
    for own in options.echo:
        if len(own) > len(best) and rest.startswith(own) and not rest[len(own) : len(own) + 1].isalnum():
            best = own
    shown = options.echo.get(best, set()) if best else set()
    return (frozenset(shown), rest[len(best) :]) if len(shown) == 1 else (frozenset(), rest)


def _option_text_signals(text: str, patterns: Patterns, options: Options) -> list[Signal]:
    """Statements made with option texts rather than with a label alone.

    - a line that is a label and its own option text and nothing else ("3) Agree" as its own paragraph,
      after "Here's my perspective:"); a list of several such lines is an enumeration and is decided
      as one (:func:`decide`);
    - a first-person choice in an option's words ("I strongly disagree with the proposition");
    - a last sentence that ends "is <one option's text>." (no label anywhere in it).
    """
    found: list[Signal] = []
    lines = [(line, resolve(line.group("label"), patterns)) for line in patterns.line.finditer(text)]
    # Lines of several labels list the options (an enumeration): none of them is a choice by itself.
    if len({label for _, label in lines}) == 1:
        for line, label in lines:
            own = options.own.get(label) if label is not None else None
            if line.start() == 0 or not own:
                continue  # the leading label is read by the leading rule
            end = text.find("\n", line.end())
            rest = norm(_ECHO_START.sub("", text[line.end() : len(text) if end < 0 else end], count=1))
            if rest == own:
                found.append(Signal(line.start(), line.end(), line.start("label"), frozenset({label or ""})))
    for person in _FIRST_PERSON.finditer(text):
        shown, _ = _option_words(text, person.end(), options)
        if shown:
            found.append(Signal(person.start(), person.end(), person.end(), shown))
    last = max(_IS_WORD.finditer(text, max(0, len(text) - 300)), key=lambda m: m.start(), default=None)
    if last is not None:
        closing = _LAST_END.search(text, last.end())
        value = text[last.end() : closing.start() if closing is not None else len(text)]
        named = options.echo.get(norm(value), set())
        if len(named) == 1 and not _SENTENCE_END.search(value):
            found.append(Signal(last.start(), len(text), last.end(), frozenset(named)))
    return found


# The most labels one hedge statement is followed through ("(A), (B), (D), (F), (G), (H), (I), and (E)").
_RUN = 26


def _statements(text: str, patterns: Patterns, options: Options) -> list[Signal]:
    """Every answer statement, in order of where its label starts."""
    found: list[Signal] = _closing(text, patterns, options)
    if options.own:
        found.extend(_option_text_signals(text, patterns, options))
    for cue in CUE.finditer(text):
        match = label_token_at(text, cue.end(), patterns)
        if match is None:
            shown = _option_text_after(text, cue, options)
            if shown:
                found.append(Signal(cue.start(), cue.end(), cue.end(), shown))
            continue
        named = _named(text, match, patterns, options)
        # "B or C", "(B), (C), (E), and (G)" names every label of the run, followed to its last label (at
        # most _RUN of them, so a long list costs no more than a short one). A run is a hedge, never
        # "another question's text": only a single label can be foreign.
        last = match
        for _ in range(_RUN):
            hedge = HEDGE.match(text, last.end("label"))
            nxt = None if hedge is None else label_token_at(text, hedge.end(), patterns)
            if nxt is None:
                break
            named |= _named(text, nxt, patterns, options)
            last = nxt
        foreign = last is match and _foreign(text, match, patterns, options)
        found.append(Signal(cue.start(), last.end("label"), match.start("label"), named, foreign))
    for pattern in patterns.suffix:
        found.extend(
            Signal(m.start(), m.end(), m.start("label"), _named(text, m, patterns, options))
            for m in pattern.finditer(text)
        )
    if options.own:
        # "The correct statement is D. <D's own text>": a label with its own text after "is" / "is:".
        for cue in IS_CUE.finditer(text):
            m = label_token_at(text, cue.end(), patterns)
            if m is not None and _own_text_follows(text, m, patterns, options):
                found.append(Signal(cue.start(), m.end(), m.start("label"), _named(text, m, patterns, options)))
    unique = {(signal.label_start, signal.labels): signal for signal in found}
    return sorted(unique.values(), key=lambda signal: signal.label_start)


_WRAPPERS = "([{'\"‘“*_「『【"


def _parts(text: str, lead: re.Match[str], patterns: Patterns) -> bool:
    """Whether the leading label starts a run of parts ("a) ... b) ...", "(I) ... (II)", "A) ... B)").

    The same wrapping around the next label further on, at the start of a line or a sentence, means the
    response walks through parts or options rather than answering with the first one.
    """
    start, end = lead.start("label"), lead.end("label")
    closer = text[end : end + 1]
    if closer not in (".", ")", "]", ":"):
        return False
    opener_start = start
    while opener_start > 0 and text[opener_start - 1] in _WRAPPERS:
        opener_start -= 1
    token = lead.group("label")
    shown = [token for _, token, _ in patterns.matchers]
    folded = [label.casefold() for label in shown]
    following = []
    if token.casefold() in folded and folded.index(token.casefold()) + 1 < len(shown):
        following.append(shown[folded.index(token.casefold()) + 1])
    if token.casefold() == "i":
        following.append("ii")
    if not following:
        return False
    # The next part starts a line or a sentence; "the answer is C. text" is not a part.
    nxt = re.compile(
        r"(?:(?<=\n)|(?<=[.!?;:] ))[^\S\n]*" + re.escape(text[opener_start:start])
        + "(?:" + "|".join(map(re.escape, following)) + ")" + re.escape(closer) + r"\s",
        re.IGNORECASE,
    )
    return nxt.search(text, end) is not None


def _leading(text: str, patterns: Patterns, options: Options) -> frozenset[str] | None:
    """The labels the start of the response names (empty when it does not start with a label).

    None when the leading label starts a run of parts (:func:`_parts`): the response lists.
    """
    lead = patterns.line.match(text)
    if lead is not None:
        if _parts(text, lead, patterns):
            return None
        hedge = HEDGE.match(text, lead.end("label"))
        second = None if hedge is None else label_token_at(text, hedge.end(), patterns)
        named = _named(text, lead, patterns, options)
        return named if second is None else named | _named(text, second, patterns, options)  # "A, B, or C"
    head = patterns.head.match(text)
    if head is None:
        # "Yes, there are fewer ...": one option's text opens the reply, closed by punctuation.
        if options.own and _OPTION_OPENING.match(text):
            shown, after = _option_words(text, 0, options)
            if shown and after[:1] in {",", ".", "!", ";", ":"}:
                return shown
        return frozenset()
    label = resolve(head.group("label"), patterns)
    rest = norm(_line_after(text, head.end(), options.window))
    if label is not None and rest and options.own.get(label) == rest:
        return frozenset({label})  # "D, backpack", "B mitochondria": the label and its own text
    return frozenset()


@dataclass(frozen=True)
class Decision:
    """What the signals decided: a label and the rule, or no label and why."""

    label: str | None
    method: str


def _conclude(text: str, found: list[Signal], lead: frozenset[str], failure: str) -> Decision:
    """Agreeing signals decide (``statement``); otherwise the last statement, if it is a conclusion."""
    named = frozenset().union(lead, *(signal.labels for signal in found))
    if len(named) == 1:
        return Decision(next(iter(named)), "statement")
    # Statements that go on with another question's text do not count against the others.
    own = [signal for signal in found if not signal.foreign]
    if own and len(frozenset().union(lead, *(signal.labels for signal in own))) == 1:
        return Decision(next(iter(own[0].labels)), "statement")
    if not found or len(found[-1].labels) != 1 or (lead and lead != found[-1].labels):
        return Decision(None, failure)
    last = found[-1]
    # The last statement that names another label must end in an earlier sentence, and the last one must
    # say it is final ("Final answer", \boxed{}, "Actually", "Revised answer"): two plain answers that
    # differ are two answers.
    other = [signal for signal in found if signal.labels != last.labels]
    if other and not _SENTENCE_END.search(text, other[-1].end, max(other[-1].end, last.start)):
        return Decision(None, failure)
    if other and all(len(signal.labels) > 1 for signal in other):
        # Every earlier statement that differs is a hedge ("The answer is (B) or (C). The answer is (B).",
        # "(I) and (B). However, ... we will choose (I)."): the one label named after it settles it.
        return Decision(next(iter(last.labels)), "conclusion")
    line_start = text.rfind("\n", 0, last.label_start) + 1
    after_other = other[-1].end if other else 0
    if not FINAL.search(text, max(line_start, after_other, last.label_start - 120), last.label_start):
        return Decision(None, failure)
    return Decision(next(iter(last.labels)), "conclusion")


def decide(text: str, patterns: Patterns, options: Options) -> Decision | None:
    """Read the leading label, listed options and answer statements; None when there are none.

    - Two or more lines start with different labels (the options were listed): UNKNOWN
      (``enumeration``) unless the statements outside the list decide.
    - The statements and the leading label all name one label: that label (``statement``, or
      ``leading`` when there is no statement).
    - Otherwise the *conclusion* decides: the last answer statement, if it names one label and the
      response did not open with a different one (``conclusion``). Earlier statements are reasoning.
      Lines after it that start with a label (a list or summary of the options) do not change it.
    - Anything else names several labels: ``ambiguous``.
    """
    listed = {m.start("label"): m for m in patterns.line.finditer(text)}
    found = _statements(text, patterns, options)
    if len({resolve(m.group("label"), patterns) for m in listed.values()} - {None}) >= 2:
        # A statement whose label merely starts one of a run of listed lines ("Answer:\nA. x\nB. y") is
        # part of the list, not a choice; a listed line standing apart ("is:\n\n**E) text**") chooses.
        adjacent = [(a, b) for a, b in itertools.pairwise(sorted(listed)) if text.count("\n", a, b) <= 2]
        near = {a for a, _ in adjacent} | {b for _, b in adjacent}
        return _conclude(text, [s for s in found if s.label_start not in near], frozenset(), "enumeration")
    lead = _leading(text, patterns, options)
    if lead is None:  # "a) ... b) ...": the response walks through parts
        return _conclude(text, found, frozenset(), "enumeration")
    if found:
        return _conclude(text, found, lead, "ambiguous")
    if not lead:
        return None
    return Decision(next(iter(lead)), "leading") if len(lead) == 1 else Decision(None, "ambiguous")
