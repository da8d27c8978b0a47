"""Anthropic backend: Claude through the Messages API (``POST /v1/messages``) and the official ``anthropic`` SDK.

The SDK is an optional extra (``pip install 'prism[anthropic]'`` or ``pip install anthropic``), imported only
when the backend is made. One non-streamed request per cell, the prompt as the single user message (with a
conversation's earlier turns before it; a system turn as the top-level ``system`` field, :func:`build_request`).

Key. ``model.api_key_env`` (default ``ANTHROPIC_API_KEY``) names the environment variable that holds the key;
the key itself is never in the config, a log line, an artifact, a param, a tag, a record or an error message.
The key is always handed to the SDK explicitly, so the SDK never reads a variable on its own; ``base_url`` is
handed explicitly too (default ``https://api.anthropic.com``), so ``ANTHROPIC_BASE_URL`` is never read either.

Requests. Only ``POST {base_url}/v1/messages`` is ever sent: the Messages API needs no model list to run, and
none is read. Before the first cell a one-token probe (``max_tokens: 1``, "Say OK.") asks what answers under
``model.name``; it costs about ten input tokens and one output token and is not counted in a run's token
metrics (those count cells).

Identity. Anthropic publishes no fingerprint of the weights. The digest is the sha256 of the canonical JSON of
what is known::

    {"base_url", "model", "served_model"}

``served_model`` is the ``model`` the probe's reply names (for an alias, what it resolved to). A dated id
(``claude-...-20250929``, Anthropic's snapshot naming) counts as pinned, tag ``prism.model.pinned=true``; an
undated alias is not pinned (a WARNING says so): the same alias may be served by another snapshot tomorrow,
and only the reply's ``model`` would show it. Every record keeps what its reply named under
``backend_options.served``; a reply naming another model than the probe is kept, with a WARNING.

Fields. ``model``, ``max_tokens``, ``messages`` and ``temperature`` are always sent, ``top_p`` and ``top_k``
when set (both are Messages API fields). The API has no ``seed``: a set seed is recorded as
``backend_options.not_sent`` with a WARNING (a hosted model's sampled answers cannot be replayed from a seed).
``stop_reason`` is recorded as ``finish_reason``: ``max_tokens`` -> ``length``, ``end_turn`` and
``stop_sequence`` -> ``stop``, anything else (``refusal``, ``tool_use``, ``pause_turn``) as Anthropic says it.
The usage's ``input_tokens`` and ``output_tokens`` are ``prompt_tokens`` and ``completion_tokens``;
``cache_read_input_tokens``, when the usage has it, is ``provider_cached_tokens``.

Faults (the API's documented statuses). A refused, dropped or timed-out connection, 429 ``rate_limit_error``,
529 ``overloaded_error`` and 408/502/503/504 are retried within ``model.retry_budget_s`` honouring
``retry-after``, then the run stops with a :class:`BackendError` that says everything collected is kept;
401/403 stop the run naming the variable the key was read from (never the key); 404 stops it naming
``model.name``; 400, 413, 500 or a body that is not a message are a failed request (``error`` set) that the
next run asks again.

No log-probabilities: the entry declares no ``label_probs`` capability, so ``generation.label_probs=true`` is
refused by the registry before anything is asked.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prism.backends.base import BackendError, Request
from prism.backends.registry import BackendEntry, register_backend
from prism.backends.remote import NOTHING_ASKED, RemoteBackend, RemoteModelConfig, sent_options
from prism.backends.retry import Transient, parse_retry_after, transient_status
from prism.backends.wire import as_dict, excerpt, token_count
from prism.types import Completion, ModelIdentity, canonical_json

if TYPE_CHECKING:
    import anthropic

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.anthropic.com"
#: The probe before the first cell: one token, greedy.
PROBE_BODY: dict[str, Any] = {"max_tokens": 1, "messages": [{"role": "user", "content": "Say OK."}],
                              "temperature": 0.0}
#: Anthropic's stop reasons in PRISM's words (the OpenAI-compatible ones); others are kept as said.
FINISH_REASONS = {"max_tokens": "length", "end_turn": "stop", "stop_sequence": "stop"}
#: 529 is Anthropic's "API temporarily overloaded": retried like a busy server.
OVERLOADED = 529
_DATED = re.compile(r".*-\d{8}$")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CREDENTIALS = re.compile(r"//[^/]*@")
_URL_FORMS = "https://api.anthropic.com or http://HOST:PORT (the root, without /v1)"


@dataclass
class AnthropicModelConfig(RemoteModelConfig):
    """A Claude model asked through Anthropic's Messages API (the ``anthropic`` SDK)."""

    backend: str = "anthropic"
    # The API root without /v1 (a proxy or a test server: http://127.0.0.1:PORT); null: https://api.anthropic.com.
    base_url: str | None = None
    # The NAME of the environment variable holding the key.
    api_key_env: str = "ANTHROPIC_API_KEY"
    # Hosted rate limits: a minute of retrying rides out a 429 or 529 that names a retry-after.
    retry_budget_s: float = 60.0


def check_base_url(raw: str | None) -> str:
    """``model.base_url`` without a trailing slash (the default when null).

    Raises:
        BackendError: If it is not http(s), names no host, has credentials, a query or fragment, or ends in /v1.
    """
    if raw is None or not str(raw).strip():
        return DEFAULT_BASE_URL
    url = str(raw).strip().rstrip("/")
    shown = _CREDENTIALS.sub("//[credentials]@", url)

    def bad(why: str) -> BackendError:
        return BackendError(f"model.base_url={shown!r} is not a Messages API root: {why}. Use {_URL_FORMS}.")

    try:
        split = urllib.parse.urlsplit(url)
        port = split.port
    except ValueError as exc:
        raise bad(str(exc)) from None
    if any(c.isspace() for c in url):
        raise bad("it contains whitespace")
    if split.scheme.lower() not in ("http", "https"):
        raise bad("the scheme is not http or https")
    if not split.hostname:
        raise bad("it names no host")
    if "@" in split.netloc:
        raise bad("credentials in the address would be logged; put the key in the variable model.api_key_env names")
    if split.query or split.fragment:
        raise bad("it has a query or fragment")
    if port == 0:
        raise bad("port 0 cannot be connected to")
    if split.path.rstrip("/").endswith("/v1"):
        raise bad(f"the SDK appends /v1/messages itself; drop /v1 (model.base_url={shown.removesuffix('/v1')})")
    return url


def read_api_key(env_name: str | None, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(variable name, key) from the variable ``model.api_key_env`` names.

    Raises:
        BackendError: Naming the variable (never a value) when it is unset, empty or not a variable name.
    """
    name = str(env_name or "").strip()
    if not name:
        raise BackendError("model.api_key_env must name the environment variable that holds the Anthropic API key "
                           "(default ANTHROPIC_API_KEY); the Messages API needs a key.")
    if not _ENV_NAME.fullmatch(name):  # most likely the key itself: never echo it
        raise BackendError("model.api_key_env must be the NAME of an environment variable (letters, digits and _), "
                           "not the key; what was given is not a variable name and is not repeated here. Put the key "
                           "in a variable (export ANTHROPIC_API_KEY=...) and set model.api_key_env=ANTHROPIC_API_KEY.")
    env = os.environ if environ is None else environ
    key = env.get(name, "").strip()
    if not key:
        raise BackendError(f"model.api_key_env={name} names the environment variable that holds the Anthropic API "
                           f"key, but {name} is {'empty' if name in env else 'not set'}. Export it (export "
                           f"{name}=...) before running, or name another variable with model.api_key_env.")
    return name, key


def build_request(request: Request, model: str) -> dict[str, Any]:
    """The Messages API body: the prompt's turns as the messages; ``top_p``/``top_k`` when set.

    A prompt of one turn is the single user message. Earlier turns of a conversation (``Prompt.earlier_turns``)
    go before it, except ``system`` turns: the Messages API takes the system prompt
    as the top-level ``system`` field, never as a message, so they go there (joined by a blank line).
    """
    params = request.params
    turns = request.prompt.earlier_turns
    system = [str(turn.content) for turn in turns if turn.role == "system"]
    messages = [{"role": str(turn.role), "content": str(turn.content)} for turn in turns if turn.role != "system"]
    body: dict[str, Any] = {"model": model, "max_tokens": params.max_tokens,
                            "messages": [*messages, {"role": "user", "content": request.prompt.text}],
                            "temperature": params.temperature}
    if system:
        body["system"] = "\n\n".join(system)
    if params.top_p is not None:
        body["top_p"] = params.top_p
    if params.top_k is not None:
        body["top_k"] = params.top_k
    return body


def not_sent(request: Request) -> dict[str, Any]:
    """Canonical parameters that were set but that the Messages API has no field for: ``seed``."""
    seed = request.params.seed
    return {"seed": seed} if seed is not None else {}


def finish_reason(stop: Any) -> str | None:
    """``stop_reason`` in PRISM's words (:data:`FINISH_REASONS`), others as said; None when absent."""
    if not isinstance(stop, str) or not stop:
        return None
    return FINISH_REASONS.get(stop, stop)


def served(reply: Mapping[str, Any]) -> dict[str, Any]:
    """What a reply says answered: its ``model`` (None when absent)."""
    model = reply.get("model")
    return {"model": model if isinstance(model, str) and model else None}


def read_reply(reply: Mapping[str, Any], latency_s: float, sent: Mapping[str, Any],
               skipped: Mapping[str, Any] | None = None) -> Completion:
    """Turn a Messages API reply (as a dict) into a Completion.

    The text is the concatenation of the ``text`` blocks of ``content`` (an empty list, as after a refusal, is
    an observed empty completion); a reply whose ``type`` is not ``message`` or whose ``content`` is not a list
    is a failed request. ``backend_options`` is the body without the messages, ``not_sent`` when set parameters
    were not sent, and ``served``.
    """
    options = sent_options(sent)
    if skipped:
        options["not_sent"] = dict(skipped)
    options["served"] = served(reply)
    content = reply.get("content")
    if reply.get("type") != "message" or not isinstance(content, list):
        return Completion(text=None, latency_s=latency_s, backend_options=options,
                          error=f"unreadable reply: not a message in {excerpt(reply)}")
    text = "".join(str(block.get("text") or "") for block in content
                   if isinstance(block, Mapping) and block.get("type") == "text")
    usage = reply.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    return Completion(
        text=text,
        latency_s=latency_s,
        prompt_tokens=token_count(usage.get("input_tokens")),
        completion_tokens=token_count(usage.get("output_tokens")),
        provider_cached_tokens=token_count(usage.get("cache_read_input_tokens")),
        backend_options=options,
        finish_reason=finish_reason(reply.get("stop_reason")),
    )


def identity_digest(base_url: str, model: str, served_model: str | None) -> str:
    """The sha256 of the canonical JSON of what is known about what answers (module docstring)."""
    known = {"base_url": base_url, "model": model, "served_model": served_model}
    return hashlib.sha256(canonical_json(known).encode("utf-8")).hexdigest()


def redact(text: str, key: str) -> str:
    """``text`` without the key."""
    return text.replace(key, "[key]") if key else text


def _classify(exc: Exception) -> Transient | None:
    """Transient: a refused, dropped or timed-out connection, 429, 529 or 408/502/503/504 (with ``retry-after``)."""
    import anthropic

    if isinstance(exc, anthropic.APITimeoutError):
        return Transient("timed out")
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        return Transient(f"connection refused or dropped ({type(cause).__name__ if cause else 'no reply'})")
    if isinstance(exc, anthropic.APIStatusError):
        retry_after = exc.response.headers.get("retry-after")
        if exc.status_code == OVERLOADED:
            return Transient("HTTP 529 (overloaded)", parse_retry_after(retry_after))
        return transient_status(exc.status_code, retry_after)
    return None


def _error_message(exc: anthropic.APIStatusError) -> str:
    """The ``error.type: error.message`` of Anthropic's error body, or the SDK's message."""
    body = exc.body
    error = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(error, Mapping) and error.get("message"):
        kind = error.get("type")
        return f"{kind}: {error['message']}" if kind else str(error["message"])
    return str(exc.message)


class AnthropicBackend(RemoteBackend):
    """A Claude model behind the Messages API, asked through one shared ``anthropic.Anthropic`` client.

    The SDK's own retries are off (``max_retries=0``): :mod:`prism.backends.retry` is the only retry policy.
    """

    backend = "anthropic"
    chat_endpoint = "/v1/messages"
    name_needed = ("model=anthropic needs model.name=ID, the Claude model id (e.g. claude-sonnet-4-5-20250929; a "
                   "dated id pins the snapshot).")
    fix_busy = ("The API kept answering that it is rate limited (429) or overloaded (529): lower model.concurrency, "
                "or raise model.retry_budget_s to wait out the limit.")
    fix_unreachable = ("Check the network and model.base_url (null for https://api.anthropic.com; a proxy or test "
                       "server as http://HOST:PORT, without /v1).")

    def __init__(self, model: AnthropicModelConfig) -> None:
        """Check the settings and read the key; nothing is sent until :meth:`identity`.

        Raises:
            BackendError: If the SDK is missing, or ``model.name``, ``model.base_url``, the key's variable or a
                transport setting is unusable.
        """
        try:
            import anthropic
        except ImportError:
            raise BackendError("model=anthropic needs the official anthropic SDK: pip install 'prism[anthropic]' "
                               "(or pip install anthropic).") from None
        super().__init__(model)
        self._url = check_base_url(model.base_url)
        self._key_env, self._key = read_api_key(model.api_key_env)
        self._client = anthropic.Anthropic(api_key=self._key, base_url=self._url, max_retries=0,
                                           timeout=self._settings.request_timeout_s)
        self._pinned: dict[str, Any] = {}

    # -- identity ---------------------------------------------------------------------------------------

    def _read_identity(self) -> ModelIdentity:
        import anthropic

        try:
            probe = self._retrying(lambda: self._send({"model": self._name, **PROBE_BODY}), self.chat_endpoint,
                                   NOTHING_ASKED)
        except anthropic.APIStatusError as exc:
            raise self._fatal(exc, before_start=True) from None
        except (ValueError, TypeError) as exc:
            raise BackendError(f"{self._url}/v1/messages answered a one-token probe with something that is not a "
                               f"message ({excerpt(self._redact(str(exc)))}); check model.base_url.") from None
        reply = as_dict(probe)
        if reply is None or reply.get("type") != "message":
            raise BackendError(f"{self._url}/v1/messages answered a one-token probe with a body that is not a "
                               f"message ({excerpt(self._redact(str(probe)))}); check model.base_url.")
        self._pinned = served(reply)
        served_model = self._pinned["model"]
        pinned = isinstance(served_model, str) and bool(_DATED.fullmatch(served_model))
        if not pinned:
            log.warning("NOT PINNED: %s answered %r as %r, which is not a dated snapshot id: the same alias may be "
                        "served by another snapshot tomorrow (tag prism.model.pinned=false). Use a dated model id "
                        "to pin it.", self._url, self._name, served_model)
        digest = identity_digest(self._url, self._name, served_model)
        details = {"base_url": self._url, "served_model": str(served_model or "unknown"),
                   "pinned": str(pinned).lower()}
        return ModelIdentity(self._name, "anthropic", digest, details)

    def _fatal(self, exc: anthropic.APIStatusError, *, before_start: bool) -> BackendError:
        """The BackendError of a 401/403/404 (or, before the first cell, any error status)."""
        status = exc.status_code
        says = self._server_says(exc)
        if status in (401, 403):
            what = "refused the key" if status == 401 else "refused this key the model or resource"
            return BackendError(
                f"the Messages API at {self._url} {what} (HTTP {status}: {says}). The key was read from "
                f"{self._key_env} (model.api_key_env): check that it holds a valid Anthropic API key with access to "
                f"{self._name!r}, or name another variable with model.api_key_env."
                + ("" if before_start else " Everything collected so far is kept: fix the key and run the same "
                   "command again; it resumes where this run stopped.")
            )
        if status == 404:
            return BackendError(
                f"the Messages API at {self._url} does not know model.name={self._name!r} (HTTP 404: {says}). Set "
                "model.name to a Claude model id your key may use (e.g. claude-sonnet-4-5-20250929), or check "
                "model.base_url (the root, without /v1)."
            )
        return BackendError(f"{self._url}/v1/messages answered HTTP {status} before any cell was asked ({says}). "
                            f"Check model.name={self._name!r} and model.base_url.")

    def _server_says(self, exc: anthropic.APIStatusError) -> str:
        return excerpt(self._redact(_error_message(exc)))

    def _redact(self, text: str) -> str:
        return redact(text, self._key)

    # -- requests ---------------------------------------------------------------------------------------

    def _build(self, request: Request) -> dict[str, Any]:
        skipped = not_sent(request)
        if skipped:
            self._warn_once("not_sent", "generation.seed=%s was not sent: the Messages API has no seed, so Claude's "
                            "sampled answers cannot be reproduced from one (each record says so under "
                            "backend_options.not_sent).", skipped["seed"])
        return build_request(request, self._name)

    def _send(self, body: Mapping[str, Any]) -> Any:
        """Send one Messages API body exactly as built.

        The sampling fields go through ``extra_body``, which the SDK merges into the JSON unchanged (its
        recent releases no longer name ``temperature``, ``top_p`` or ``top_k`` as arguments, though the API
        takes them): what ``backend_options`` records is what went over the wire.
        """
        rest = {k: v for k, v in body.items() if k not in ("model", "max_tokens", "messages")}
        return self._client.messages.create(model=body["model"], max_tokens=body["max_tokens"],
                                            messages=body["messages"], extra_body=rest)

    def _read(self, reply: Any, request: Request, body: Mapping[str, Any], latency_s: float) -> Completion:
        data = as_dict(reply)
        if data is None:
            return self._failed(request, body, latency_s,
                                f"unreadable reply: not JSON ({excerpt(self._redact(str(reply)))})")
        completion = read_reply(data, latency_s, body, not_sent(request))
        return self._warn_if_served_changed(completion, self._pinned, "the Messages API at " + self._url)

    def _classify(self, exc: Exception) -> Transient | None:
        return _classify(exc)

    def _failed_request(self, exc: Exception) -> str | None:
        """401/403/404 stop the run; any other error status, or a body the SDK could not read, is a failed request."""
        import anthropic

        if isinstance(exc, anthropic.APIStatusError):
            if exc.status_code in (401, 403, 404):
                raise self._fatal(exc, before_start=False) from None
            return f"the Messages API answered HTTP {exc.status_code}: {self._server_says(exc)}"
        if isinstance(exc, ValueError | TypeError):
            return f"unreadable reply: {excerpt(self._redact(str(exc)))}"
        return None

    def _options(self, request: Request, body: Mapping[str, Any]) -> dict[str, Any]:
        options = sent_options(body)
        skipped = not_sent(request)
        if skipped:
            options["not_sent"] = dict(skipped)
        return options

    # -- texts ------------------------------------------------------------------------------------------

    def _where(self) -> str:
        return self._url

    def _who(self) -> str:
        return f"the Messages API at {self._url}"

    def close(self) -> None:
        """Close the client's connections."""
        self._client.close()




# The backend's one entry. No log-probabilities (the Messages API returns none): label_probs is refused
# before any request. A system turn goes in the top-level ``system`` field.
ANTHROPIC = register_backend(BackendEntry("anthropic", AnthropicModelConfig, AnthropicBackend,
                                          capabilities=frozenset({"system_turn"})))
