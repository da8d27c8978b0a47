"""OpenAI-compatible backend: chat completions from any server that speaks the OpenAI API.

vLLM, SGLang, TGI, llama.cpp's servers, LM Studio, Ollama's ``/v1`` and hosted APIs all answer
``POST {base_url}/chat/completions``; this backend asks them through the official ``openai`` client, one
non-streamed request per cell with the prompt's turns as its messages.

Key. ``model.api_key_env`` names the environment variable that holds the API key; the key itself is
never in the config, a log line, an artifact, a param, a tag, a record or an error message. With
``api_key_env`` null a fixed placeholder is sent (never ``OPENAI_API_KEY``, which the client would
otherwise read on its own and hand to whatever server ``base_url`` names).

Identity. Before the first cell, the model list (``GET /models``) must name ``model.name``, and a one-token
probe chat reply tells what the server says answered: the reply's ``model`` (a hosted alias such as
``gpt-4o`` resolves to a dated snapshot) and its ``system_fingerprint``. The digest is the sha256 of the
canonical JSON of what is known::

    {"base_url", "model", "served_model", "system_fingerprint", "listing", "extra_body", "send_top_k"}

``listing`` is the model's entry in the model list without ``created`` and ``permission(s)`` (vLLM and
llama.cpp's server put the time of the request there). ``extra_body`` and ``send_top_k`` are in it because they
change what the server is asked beyond the canonical parameters, which are all the store key holds otherwise. An
endpoint pool (``model.endpoints``, :mod:`prism.backends.pool`) leaves ``base_url`` out, so the same model
behind other URLs has the same digest; every endpoint must then share the rest and answer one fixed greedy
prompt alike (:meth:`OpenAIBackend.member_identity`). Only a ``system_fingerprint`` counts as pinning what
answered: an id, a path or a listing can point at other weights tomorrow. When there is none (vLLM, SGLang,
llama-cpp-python), the run logs a WARNING and is tagged ``prism.model.pinned=false``: it cannot be reproduced
bit for bit. A reply whose ``model`` or ``system_fingerprint`` differs from the probe's is kept (hosted APIs
rotate fingerprints) with a WARNING, and every record carries what its reply said under
``backend_options.served``.

Fields. ``temperature``, ``max_tokens`` and ``seed`` are always sent, ``top_p`` when set. ``top_k`` is not
an OpenAI field (OpenAI's API rejects it); it is sent only with ``model.send_top_k=true``, for servers
that accept it (vLLM, SGLang, llama.cpp's servers), and otherwise recorded as
``backend_options.not_sent`` with a WARNING. ``model.extra_body`` adds server-specific fields to every
request (llama-cpp-python's server defaults ``repeat_penalty`` to 1.1 where the library uses 1.0).

Label probabilities. With ``generation.label_probs=true`` every request also sends ``logprobs: true`` and
``top_logprobs: 20``, and the first position's top tokens are read as the labels (``label_probs_source:
top_k``: labels outside the list count as 0). Before the first cell a one-token probe with those fields
must come back with log-probabilities, and every label must be one character (a server's vocabulary is
unknown, so a label its tokenizer splits could not be read).

Faults, retries and concurrency are those of the Ollama backend (:mod:`prism.backends.retry`,
:mod:`prism.backends.remote`): a refused, dropped or timed-out connection and 408/429/502/503/504 are
retried within ``model.retry_budget_s`` honouring ``Retry-After``, then the run stops with a
:class:`BackendError`; 401/403/404 stop the run; any other error status, or a body that is not a chat
completion, is a failed request (``error`` set) that the next run asks again.

This module does the talking (client, identity probe, retries, error statuses); what is sent and how a
reply is read are pure functions in :mod:`prism.backends.openai_wire`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import http.client
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from prism.backends.base import BackendError, Request
from prism.backends.openai_cloze import (
    ECHO_PROBE_PROMPT,
    as_chat_reply,
    build_plain_body,
    echo_alignment,
    echo_body,
    echo_logprobs,
)
from prism.backends.openai_http import HTTPClient, StatusError, Unreachable
from prism.backends.openai_wire import (
    NO_KEY,
    POOL_PROBE_BODY,
    PROBE_BODY,
    build_request,
    check_base_url,
    check_extra_body,
    first_top_logprobs,
    identity_digest,
    identity_facts,
    listing_entry,
    not_sent,
    read_api_key,
    read_reply,
    redact,
    served,
)
from prism.backends.registry import BackendEntry, register_backend
from prism.backends.remote import NOTHING_ASKED, RemoteBackend, RemoteModelConfig, sent_options
from prism.backends.retry import Transient, transient_status
from prism.backends.wire import as_dict, excerpt
from prism.cloze import ECHO, ClozeError, continuations, echo_logprob, split_pair
from prism.label_probs import TOP_K, TOP_LOGPROBS, check_label_sets
from prism.types import ClozeReading, Completion, ModelIdentity, canonical_json

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)
T = TypeVar("T")
#: ``model.client``: the official ``openai`` package, or the light path of :mod:`prism.backends.openai_http`.
CLIENTS = ("official", "http")
RESUMABLE_TEXT = "Every completion so far is stored: run the same command again to resume."

def _classify(exc: Exception) -> Transient | None:
    """Transient: a refused, dropped or timed-out connection, or 408/429/502/503/504 (with ``Retry-After``)."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return Transient("timed out")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        return Transient(f"connection refused or dropped ({type(cause).__name__ if cause else 'no reply'})")
    if isinstance(exc, openai.APIStatusError | StatusError):
        headers = exc.headers if isinstance(exc, StatusError) else exc.response.headers
        retry_after = headers.get("retry-after")
        millis = headers.get("retry-after-ms")  # OpenAI's own, finer than Retry-After when both are sent
        if millis is not None:
            with contextlib.suppress(ValueError):  # a bad value leaves Retry-After, or the backoff, in charge
                retry_after = str(float(millis) / 1000.0)
        return transient_status(exc.status_code, retry_after)
    # The light path's transport failures (model.client=http), named as the official client's are.
    if isinstance(exc, TimeoutError):
        return Transient("timed out")
    if isinstance(exc, Unreachable):
        cause = exc.__cause__
        return Transient(f"connection refused or dropped ({type(cause).__name__ if cause else 'no reply'})",
                         refused=True)
    if isinstance(exc, ConnectionError | http.client.HTTPException):
        return Transient(f"connection refused or dropped ({type(exc).__name__})")
    return None


def _status_errors() -> tuple[type[openai.APIStatusError], type[StatusError]]:
    """The error statuses of both clients (``openai`` is imported only once a backend is made: it is slow to import)."""
    import openai

    return openai.APIStatusError, StatusError


def _reply_dict(reply: Any) -> dict[str, Any] | None:
    """A reply as the JSON the server sent: the light path's parsed JSON as is, the official client's model dumped."""
    return reply if isinstance(reply, dict) else as_dict(reply)


@dataclass
class OpenAIModelConfig(RemoteModelConfig):
    """A model served over the OpenAI chat-completions API (vLLM, SGLang, TGI, llama.cpp's server...)."""

    backend: str = "openai"
    # The API root, the part before /chat/completions, e.g. http://HOST:PORT/v1 (required).
    base_url: str | None = None
    # The NAME of the environment variable holding the key (e.g. OPENAI_API_KEY); null: no key.
    api_key_env: str | None = None
    # Server-specific fields added to every chat request (they are part of the model digest, since the
    # store key holds only the canonical parameters), and whether generation.top_k is sent; top_k is not
    # an OpenAI field: vLLM, SGLang and llama.cpp's servers accept it, OpenAI rejects it.
    extra_body: dict[str, Any] = field(default_factory=dict)
    send_top_k: bool = False
    # A pool of servers of one model, each an API root like base_url: every request goes to the one with the
    # fewest in flight (each up to model.concurrency). Set, base_url may be empty or must be one of them, and
    # the model digest leaves the URLs out (prism.backends.pool).
    endpoints: list[str] = field(default_factory=list)
    # How requests are sent: official (the openai package) or http (PRISM's keep-alive http.client connections:
    # the same bodies, retries and errors at about a tenth of the client CPU per request; no HTTP(S)_PROXY).
    client: str = "official"


#: Where OpenAI-compatible servers give a model's context in its model list entry: vLLM and SGLang
#: ``max_model_len``, LM Studio and OpenRouter ``context_length``, llama.cpp's own server ``meta.n_ctx_train``.
CONTEXT_FIELDS = ("max_model_len", "context_length", "context_window", "n_ctx")


def listed_context(listing: Mapping[str, Any]) -> int | None:
    """The context a model list entry gives (:data:`CONTEXT_FIELDS`, or llama.cpp's ``meta.n_ctx_train``), else None."""
    meta = listing.get("meta")
    found = [listing.get(name) for name in CONTEXT_FIELDS]
    found.append(meta.get("n_ctx_train") if isinstance(meta, Mapping) else None)
    for value in found:
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


class OpenAIBackend(RemoteBackend):
    """A model behind an OpenAI-compatible API, asked through one shared ``openai.OpenAI`` client.

    One client serves every worker thread: its HTTP client pools connections and is safe to share
    between threads, and the client keeps no per-request state (its own retries are off, ``max_retries=0``,
    so that :mod:`prism.backends.retry` is the only retry policy).
    """

    backend = "openai"
    chat_endpoint = "/chat/completions"
    name_needed = ("an OpenAI-compatible model needs model.name=ID, the id the server lists under /v1/models (e.g. "
                   "the --served-model-name of vLLM or --model_alias of llama.cpp).")
    fix_busy = ("The server kept answering that it is busy or rate limited: lower model.concurrency, or raise "
                "model.retry_budget_s to wait out a hosted API's rate limit.")
    fix_unreachable = ("Start the server (e.g. `python -m llama_cpp.server --model FILE.gguf --model_alias NAME` or "
                       "`vllm serve MODEL`), or point model.base_url at the address it listens on.")
    address_field = "base_url"

    def __init__(self, model: OpenAIModelConfig) -> None:
        """Check the settings and read the key; nothing is sent until :meth:`identity`.

        Raises:
            BackendError: If ``model.name``, ``model.base_url``, the key's variable, ``model.extra_body`` or
                a transport setting is unusable.
        """
        import openai

        super().__init__(model)
        self._url = check_base_url(model.base_url)
        self._key_env = (model.api_key_env or "").strip() or None
        self._key = read_api_key(self._key_env)
        self._extra_body = check_extra_body(model.extra_body)
        self._send_top_k = model.send_top_k
        kind = str(model.client).strip()
        if kind not in CLIENTS:
            raise BackendError(f"model.client must be one of {', '.join(CLIENTS)}, not {model.client!r}: official "
                               "sends through the openai package, http through PRISM's keep-alive connections "
                               "(about a tenth of the client CPU per request, BENCHMARKS.md section 20).")
        self._client: openai.OpenAI | None = None
        self._http: HTTPClient | None = None
        if kind == "http":
            self._http = HTTPClient(self._url, self._key or NO_KEY, self._settings.request_timeout_s)
        else:
            self._client = openai.OpenAI(base_url=self._url, api_key=self._key or NO_KEY, max_retries=0,
                                         timeout=self._settings.request_timeout_s)
        self._pinned: dict[str, Any] = {}  # what the probe said answered, set by identity()
        self._listing: dict[str, Any] = {}  # the model's entry in /models, set by identity()
        self._context: int | None = None  # the context the model list gives, set by identity()
        self._chat = model.chat

    # -- identity ---------------------------------------------------------------------------------------

    def _read_identity(self) -> ModelIdentity:

        nothing_yet = NOTHING_ASKED
        try:
            page = self._retrying(self._list_models, "/models", nothing_yet)
        except _status_errors() as exc:
            raise self._status_before_start(exc, "/models") from None
        except (ValueError, TypeError) as exc:  # the body was not JSON, or not a list of models
            raise BackendError(f"{self._url}/models answered with something that is not a model list "
                               f"({excerpt(self._redact(str(exc)))}); check model.base_url.") from None
        models = [m for m in (_reply_dict(item) for item in page) if m is not None]
        listing = listing_entry(models, self._name)
        if listing is None:
            ids = [str(m.get("id")) for m in models]
            have = ", ".join(repr(i) for i in ids[:12]) + (", ..." if len(ids) > 12 else "") if ids else "none"
            raise BackendError(
                f"the server at {self._url} does not serve model {self._name!r}: its /models list has {have}. Set "
                "model.name to a listed id (llama.cpp's server lists the --model_alias, vLLM the "
                "--served-model-name), or point model.base_url at the server that serves it."
            )
        probe_body: dict[str, Any] = {"model": self._name, **PROBE_BODY}
        if not self._chat:  # a base model's server may have no chat template: probe what the run will ask
            probe_body = {"model": self._name, "prompt": "Say OK.", "max_tokens": 1, "temperature": 0.0,
                          "stream": False}
        try:
            probe = self._retrying(lambda: self._send(probe_body), self._endpoint(), nothing_yet)
        except _status_errors() as exc:
            raise self._status_before_start(exc, self._endpoint()) from None
        except (ValueError, TypeError) as exc:
            kind = "a chat completion" if self._chat else "a completion"
            raise BackendError(f"{self._url}{self._endpoint()} answered a one-token probe with something that is "
                               f"not {kind} ({excerpt(self._redact(str(exc)))}).") from None
        reply = _reply_dict(probe)
        if reply is None:
            raise BackendError(f"{self._url}{self._endpoint()} answered a one-token probe with a body that is not "
                               f"JSON ({excerpt(self._redact(str(probe)))}); check model.base_url.")
        self._pinned = served(reply)
        self._listing = dict(listing)
        self._context = listed_context(listing)
        fingerprint = self._pinned["system_fingerprint"]
        digest = identity_digest(self._url, self._name, self._pinned["model"], fingerprint, listing,
                                 self._extra_body, self._send_top_k)
        details = {"base_url": self._url, "served_model": str(self._pinned["model"] or "unknown"),
                   "system_fingerprint": fingerprint or "none", "pinned": str(fingerprint is not None).lower(),
                   "listing": excerpt(canonical_json(listing), 1000)}
        if fingerprint is None:
            log.warning(
                "NOT PINNED: the server at %s reports nothing that pins the weights behind %r (no "
                "system_fingerprint; its model list says %s). The run records the served id and that listing "
                "(tag prism.model.pinned=false), but the same id may serve other weights tomorrow: this run cannot "
                "be reproduced bit for bit from its record alone.", self._url, self._name, canonical_json(listing))
        return ModelIdentity(self._name, "openai", digest, details)

    # -- as one endpoint of a pool ------------------------------------------------------------------------

    @classmethod
    def normalize_endpoint(cls, raw: str, source: str) -> str:
        """One API root of ``model.endpoints``, checked as ``model.base_url`` is."""
        return check_base_url(raw, source)

    def member_identity(self) -> tuple[ModelIdentity, dict[str, Any]]:
        """The identity without ``base_url`` in its digest, and what every endpoint must share.

        Shared: every fact of the digest but the address (served id, fingerprint, model-list entry, extra
        body, send_top_k) and the answer to one fixed greedy prompt (:data:`POOL_PROBE_BODY`), which tells
        other weights behind the same id apart.

        Raises:
            BackendError: If the server cannot be reached, does not serve the model, or refuses the probe.
        """
        own = self.identity()
        try:
            reply = self._retrying(lambda: self._send({"model": self._name, **POOL_PROBE_BODY}), "/chat/completions",
                                   NOTHING_ASKED)
        except _status_errors() as exc:
            raise self._status_before_start(exc, "/chat/completions") from None
        except (ValueError, TypeError) as exc:
            raise BackendError(f"{self._url}/chat/completions answered the pool's probe with something that is not "
                               f"a chat completion ({excerpt(self._redact(str(exc)))}).") from None
        data = _reply_dict(reply) or {}
        choices = data.get("choices")
        first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], Mapping) else {}
        message = first.get("message")
        answer = message.get("content") if isinstance(message, Mapping) else None
        facts = identity_facts(None, self._name, self._pinned["model"], self._pinned["system_fingerprint"],
                               self._listing, self._extra_body, self._send_top_k)
        digest = identity_digest(None, self._name, self._pinned["model"], self._pinned["system_fingerprint"],
                                 self._listing, self._extra_body, self._send_top_k)
        return ModelIdentity(own.name, own.backend, digest, dict(own.details)), {**facts, "probe_answer": answer}
    def context_window(self) -> int | None:
        """The served model's context in tokens when its model list says it (after :meth:`identity`), else None."""
        return self._context

    def check_label_probs(self, label_sets: Mapping[str, tuple[str, ...]]) -> None:
        """The server must return log-probabilities, and every label must be one character (``top_k`` source).

        One one-token request with ``logprobs`` and ``top_logprobs`` asks the server whether it gives them.

        Raises:
            LabelProbsError: If a label is longer than one character.
            BackendError: If the server answers without log-probabilities or refuses the fields.
        """
        check_label_sets(label_sets, "openai", TOP_K)
        self.identity()
        probe = {"model": self._name, **PROBE_BODY, "logprobs": True, "top_logprobs": TOP_LOGPROBS}
        advice = ("Serve the model with a server that returns them (vLLM; llama.cpp's server with its logits on, "
                  "as `python -m llama_cpp.server` has by default), use the embedded backend, or set "
                  "generation.label_probs=false.")
        try:
            reply = self._retrying(lambda: self._send(probe), "/chat/completions",
                                   "Nothing was asked yet: run the same command again once the server answers.")
        except _status_errors() as exc:
            raise BackendError(f"generation.label_probs=true, but the server at {self._url} refused a request with "
                               f"logprobs and top_logprobs (HTTP {exc.status_code}: {self._server_says(exc)}), so "
                               f"nothing was asked. {advice}") from None
        data = _reply_dict(reply) or {}
        choices = data.get("choices")
        if first_top_logprobs(choices[0] if isinstance(choices, list) and choices else None) is None:
            raise BackendError(f"generation.label_probs=true, but the server at {self._url} answered a request with "
                               f"logprobs=true without log-probabilities, so nothing was asked. {advice}")

    def check_cloze(self) -> None:
        """The server must echo the prompt's log-probabilities, aligned as the OpenAI legacy format has them.

        One greedy one-token echo of a probe sentence (:func:`prism.backends.openai_cloze.echo_alignment`).

        Raises:
            BackendError: If the server refuses echo, returns no prompt log-probabilities, or returns them
                shifted by one token (llama-cpp-python's server for a model without a BOS token).
        """
        self.identity()
        advice = ("Use the embedded backend (model=smollm2 or any llamacpp model: the same GGUF, read in this "
                  "process), or a server whose echo is aligned (vLLM); or set generation.cloze=false.")
        try:
            reply = self._retrying(lambda: self._send(echo_body(self._name, ECHO_PROBE_PROMPT, self._extra_body)),
                                   "/completions", "Nothing was asked yet: run the same command again once the "
                                   "server answers.")
        except _status_errors() as exc:
            raise BackendError(f"generation.cloze=true, but the server at {self._url} refused a /completions request "
                               f"with echo and logprobs (HTTP {exc.status_code}: {self._server_says(exc)}), so nothing "
                               f"was asked. {advice}") from None
        alignment = echo_alignment(_reply_dict(reply) or {}, ECHO_PROBE_PROMPT)
        if alignment == "aligned":
            return
        why = {
            "missing": "answered without the prompt's log-probabilities",
            "shifted": ("returned them shifted by one token: each position holds the probability of its token as the "
                        "next token after itself (llama-cpp-python's server does this for a model without a BOS "
                        "token, SmolLM2 among them), and the right values cannot be recovered from its reply"),
            "unknown": "returned them in an alignment PRISM cannot verify",
        }[alignment]
        raise BackendError(f"generation.cloze=true, but the server at {self._url} {why}; nothing was asked. {advice}")

    def cloze_reading(self, request: Request) -> ClozeReading:
        """Each option's continuation log-likelihood from one echo request per option (``cloze_source=echo``).

        Raises:
            ClozeError: If an echo has no continuation token or no log-probabilities.
        """
        prompt = request.prompt
        logprobs: dict[str, float] = {}
        tokens: dict[str, int] = {}
        for option in continuations(prompt, request.params.cloze_target):
            context, continuation = split_pair(prompt.text, option.text)
            text = context + continuation
            body = echo_body(self._name, text, self._extra_body)
            reply = _reply_dict(self._retrying(functools.partial(self._send, body), "/completions",
                                               RESUMABLE_TEXT)) or {}
            echoed = echo_logprobs(reply)
            if echoed is None:
                raise ClozeError(f"question {prompt.question_id!r}, condition {prompt.condition!r}: the server's "
                                 "echo reply has no log-probabilities, so the option has no log-likelihood.")
            logprobs[option.label], tokens[option.label] = echo_logprob(
                echoed["token_logprobs"], echoed["text_offset"], len(context), len(text))
        chars = {o.label: o.chars for o in continuations(prompt, request.params.cloze_target)}
        return ClozeReading(logprobs, tokens, chars, ECHO)

    def generate(self, request: Request) -> Completion:
        """The completion, and with ``cloze`` each option's log-likelihood from its echo (after the generation)."""
        completion = super().generate(request)
        if not request.params.cloze or completion.error is not None:
            return completion
        return dataclasses.replace(completion, cloze_reading=self.cloze_reading(request))

    def _status_before_start(self, exc: openai.APIStatusError | StatusError, endpoint: str) -> BackendError:
        """The BackendError for an error status before the first cell (nothing was asked yet)."""
        status = exc.status_code
        if status in (401, 403):
            return self._refused(status, exc)
        if status == 404 and endpoint == "/models":
            hint = "" if self._url.endswith("/v1") else " Most servers serve the API under /v1: try " \
                f"model.base_url={self._url}/v1."
            return BackendError(f"{self._url}/models answered HTTP 404: there is no OpenAI-compatible API at "
                                f"model.base_url={self._url}.{hint}")
        return BackendError(
            f"{self._url}{endpoint} answered HTTP {status} before any cell was asked ({self._server_says(exc)}). "
            f"Check model.name={self._name!r}, model.base_url and model.extra_body against the server."
        )

    def _refused(self, status: int, exc: openai.APIStatusError | StatusError) -> BackendError:
        """The BackendError for 401/403: names the variable that holds the key, never the key."""
        if self._key_env is None:
            fix = ("model.api_key_env is not set, so no key was sent: put the key in an environment variable and "
                   "set model.api_key_env=NAME.")
        else:
            fix = (f"The key was read from {self._key_env}: check that it is the key this server expects (a "
                   "server started with --api_key / --api-key accepts only that one).")
        return BackendError(f"the server at {self._url} refused the client (HTTP {status}: "
                            f"{self._server_says(exc)}). {fix}")

    def _server_says(self, exc: openai.APIStatusError | StatusError) -> str:
        """The server's error message, short and without the key."""
        body = exc.body
        message = (body.get("message") or body.get("detail")) if isinstance(body, Mapping) else None
        return excerpt(self._redact(str(message or exc.message)))

    def _redact(self, text: str) -> str:
        return redact(text, self._key)

    # -- requests ---------------------------------------------------------------------------------------

    def _build(self, request: Request) -> dict[str, Any]:
        skipped = not_sent(request, self._send_top_k)
        if skipped:
            self._warn_once("not_sent", "generation.top_k=%s is not an OpenAI chat-completions field and was not "
                            "sent (model.send_top_k=false): the server sampled with its own top_k, and each record "
                            "says so under backend_options.not_sent. Set model.send_top_k=true for a server that "
                            "accepts it (vLLM, SGLang, llama.cpp do), or generation.top_k=null.", skipped["top_k"])
        if not self._chat:
            return build_plain_body(request, self._name, self._extra_body, self._send_top_k)
        return build_request(request, self._name, self._extra_body, self._send_top_k)

    def _endpoint(self) -> str:
        """``/chat/completions``, or ``/completions`` where ``model.chat=false`` sends every cell."""
        return self.chat_endpoint if self._chat else "/completions"

    def _list_models(self) -> list[Any]:
        """The entries of ``GET /models``: dicts from the light path, the official client's models otherwise.

        Raises:
            ValueError: If the light path's reply is not a JSON object (the official client raises its own).
        """
        if self._http is not None:
            page = self._http.get("/models")
            if not isinstance(page, dict):
                raise ValueError(f"not a JSON object: {excerpt(page)}")
            data = page.get("data")
            return data if isinstance(data, list) else []
        assert self._client is not None
        return list(getattr(self._client.models.list(), "data", None) or [])

    def _send(self, body: Mapping[str, Any]) -> Any:
        """Send one chat-completions body exactly as built.

        The light path (``model.client=http``) sends the body itself as JSON. The official client is given
        everything but the model, messages and stream flag through ``extra_body``, which it merges into the
        JSON unchanged: the body is written once, by :func:`build_request`, and what ``backend_options``
        records is what went over the wire.
        """
        if self._http is not None:  # stream=false as the official client always sends it (the probes leave it out)
            return self._http.post("/completions" if "prompt" in body else "/chat/completions",
                                   {**body, "stream": False})
        assert self._client is not None
        if "prompt" in body:  # a plain completion (model.chat=false) or a cloze echo: /completions
            rest = {k: v for k, v in body.items() if k not in ("model", "prompt", "stream")}
            return self._client.completions.create(model=body["model"], prompt=body["prompt"], stream=False,
                                                   extra_body=rest)
        rest = {k: v for k, v in body.items() if k not in ("model", "messages", "stream")}
        return self._client.chat.completions.create(model=body["model"], messages=body["messages"], stream=False,
                                                    extra_body=rest)

    def _read(self, reply: Any, request: Request, body: Mapping[str, Any], latency_s: float) -> Completion:
        data = _reply_dict(reply)
        if data is None:
            return self._failed(request, body, latency_s,
                                f"unreadable reply: not JSON ({excerpt(self._redact(str(reply)))})")
        if not self._chat:
            data = as_chat_reply(data)
        labels = request.prompt.displayed_labels if request.params.label_probs and self._chat else None
        completion = read_reply(data, latency_s, body, not_sent(request, self._send_top_k), labels)
        return self._warn_if_served_changed(completion, self._pinned, "the server at " + self._url)

    def _classify(self, exc: Exception) -> Transient | None:
        return _classify(exc)

    def _failed_request(self, exc: Exception) -> str | None:
        """Any error status but 401/403 and 404, or a body the client could not read, is a failed request."""
        import openai

        if isinstance(exc, openai.APIStatusError | StatusError):
            status = exc.status_code
            if status in (401, 403):
                raise self._refused(status, exc) from None
            if status == 404:
                raise BackendError(
                    f"the server at {self._url} no longer serves {self._name!r} (HTTP 404: "
                    f"{self._server_says(exc)}); it changed after the run started. Serve the model again and run "
                    "the same command: it resumes where this one stopped."
                ) from None
            return f"the server answered HTTP {status}: {self._server_says(exc)}"
        if isinstance(exc, ValueError | TypeError):  # the client could not read the body (not JSON, wrong shape)
            return f"unreadable reply: {excerpt(self._redact(str(exc)))}"
        return None

    def _options(self, request: Request, body: Mapping[str, Any]) -> dict[str, Any]:
        """The body without messages, and what was not sent (``not_sent``) after an error status."""
        options = sent_options(body)
        skipped = not_sent(request, self._send_top_k)
        if skipped:
            options["not_sent"] = dict(skipped)
        return options

    # -- texts ------------------------------------------------------------------------------------------

    def _where(self) -> str:
        return self._url

    def _who(self) -> str:
        return f"the server at {self._url}"

    def close(self) -> None:
        """Close the client's connections."""
        if self._http is not None:
            self._http.close()
        if self._client is not None:
            self._client.close()


# The backend's one entry: model.backend="openai" finds its schema, factory and capabilities here.
OPENAI = register_backend(BackendEntry(
    "openai", OpenAIModelConfig, OpenAIBackend, keyed_settings=("chat",),
    capabilities=frozenset({"label_probs", "system_turn", "endpoints", "plain", "cloze", "context_window"}),
))
