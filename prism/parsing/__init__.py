r"""Read the chosen option out of a model's free-text response, without ever seeing the answer key.

First the *answer part* is cut out (:mod:`prism.parsing.text`): full-width forms read as ASCII (NFKC);
leaked chat-template tokens (``<|im_end|>``, ``<end_of_turn>``, ``<unused95>``) are not text and what
follows them is not the answer; only what follows a ``<think> ... </think>`` block is read; an
answer-like field of a JSON or JSON-like object (:mod:`prism.parsing.structured`: ``"answer"``,
``"answer_choice"``, ``'choice'``, ``"respuesta"``, ``"réponse"``, ``"Antwort"``, ``"答案"``, fenced or not,
cut off or not), when there is one, is the answer (the rest is reasoning); a next question the model
invented ("\n\nQuestion: ...") is cut off. Then the rules, in order; the first that decides wins:

0. ``invented``: the reply opens with a question of its own whose listed options are none of the
   displayed ones (:mod:`prism.parsing.invented`): it answers nothing that was asked. UNKNOWN.
1. ``exact``: the answer part is one label (any case). Only this is compliant. A phrase label written
   with other spacing or hyphens ("strongly-disagree") is ``phrase`` (:mod:`prism.parsing.phrases`).
2. ``bare``: one label wrapped in markdown or punctuation: ``(B)``, ``**B**``, ``B.``, ``[B]``, ``(Option C)``.
3. Signals (:mod:`prism.parsing.signals`): the *leading* label (``B. mitochondria``, ``B\n\nBecause``,
   ``Option B``, ``D, backpack``; not when it starts a run of parts, ``a) ... b) ...``) and every
   answer *statement* ("the answer is B", "Final answer: C", ``\boxed{B}``, "### Answer\nB",
   "答案是B", "La bonne réponse est B", "option B is correct", "the closest is (G)", a last sentence
   ending "... is (E).", a cue followed by exactly one option's text; Chinese and Japanese exam formulas
   "故选：B", "本题答案选A", "正确选项为D", "选项C正确", "错误的叙述是C选项", "正解はB"; Spanish, French and
   German conclusions "La respuesta correcta es la B", "El diagnóstico más probable es <option text>",
   "Je choisis B", "Die richtige Antwort ist B", "B ist richtig", a number word before a label "es el
   número 3"; a lone line "3) Agree" (a label and
   its own text); a first-person choice in an option's words, "I strongly disagree"; a last sentence
   ending "is <an option's text>."; a reply opening with an option's text, "Yes, there are ...").
   Statements inside quotation marks or attributed to the user, the hint or another person ("The user
   says 'the answer is (A)'") are blanked first (:mod:`prism.parsing.quotes`): they are not the reply's.
   Two or more labels joined by a conjunction of any language the cues read ("A and C", "A y C",
   "B et D", "A und C", "A和C", "B、D", "AかB", "A и C") are a hedge.
   - ``enumeration``: two or more lines start with different labels, so the model listed the options;
     UNKNOWN unless the statements outside the list decide.
   - ``leading`` / ``statement``: every signal names the same one label. Signals that name another
     label *and* go on with text that is no displayed option's ("The answer is A. Notify the parents",
     a model summarising its few-shot examples) do not count against the others.
   - ``conclusion``: the statements disagree, and the *last* answer statement is the conclusion: it
     names one label, stands in a sentence of its own, is marked final ("Final answer", ``\boxed{}``,
     "Actually", "Revised answer" earlier on its line) and the response did not open with another label.
     The statements before it are reasoning; text after it that is no answer statement (an
     explanation, a list or summary of the options) does not change it; a later answer statement would
     itself be the last one. Two plain answers that differ ("The answer is (I).\n\nAnswer: The answer
     is (J).") are two answers: ``ambiguous``, as is a hedge in the last statement ("B or C", "B, C",
     "(B), (C), and (G)"). When every earlier statement that differs is a hedge, the one label named in a
     later sentence settles it without a "final" word ("The answer is (B) or (C). The answer is (B).").
   - ``ambiguous``: several labels and no conclusion, or a label followed by another option's text.
4. ``option_text``: the whole answer part, trimmed of punctuation, is exactly one option's text.
   ``phrase``: the whole answer part is one phrase label or option text when spacing, hyphens, accents,
   case and a scale digit beside it are forgiven ("Tout a fait d'accord", "Disagree (3)"); never when
   two labels' phrases fold to the same text.
5. ``refusal``: the reply declines ("I cannot determine", "none of the options is correct"), unless it
   contains one of the displayed options' own text: an option's text always wins over this rule.
6. ``truncated``: the reply is an unfinished ``<think>`` block, or generation stopped at the output
   limit (``finish_reason`` ``"length"``) before any reading: the rule would have been ``none``,
   ``enumeration``, ``ambiguous`` or ``conclusion`` (the last statement of a cut-off reply need not be
   its last word).
7. ``none``: nothing recognised. An empty or blank answer part is ``empty``.

A label recovered from a JSON answer field is reported as ``structured``, whichever rule read the
field's value.

Labels are whatever was displayed (:mod:`prism.parsing.labels`): a label outside ``labels`` (``E`` for a
four-option question) is never recovered. The parser is total (it returns a ``Parsed`` for any string)
and linear in the length of the response.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from prism.parsing.cues import REFUSAL
from prism.parsing.invented import opens_with_invented_question
from prism.parsing.labels import patterns_for, resolve
from prism.parsing.phrases import phrase_label
from prism.parsing.quotes import mask
from prism.parsing.signals import Options, decide, norm
from prism.parsing.text import answer_part, normalize
from prism.types import Parsed

# Bump on ANY change that could alter what a response parses to: it is logged with every run.
PARSER_VERSION = "3"

METHODS = (
    "exact",
    "bare",
    "leading",
    "statement",
    "conclusion",
    "enumeration",
    "ambiguous",
    "option_text",
    "phrase",
    "structured",
    "invented",
    "refusal",
    "truncated",
    "none",
    "empty",
)

# The methods that recover no label (the response is UNKNOWN).
UNKNOWN_METHODS = frozenset({"enumeration", "ambiguous", "invented", "refusal", "truncated", "none", "empty"})

# Values of ``finish_reason`` that mean the output limit cut the reply (OpenAI, llama.cpp and Ollama
# say "length"; Anthropic-style APIs "max_tokens").
LIMIT_REACHED = frozenset({"length", "max_tokens"})
# Readings a reply cut at the output limit cannot support: it stopped before saying what it chose.
_CUT_SHORT = frozenset({"none", "enumeration", "ambiguous", "conclusion"})


def _answer(label: str, method: str, *, compliant: bool = False) -> Parsed:
    return Parsed(displayed=label, recovered=True, compliant=compliant, method=method)


def _unknown(method: str) -> Parsed:
    return Parsed(displayed=None, recovered=False, compliant=False, method=method)


def _options(labels: Sequence[str], options: Sequence[str] | None) -> Options:
    echo: dict[str, set[str]] = {}
    own: dict[str, str] = {}
    for shown, option in zip(labels, options or (), strict=False):
        text = norm(normalize(option))
        if shown.strip() and text:
            echo.setdefault(text, set()).add(shown)
            own[shown] = text
    return Options(echo, own, window=max((len(text) for text in echo), default=0) + 16)


def _contains(text: str, phrase: str) -> bool:
    """Whether ``phrase`` occurs in ``text`` as whole words."""
    return re.search(r"(?<!\w)" + re.escape(phrase) + r"(?!\w)", text) is not None


def _read(text: str, labels: Sequence[str], options: Options) -> Parsed:
    """Rules 1-5 on the answer part."""
    if not text:
        return _unknown("empty")
    patterns = patterns_for(tuple(labels))
    if patterns is not None:
        label = resolve(text, patterns)
        if label is not None:
            if text.casefold() == normalize(label).strip().casefold():
                return _answer(label, "exact", compliant=True)
            return _answer(label, "phrase")  # a phrase label with other spacing, hyphens or accents
        bare = patterns.bare.fullmatch(text)
        if bare is not None and (label := resolve(bare.group("label"), patterns)) is not None:
            return _answer(label, "bare")
        if opens_with_invented_question(text, patterns, options):
            return _unknown("invented")
        # Quoted answer statements and clauses attributed to the user or a hint are not the reply's own.
        decided = decide(mask(text), patterns, options)
        if decided is not None:
            return _unknown(decided.method) if decided.label is None else _answer(decided.label, decided.method)
    whole = norm(text)
    hits = options.echo.get(whole, set())
    if len(hits) == 1:
        return _answer(next(iter(hits)), "option_text")
    if hits:  # two options with the same text: no way to tell which was meant
        return _unknown("ambiguous")
    phrase = phrase_label(text, labels, [options.own.get(label, "") for label in labels])
    if phrase is not None:  # "strongly-disagree", "Tout a fait d'accord", "Agree (4)"
        return _answer(phrase, "phrase")
    if REFUSAL.search(text) and not any(_contains(whole, option) for option in options.echo):
        return _unknown("refusal")
    return _unknown("none")


def parse_response(
    text: str, labels: Sequence[str], options: Sequence[str] | None = None, *, finish_reason: str | None = None
) -> Parsed:
    """Recover the option a response chose, as the label displayed to the model.

    Args:
        text: The model's response, verbatim.
        labels: The labels as displayed, in display order (matching is case-insensitive).
        options: The option texts in the same order, or None: they let the rules match a response that
            is an option's text, and notice a label followed by another option's text.
        finish_reason: Why generation stopped, as the backend recorded it (``"stop"``, ``"length"``, ...),
            or None when it did not say. ``"length"`` turns a reply with no reading into ``truncated``.

    Returns:
        The parse: ``displayed`` is exactly one of ``labels`` or None (UNKNOWN), ``method`` is one of
        :data:`METHODS`. Never raises on any string.
    """
    part = answer_part(text)
    if part.unfinished_think:
        return _unknown("truncated")
    parsed = _read(part.text, labels, _options(labels, options))
    if part.field and parsed.displayed is not None:
        # A label read from a JSON answer field: not the bare reply that was asked for, whatever rule read
        # the field's value (a label, "4) text", an option's text).
        parsed = _answer(parsed.displayed, "structured")
    if finish_reason in LIMIT_REACHED and parsed.method in _CUT_SHORT:
        return _unknown("truncated")
    return parsed
