"""The part of a response that answers: what is cut away before any rule reads it.

A model's reply can carry text that is not its answer: a ``<think>`` block that reasoning models
(Qwen3, DeepSeek-R1 and their distillations) write before answering, chat-template tokens that leak
into the text (``<|im_end|>``, ``<|eot_id|>``, ``<end_of_turn>``, ``<unused95>``) and, after them or
after the answer, a next question the model invented. :func:`answer_part` keeps only the answer.
Every step is one pass of a regular expression or a string search, so the whole stays linear.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from prism.parsing.structured import answer_field

# Scripts written without spaces between words. Their characters do not count as letters next to a
# label, so "答案是B" and "正解はBです" still name B.
CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"

# A chat-template token: ``<|...|>`` (ChatML, Llama 3, Phi, Cohere's ``<|END_RESPONSE|>``; DeepSeek's
# ``<｜end▁of▁sentence｜>`` after NFKC), Gemma's ``<start_of_turn>`` / ``<end_of_turn>`` /
# ``<unusedNN>``, ``</s>``, ``<eos>``, Mistral's ``[INST]`` / ``[/INST]`` and the end-of-answer mark
# ``<eoa>`` that GAOKAO-style prompts ask for.
_TOKEN = re.compile(
    r"<\|[^\s<>|]{1,40}\|>|<unused\d{1,4}>|<(?:start|end)_of_turn>|</s>|<eos>|<eoa>|\[/?INST\]",
    re.IGNORECASE,
)
# A role name a template puts right after an opening token ("<|im_start|>assistant").
_ROLE = re.compile(r"[^\S\n]*(?:assistant|model|bot)\b[^\S\n]*:?\s*", re.IGNORECASE)
_SPACE = re.compile(r"\s*")
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
# A line that starts a new question or a new turn the model invented ("Question: ...", "Q2.",
# "### Question 3", "Human: ..."): what follows it answers something that was never asked.
_NEW_QUESTION = re.compile(
    r"^[^\S\n]*(?:#{1,6}[^\S\n]*)?[*_]{0,3}"
    r"(?:(?:question|q)(?:[^\S\n]*\d{1,3})?[*_]{0,3}[^\S\n]*[:.)]|(?:human|user)[^\S\n]*:)",
    re.IGNORECASE | re.MULTILINE,
)




@dataclass(frozen=True)
class AnswerPart:
    """The part of a response the rules read.

    Attributes:
        text: The answer part, stripped; may be empty.
        unfinished_think: The response is a ``<think>`` block that never closed, with nothing before it.
        field: The text is the value of an answer-like field of a JSON or JSON-like object, not the reply.
    """

    text: str
    unfinished_think: bool = False
    field: bool = False


def normalize(value: str) -> str:
    """NFKC: full-width letters and punctuation (``Ｂ``, ``：``, ``（Ｂ）``) read as their ASCII forms."""
    return unicodedata.normalize("NFKC", value)


def _drop_tokens(text: str) -> str:
    """Drop template tokens (and a role name) at the start, then cut at the first token left."""
    pos = 0
    while True:
        space = _SPACE.match(text, pos)
        token = _TOKEN.match(text, pos if space is None else space.end())
        if token is None:
            break
        pos = token.end()
        role = _ROLE.match(text, pos)
        if role is not None and (_TOKEN.match(text, role.end()) or "\n" in role.group()):
            pos = role.end()
    text = text[pos:]
    cut = _TOKEN.search(text)
    return text if cut is None else text[: cut.start()]


def _drop_think(text: str) -> AnswerPart | None:
    """Keep what follows the last ``</think>``; an unclosed block with nothing before it is unfinished."""
    last = max(_THINK_CLOSE.finditer(text), key=lambda match: match.start(), default=None)
    if last is not None:
        return AnswerPart(text[last.end() :].strip())
    opened = _THINK_OPEN.search(text)
    if opened is None:
        return None
    before = text[: opened.start()].strip()
    return AnswerPart(before, unfinished_think=not before)


def _drop_invented_question(text: str) -> str:
    """Cut at the first line that starts a new question, unless nothing comes before it."""
    for match in _NEW_QUESTION.finditer(text):
        if text[: match.start()].strip():
            return text[: match.start()]
        # A response that opens by restating the question is read in full.
    return text


def answer_part(text: str) -> AnswerPart:
    """Cut a response down to the part that answers.

    In order: NFKC normalization; template tokens (leading ones dropped, the rest cut at the first);
    the ``<think>`` block (only what follows the last ``</think>`` is kept); an answer-like field of a
    JSON or JSON-like object (:mod:`prism.parsing.structured`; when there is one, its last value is the
    answer: the rest is the model's reasoning); an invented
    next question; a colon that opens a completion-style reply (": B.", continuing the prompt's cue).
    """
    text = _drop_tokens(normalize(text))
    thought = _drop_think(text)
    if thought is not None:
        if thought.unfinished_think:
            return thought
        text = thought.text
    field = answer_field(text)
    if field is not None:  # a JSON or JSON-like answer field (prism.parsing.structured)
        return AnswerPart(field, field=True)
    # A completion-style reply continues the prompt's own cue (": B.", ":\n\nD. text").
    return AnswerPart(_drop_invented_question(text).strip().lstrip(":").strip())
