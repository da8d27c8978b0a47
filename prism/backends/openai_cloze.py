"""Plain completions and the cloze reading over an OpenAI-compatible ``/v1/completions``: bodies and replies.

``model.chat=false`` sends the rendered prompt as ``prompt`` to ``/completions`` (no chat template). With
``generation.cloze=true`` each option is one more request: the context and the continuation as the prompt,
``echo: true``, ``logprobs: 1``, ``max_tokens: 1``, ``temperature: 0``; the continuation's log-likelihood is
the sum of the echoed tokens' log-probabilities from the context's end to the prompt's end (lm-eval reads
the echo the same way). The server tokenises the whole prompt, and the split is by character offset.

The echo's alignment is checked once before inference (:func:`echo_alignment`) with a greedy one-token
probe. In the OpenAI legacy format each echoed position holds the log-probability of its token given the
tokens before it, and the generated token follows the prompt with the distribution after it, so at greedy
decoding its log-probability is the largest of its row. llama-cpp-python 0.3's server, for a model that
adds no BOS token (SmolLM2), reports at each position the row *after* that token (its own token's
probability as the next token after itself) and leaves the generated token out: its last prompt position
then holds the distribution whose top token is the one it generated. That misreading cannot be corrected
exactly (the right value of a token is in the previous row, which the server reports only through its top
list), so such a server is refused. Pure: no I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from prism.backends.base import Request
from prism.backends.openai_wire import build_request

#: The probe's prompt: a sentence whose next token is no repeat of its last one.
ECHO_PROBE_PROMPT = "Question: Which of these is a renewable resource?\nAnswer: wind"
Alignment = Literal["aligned", "shifted", "unknown", "missing"]


def build_plain_body(request: Request, model: str, extra_body: Mapping[str, Any] | None = None,
                     send_top_k: bool = False) -> dict[str, Any]:
    """The ``/completions`` body of ``model.chat=false``: the chat body with the user turn's text as ``prompt``."""
    body = build_request(request, model, extra_body, send_top_k)
    del body["messages"]
    body.pop("logprobs", None)  # /completions takes an integer; the label reading uses chat logprobs only
    body.pop("top_logprobs", None)
    return {"model": body.pop("model"), "prompt": request.prompt.text, **body}


def echo_body(model: str, prompt: str, extra_body: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``/completions`` body that echoes ``prompt`` with each token's log-probability (one token generated)."""
    return {"model": model, "prompt": prompt, "stream": False, "echo": True, "logprobs": 1, "max_tokens": 1,
            "temperature": 0.0, **(extra_body or {})}


def as_chat_reply(reply: Mapping[str, Any]) -> dict[str, Any]:
    """A ``/completions`` reply in the chat reply's shape (its choice's ``text`` as the message content)."""
    choices = reply.get("choices")
    out = dict(reply)
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        first = dict(choices[0])
        text = first.pop("text", None)
        first.pop("logprobs", None)
        first["message"] = {"role": "assistant", "content": text if isinstance(text, str) else None}
        out["choices"] = [first, *choices[1:]]
    return out


def echo_logprobs(reply: Mapping[str, Any]) -> dict[str, Any] | None:
    """The first choice's ``logprobs`` object (``tokens``, ``text_offset``, ``token_logprobs``, ``top_logprobs``)."""
    choices = reply.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    logprobs = first.get("logprobs") if isinstance(first, Mapping) else None
    if not isinstance(logprobs, Mapping):
        return None
    keys = ("tokens", "text_offset", "token_logprobs", "top_logprobs")
    if not all(isinstance(logprobs.get(k), list) for k in keys):
        return None
    return {k: logprobs[k] for k in keys}


def echo_alignment(reply: Mapping[str, Any], prompt: str) -> Alignment:
    """How a greedy one-token echo of ``prompt`` aligns its log-probabilities (see the module docstring).

    ``aligned``: the generated token is listed after the prompt and its log-probability is its row's largest.
    ``shifted``: no generated token is listed, and the last prompt position's top token is the generated text
    (each position holds the row after its token). ``missing``: no echoed log-probabilities. ``unknown``:
    neither pattern.
    """
    logprobs = echo_logprobs(reply)
    if logprobs is None or not logprobs["tokens"]:
        return "missing"
    choices = reply["choices"]
    text = choices[0].get("text") if isinstance(choices[0], Mapping) else None
    generated = text[len(prompt):] if isinstance(text, str) and text.startswith(prompt) else None
    offsets, values, tops = logprobs["text_offset"], logprobs["token_logprobs"], logprobs["top_logprobs"]
    after = [i for i, offset in enumerate(offsets) if isinstance(offset, int) and offset >= len(prompt)]
    if after:
        i = after[0]
        top = tops[i] if isinstance(tops[i], Mapping) else {}
        value = values[i]
        if top and isinstance(value, int | float) and abs(float(value) - max(float(v) for v in top.values())) < 1e-6:
            return "aligned"
        return "unknown"
    last = tops[-1] if isinstance(tops[-1], Mapping) else {}
    if generated and last and max(last, key=lambda k: float(last[k])) == generated:
        return "shifted"
    return "unknown"
