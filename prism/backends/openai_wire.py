"""What PRISM sends to an OpenAI-compatible server and reads back: checked settings, bodies, replies, identity.

Pure functions, no I/O and no ``openai`` import: the backend (:mod:`prism.backends.openai_compat`) does the
talking and the retrying, and uses these to build each request body, read each reply into a
:class:`~prism.types.Completion`, compute the model's digest and keep the API key out of every message.
The module docstring of :mod:`prism.backends.openai_compat` describes the contract these implement.
"""

from __future__ import annotations

import hashlib
import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from prism.backends.base import BackendError, Request
from prism.backends.wire import excerpt, stop_reason, token_count
from prism.label_probs import TOP_LOGPROBS, reading_from_top
from prism.types import Completion, LabelReading, canonical_json

#: Sent as the key when ``model.api_key_env`` is null: servers without auth ignore it, and the client
#: must not fall back to ``OPENAI_API_KEY`` on its own.
NO_KEY = "prism-no-key"
#: Body fields PRISM sets itself; ``model.extra_body`` may not override them (the record would lie).
RESERVED_FIELDS = frozenset({"model", "messages", "stream", "n", "temperature", "max_tokens", "max_completion_tokens",
                             "seed", "top_p", "top_k", "logprobs", "top_logprobs"})
#: Model-list fields that change from one request to the next, so they cannot be part of a digest.
VOLATILE_LISTING_FIELDS = frozenset({"created", "permission", "permissions"})
#: The probe before the first cell: one token, greedy, so it costs next to nothing.
PROBE_BODY: dict[str, Any] = {"messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1,
                              "temperature": 0.0}
#: What every endpoint of a pool is asked before inference: one fixed greedy prompt whose answer must be the
#: same everywhere (the same id could name other weights on one server; the same weights answer alike).
POOL_PROBE_BODY: dict[str, Any] = {
    "messages": [{"role": "user", "content": "Continue the list with the next four words: one, two, three,"}],
    "max_tokens": 12, "temperature": 0.0, "seed": 0,
}
_URL_FORMS = "http://HOST:PORT/v1 or https://HOST/v1 (e.g. http://127.0.0.1:8000/v1)"
# OpenAI masks a rejected key as `sk-abc***...xyz` in its 401 message; such fragments are redacted too.
_MASKED_KEY = re.compile(r"\S*\*{3,}\S*")
_CREDENTIALS = re.compile(r"//[^/]*@")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_base_url(raw: str | None, source: str = "model.base_url") -> str:
    """Check ``model.base_url`` (or one URL of ``model.endpoints``, named by ``source``) without a trailing slash.

    Raises:
        BackendError: If it is empty, not http(s), has no host, a bad port, credentials, a query or a fragment.
    """
    # An address with credentials is echoed without them: the error would otherwise print the password.
    shown = _CREDENTIALS.sub("//[credentials]@", str(raw)) if raw is not None else raw

    def bad(why: str) -> BackendError:
        return BackendError(f"{source}={shown!r} is not an OpenAI-compatible API address: {why}. "
                            f"Use {_URL_FORMS} (the part before /chat/completions).")

    if raw is None or not str(raw).strip():
        raise BackendError(f"an OpenAI-compatible model needs model.base_url=URL: {_URL_FORMS}.")
    url = str(raw).strip()
    if any(c.isspace() for c in url):
        raise bad("it contains whitespace")
    try:
        split = urllib.parse.urlsplit(url)
        port = split.port
    except ValueError as exc:
        raise bad(str(exc)) from None
    if split.scheme.lower() not in ("http", "https"):
        raise bad("the scheme is not http or https")
    if not split.hostname:
        raise bad("it names no host")
    if "@" in split.netloc:
        raise bad("credentials in the address would be logged; put the key in an environment variable and name "
                  "it with model.api_key_env")
    if split.query or split.fragment:
        raise bad("it has a query or fragment")
    if port == 0:
        raise bad("port 0 cannot be connected to")
    return url.rstrip("/")


def read_api_key(env_name: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The key from the environment variable ``model.api_key_env`` names; None when it names none.

    Raises:
        BackendError: Naming the variable (never a value) when it is set in the config but not in the
            environment, or empty.
    """
    if env_name is None or not str(env_name).strip():
        return None
    env = os.environ if environ is None else environ
    name = str(env_name).strip()
    if not _ENV_NAME.fullmatch(name):  # most likely the key itself: never echo it
        raise BackendError(
            "model.api_key_env must be the NAME of an environment variable (letters, digits and _), not the key; "
            "what was given is not a variable name and is not repeated here. Put the key in a variable "
            "(export OPENAI_API_KEY=...) and set model.api_key_env=OPENAI_API_KEY."
        )
    key = env.get(name, "")
    if not key.strip():
        raise BackendError(
            f"model.api_key_env={name} names the environment variable that holds the API key, but {name} is "
            f"{'empty' if name in env else 'not set'}. Export it (export {name}=...) before running, or set "
            "model.api_key_env=null for a server that needs no key."
        )
    return key.strip()


def check_extra_body(value: Any) -> dict[str, Any]:
    """``model.extra_body`` as a plain dict, refusing fields PRISM sets itself.

    Raises:
        BackendError: If it is not a mapping, or names a field in :data:`RESERVED_FIELDS`.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BackendError(f"model.extra_body must be a mapping of request fields, not {value!r}.")
    clash = sorted(str(k) for k in value if str(k) in RESERVED_FIELDS)
    if clash:
        raise BackendError(
            f"model.extra_body sets {', '.join(clash)}, which PRISM sends itself from generation.* (top_k with "
            "model.send_top_k=true); set them there, so the records say what was asked."
        )
    return {str(k): v for k, v in value.items()}


def build_request(request: Request, model: str, extra_body: Mapping[str, Any] | None = None,
                  send_top_k: bool = False) -> dict[str, Any]:
    """The chat-completions JSON body: the prompt's turns as the messages, no streaming.

    ``seed`` is sent when set, ``top_p`` when set, ``top_k`` only with ``send_top_k`` (see
    :func:`not_sent`), ``logprobs`` and ``top_logprobs`` (the most servers return, 20) with
    ``label_probs``; ``extra_body`` fields are added last.
    """
    params = request.params
    body: dict[str, Any] = {
        "model": model,
        "messages": request.prompt.messages(),
        "stream": False,
        "temperature": params.temperature,
        "max_tokens": params.max_tokens,
    }
    if params.seed is not None:
        body["seed"] = params.seed
    if params.top_p is not None:
        body["top_p"] = params.top_p
    if params.top_k is not None and send_top_k:
        body["top_k"] = params.top_k
    if params.label_probs:
        body["logprobs"] = True
        body["top_logprobs"] = TOP_LOGPROBS
    body.update(extra_body or {})
    return body


def first_top_logprobs(choice: Any) -> list[tuple[str, float]] | None:
    """The first generated position's top tokens of a chat choice (``logprobs.content[0].top_logprobs``).

    Returns:
        (token, log-probability) pairs as returned, or None when the choice has no log-probabilities.
    """
    logprobs = choice.get("logprobs") if isinstance(choice, Mapping) else None
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    first = content[0] if isinstance(content, list) and content else None
    top = first.get("top_logprobs") if isinstance(first, Mapping) else None
    if not isinstance(top, list) or not top:
        return None
    pairs = [(entry.get("token"), entry.get("logprob")) for entry in top if isinstance(entry, Mapping)]
    return [(str(token), float(logprob)) for token, logprob in pairs
            if isinstance(token, str) and isinstance(logprob, int | float) and not isinstance(logprob, bool)]


def not_sent(request: Request, send_top_k: bool = False) -> dict[str, Any]:
    """Canonical parameters that were set but could not be sent: ``top_k`` unless the server takes it."""
    top_k = request.params.top_k
    return {"top_k": top_k} if top_k is not None and not send_top_k else {}



def served(reply: Mapping[str, Any]) -> dict[str, Any]:
    """What a reply says answered: its ``model`` and ``system_fingerprint`` (None when absent)."""
    model, fingerprint = reply.get("model"), reply.get("system_fingerprint")
    return {"model": model if isinstance(model, str) else None,
            "system_fingerprint": fingerprint if isinstance(fingerprint, str) and fingerprint else None}


def read_reply(reply: Mapping[str, Any], latency_s: float, sent: Mapping[str, Any],
               skipped: Mapping[str, Any] | None = None, labels: tuple[str, ...] | None = None) -> Completion:
    """Turn a chat-completion reply (as a dict) into a Completion.

    ``backend_options`` is the body that was sent without the messages, plus ``not_sent`` (set parameters
    that were not sent) when there are any, plus ``served`` (:func:`served`). Null or absent content (a
    refusal, a tool call, a reasoning model out of tokens) is an observed empty completion; a reply without
    a first choice holding a message is a failed request. With ``labels`` (label probabilities were asked
    for) the first position's top tokens are read as those labels (``label_probs_source=top_k``); a reply
    without log-probabilities gets no reading, never a guessed one.
    """
    options: dict[str, Any] = {k: v for k, v in sent.items() if k != "messages"}
    if skipped:
        options["not_sent"] = dict(skipped)
    options["served"] = served(reply)
    choices = reply.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, Mapping) else None
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(message, Mapping) or not isinstance(content, str | None):
        return Completion(text=None, latency_s=latency_s, backend_options=options,
                          error=f"unreadable reply: no chat message text in {excerpt(reply)}")
    usage = reply.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    details = usage.get("prompt_tokens_details")  # OpenAI's prompt caching: cached_tokens of the prompt
    reading: LabelReading | None = None
    if labels is not None:
        top = first_top_logprobs(first)
        reading = None if top is None else reading_from_top(top, labels)
    return Completion(
        text=content or "",
        latency_s=latency_s,
        prompt_tokens=token_count(usage.get("prompt_tokens")),
        completion_tokens=token_count(usage.get("completion_tokens")),
        provider_cached_tokens=token_count(details.get("cached_tokens") if isinstance(details, Mapping) else None),
        backend_options=options,
        label_reading=reading,
        finish_reason=stop_reason(first.get("finish_reason") if isinstance(first, Mapping) else None),
    )



def listing_entry(models: Iterable[Mapping[str, Any]], model_id: str) -> dict[str, Any] | None:
    """The model list's entry whose ``id`` is ``model_id`` (exactly), without its volatile fields."""
    for entry in models:
        if entry.get("id") == model_id:
            return {k: v for k, v in entry.items() if k not in VOLATILE_LISTING_FIELDS}
    return None


def identity_facts(base_url: str | None, model: str, served_model: str | None, fingerprint: str | None,
                   listing: Mapping[str, Any], extra_body: Mapping[str, Any], send_top_k: bool) -> dict[str, Any]:
    """Everything known about what answers (module docstring); ``base_url`` None leaves the address out."""
    known = {"base_url": base_url, "model": model, "served_model": served_model, "system_fingerprint": fingerprint,
             "listing": dict(listing), "extra_body": dict(extra_body), "send_top_k": bool(send_top_k)}
    if base_url is None:  # an endpoint pool's: the same model behind other URLs is the same model
        del known["base_url"]
    return known


def identity_digest(base_url: str | None, model: str, served_model: str | None, fingerprint: str | None,
                    listing: Mapping[str, Any], extra_body: Mapping[str, Any], send_top_k: bool) -> str:
    """The sha256 of the canonical JSON of :func:`identity_facts` (without ``base_url`` when it is None)."""
    known = identity_facts(base_url, model, served_model, fingerprint, listing, extra_body, send_top_k)
    return hashlib.sha256(canonical_json(known).encode("utf-8")).hexdigest()


def redact(text: str, key: str | None) -> str:
    """``text`` without the key and without masked fragments of a key (``sk-ab***yz``)."""
    if key:
        text = text.replace(key, "[key]")
    return _MASKED_KEY.sub("[key]", text)



