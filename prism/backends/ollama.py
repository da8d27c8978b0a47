"""Ollama backend: chat completions from an Ollama server through the official ``ollama`` client.

The server is ``model.host``, else ``OLLAMA_HOST``, else ``http://localhost:11434``; the address is
checked before anything is sent. Identity is the digest the server lists for the tag (``/api/tags``),
read before the first request: a tag such as ``llama3`` can point at other weights tomorrow, its digest
cannot. Each request is one non-streamed ``/api/chat`` call with the prompt's turns as its messages.
A refused or dropped connection, a timeout or a busy server is retried by :mod:`prism.backends.retry`
within ``model.retry_budget_s``, then the run stops with a :class:`BackendError`; a reply whose body is
not a chat completion is a failed request (``error`` set), never an answer.

With ``generation.label_probs=true`` each chat also sends ``logprobs: true`` and ``top_logprobs: 20``
(top-level fields of ``/api/chat``, served from Ollama 0.12.11 and sent by the official client from 0.6.1),
and the first position's top tokens are read as the labels (``label_probs_source: top_k``). A one-token
probe before the first cell must come back with ``logprobs``, and every label must be one character.
"""

from __future__ import annotations

import ipaddress
import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from prism.backends.base import BackendError, Request
from prism.backends.registry import BackendEntry, register_backend
from prism.backends.remote import NOTHING_ASKED, RemoteBackend, RemoteModelConfig
from prism.backends.retry import Transient, transient_status, transport_failure
from prism.backends.wire import excerpt, stop_reason, token_count
from prism.label_probs import TOP_K, TOP_LOGPROBS, check_label_sets, reading_from_top
from prism.types import Completion, LabelReading, ModelIdentity

if TYPE_CHECKING:
    import ollama

T = TypeVar("T")

DEFAULT_HOST = "http://localhost:11434"
DEFAULT_PORT = 11434
# Ollama's default registry and namespace: `llama3`, `library/llama3` and
# `registry.ollama.ai/library/llama3` all name the model its list shows as `llama3:latest`.
_DEFAULT_PREFIXES = ("registry.ollama.ai/library/", "registry.ollama.ai/", "library/")
# A DNS name or IPv4 address (labels of letters, digits, '-' and '_'); IPv6 goes through ipaddress.
_HOSTNAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?")
_HOST_FORMS = ("http://HOST:PORT, https://HOST[:PORT], HOST:PORT or HOST (port 11434 when omitted), "
               "e.g. http://localhost:11434")


@dataclass
class OllamaModelConfig(RemoteModelConfig):
    """A model tag served by Ollama."""

    backend: str = "ollama"
    # null: OLLAMA_HOST, else http://localhost:11434.
    host: str | None = None
    # Ollama's context length option; null leaves the model's own.
    num_ctx: int | None = None
    # A pool of Ollama servers of one model (addresses as model.host takes them): every request goes to the
    # one with the fewest in flight, each up to model.concurrency; every server must list the same digest.
    # Set, model.host may be null or must be one of them (prism.backends.pool).
    endpoints: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class OllamaHost:
    """Where the server is, and where that address came from (for error messages).

    Attributes:
        url: Normalized base URL, ``scheme://host:port[/path]``, as the client is given it.
        source: ``model.host``, ``OLLAMA_HOST`` or ``the default``.
    """

    url: str
    source: str

    def __str__(self) -> str:
        """``http://host:port (from SOURCE)``."""
        return f"{self.url} (from {self.source})"


def normalize_host(raw: str, source: str = "model.host") -> str:
    """Check an Ollama address and return it as ``scheme://host:port[/path]``.

    Accepts what the official client accepts (``http://host:port``, ``https://host``, ``host:port``,
    ``host``, bracketed IPv6) with its defaults: port 11434 without a scheme, else 80 or 443.

    Args:
        raw: The address as configured.
        source: Where it came from, named in the error.

    Raises:
        BackendError: For an empty address, whitespace, an unknown scheme, a bad host or port, or
            credentials, query or fragment (which the client would silently drop).
    """

    def bad(why: str) -> BackendError:
        return BackendError(f"{source}={raw!r} is not an Ollama server address: {why}. Use {_HOST_FORMS}.")

    if not raw:
        raise bad("it is empty")
    if any(c.isspace() for c in raw):
        raise bad("it contains whitespace")
    scheme, sep, rest = raw.partition("://")
    if sep:
        scheme = scheme.lower()
        if scheme not in ("http", "https"):
            raise bad(f"the scheme {scheme!r} is not http or https")
        default_port = 80 if scheme == "http" else 443
    else:
        scheme, rest, default_port = "http", raw, DEFAULT_PORT
    if "://" in rest:
        raise bad("it has two schemes")
    try:
        split = urllib.parse.urlsplit(f"{scheme}://{rest}")
    except ValueError as exc:  # e.g. an unclosed IPv6 bracket
        raise bad(str(exc)) from None
    if not split.netloc:
        raise bad("it names no host")
    if "@" in split.netloc:
        raise bad("credentials in the address are not supported (a server that needs a key reads OLLAMA_API_KEY)")
    if split.query or split.fragment or "?" in rest or "#" in rest:
        raise bad("it has a query or fragment")
    try:
        port = split.port
    except ValueError as exc:
        raise bad(f"the port is not a number from 1 to 65535 ({exc})") from None
    if port == 0:
        raise bad("port 0 cannot be connected to")
    host = split.hostname or "127.0.0.1"  # `:PORT` means this machine, as for the client
    if split.netloc.startswith("["):
        try:
            host = f"[{ipaddress.IPv6Address(host).compressed}]"
        except ValueError:
            raise bad(f"{host!r} is not an IPv6 address") from None
    elif not _HOSTNAME.fullmatch(host):
        raise bad(f"{host!r} is not a host name or IP address")
    path = split.path.strip("/")
    return f"{scheme}://{host}:{port or default_port}" + (f"/{path}" if path else "")


def resolve_host(configured: str | None, environ: Mapping[str, str] | None = None) -> OllamaHost:
    """``model.host`` when set, else ``OLLAMA_HOST`` when non-empty, else ``http://localhost:11434``.

    Raises:
        BackendError: If the chosen address is not one the client accepts (see :func:`normalize_host`).
    """
    env = os.environ if environ is None else environ
    if configured is not None and str(configured) != "":
        return OllamaHost(normalize_host(str(configured), "model.host"), "model.host")
    if env.get("OLLAMA_HOST"):
        return OllamaHost(normalize_host(env["OLLAMA_HOST"], "OLLAMA_HOST"), "OLLAMA_HOST")
    return OllamaHost(DEFAULT_HOST, "the default")


def normalize_tag(name: str) -> str:
    """The name Ollama lists for a model tag: default registry and namespace dropped, ``:latest`` added.

    ``llama3`` -> ``llama3:latest``; ``user/model`` -> ``user/model:latest``; ``qwen2.5:7b`` unchanged.
    """
    tag = name.strip()
    for prefix in _DEFAULT_PREFIXES:
        if tag.lower().startswith(prefix):
            tag = tag[len(prefix) :]
            break
    if ":" not in tag.rsplit("/", 1)[-1]:  # a ':' before the last '/' is a registry's port, not a tag
        tag += ":latest"
    return tag


def find_listed(models: Iterable[Mapping[str, Any]], tag: str) -> Mapping[str, Any] | None:
    """The entry of an ``/api/tags`` model list that names ``tag`` (compared as Ollama does, ignoring case)."""
    wanted = normalize_tag(tag).casefold()
    for entry in models:
        listed = entry.get("model") or entry.get("name")
        if isinstance(listed, str) and normalize_tag(listed).casefold() == wanted:
            return entry
    return None


def build_request(request: Request, model: str, num_ctx: int | None = None) -> dict[str, Any]:
    """The ``/api/chat`` body: the prompt's turns as the messages, no streaming, mapped options.

    Canonical parameters map to Ollama's option names (``max_tokens`` -> ``num_predict``); ``seed``,
    ``top_p`` and ``top_k`` are sent only when set, so the model's own defaults are not overridden by
    a null, and ``num_ctx`` only when ``model.num_ctx`` sets it.
    """
    params = request.params
    options: dict[str, Any] = {"temperature": params.temperature, "num_predict": params.max_tokens}
    if params.seed is not None:
        options["seed"] = params.seed
    if params.top_p is not None:
        options["top_p"] = params.top_p
    if params.top_k is not None:
        options["top_k"] = params.top_k
    if num_ctx is not None:
        options["num_ctx"] = num_ctx
    body: dict[str, Any] = {
        "model": model,
        "messages": request.prompt.messages(),
        "stream": False,
        "options": options,
    }
    if params.label_probs:
        body["logprobs"] = True
        body["top_logprobs"] = TOP_LOGPROBS
    return body


def first_top_logprobs(reply: Mapping[str, Any]) -> list[tuple[str, float]] | None:
    """The first generated token's top list of an ``/api/chat`` reply (``logprobs[0].top_logprobs``), or None."""
    logprobs = reply.get("logprobs")
    first = logprobs[0] if isinstance(logprobs, list | tuple) and logprobs else None
    top = first.get("top_logprobs") if isinstance(first, Mapping) else None
    if not isinstance(top, list | tuple) or not top:
        return None
    pairs = [(entry.get("token"), entry.get("logprob")) for entry in top if isinstance(entry, Mapping)]
    return [(str(token), float(logprob)) for token, logprob in pairs
            if isinstance(token, str) and isinstance(logprob, int | float) and not isinstance(logprob, bool)]



def read_reply(reply: Mapping[str, Any], latency_s: float, sent: Mapping[str, Any],
               labels: tuple[str, ...] | None = None) -> Completion:
    """Turn a non-streamed ``/api/chat`` reply into a Completion.

    An empty or absent ``content`` is an observed empty completion; a reply without a ``message`` object,
    or whose content is not text, is a failed request. With ``labels`` the first token's top list is read
    as those labels; a reply without ``logprobs`` gets no reading, never a guessed one.
    """
    options = {k: v for k, v in sent.items() if k != "messages"}
    message = reply.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(message, Mapping) or not isinstance(content, str | None):
        return Completion(text=None, latency_s=latency_s, backend_options=options,
                          error=f"unreadable reply from Ollama: no chat message text in {excerpt(reply)}")
    reading: LabelReading | None = None
    if labels is not None:
        top = first_top_logprobs(reply)
        reading = None if top is None else reading_from_top(top, labels)
    return Completion(
        text=content or "",
        latency_s=latency_s,
        prompt_tokens=token_count(reply.get("prompt_eval_count")),
        completion_tokens=token_count(reply.get("eval_count")),
        backend_options=options,
        label_reading=reading,
        finish_reason=stop_reason(reply.get("done_reason")),
    )




class OllamaBackend(RemoteBackend):
    """A model served by Ollama, asked through one shared ``ollama.Client``.

    One client serves every worker thread: it wraps an ``httpx.Client``, which is documented as safe to
    share between threads and pools connections, and it keeps no per-request state of its own.
    """

    backend = "ollama"
    chat_endpoint = "/api/chat"
    name_needed = "an Ollama model needs model.name=TAG (e.g. llama3 or qwen2.5:7b)."
    fix_busy = ("The server kept answering that it is busy: lower model.concurrency to what it runs at once "
                "(OLLAMA_NUM_PARALLEL), or raise its queue (OLLAMA_MAX_QUEUE).")
    parallel_hint = " (OLLAMA_NUM_PARALLEL)"
    fix_unreachable = ("Start the server with `ollama serve` (or the Ollama app), or point model.host / OLLAMA_HOST "
                       "at the machine and port it listens on.")
    address_field = "host"

    def __init__(self, model: OllamaModelConfig) -> None:
        """Check the address and settings; nothing is sent until :meth:`identity`.

        Raises:
            BackendError: If ``model.name``, the host or a transport setting is unusable.
        """
        import ollama

        super().__init__(model)
        self._host = resolve_host(model.host)
        self._num_ctx = model.num_ctx
        self._chat = model.chat
        self._client = ollama.Client(host=self._host.url, timeout=self._settings.request_timeout_s)
        self._tag: str | None = None  # the listed name, set by identity()

    # -- identity ---------------------------------------------------------------------------------------

    def _read_identity(self) -> ModelIdentity:
        import ollama

        try:
            listing = self._retrying(self._client.list, "/api/tags", NOTHING_ASKED)
        except ollama.ResponseError as exc:
            if exc.status_code in (401, 403):
                raise self._refused(exc) from exc
            raise BackendError(
                f"the server at {self._host} answered /api/tags with HTTP {exc.status_code} ({exc.error}); "
                "it does not look like an Ollama server. Check model.host / OLLAMA_HOST."
            ) from exc
        except (ValueError, TypeError) as exc:  # the client could not read the body as a model list
            raise BackendError(
                f"the server at {self._host} answered /api/tags with something that is not Ollama's model "
                f"list ({excerpt(str(exc))}). Check model.host / OLLAMA_HOST."
            ) from exc
        models = [m.model_dump() for m in listing.models]
        entry = find_listed(models, self._name)
        if entry is None:
            raise self._not_pulled(models)
        digest = str(entry.get("digest") or "")
        if not digest:
            raise BackendError(f"the Ollama server at {self._host} lists {entry.get('model')!r} without a "
                               "digest, so the weights that answer cannot be pinned; upgrade Ollama.")
        self._tag = str(entry.get("model") or entry.get("name"))
        details = {"tag": self._tag, "host": self._host.url, "server_version": self._server_version()}
        for key in ("family", "parameter_size", "quantization_level", "format"):
            value = (entry.get("details") or {}).get(key)
            if value:
                details[key] = str(value)
        return ModelIdentity(self._name, "ollama", digest, details)

    # -- as one endpoint of a pool ------------------------------------------------------------------------

    @classmethod
    def normalize_endpoint(cls, raw: str, source: str) -> str:
        """One address of ``model.endpoints``, checked and written as ``model.host`` is."""
        return normalize_host(raw, source)

    def member_identity(self) -> tuple[ModelIdentity, dict[str, Any]]:
        """The identity (its digest is the server's model digest, no address in it) and the facts shared.

        Every endpoint must list the same tag with the same digest: the digest pins the weights.

        Raises:
            BackendError: If the server cannot be reached or has not pulled the model.
        """
        own = self.identity()
        return own, {"digest": own.digest, "tag": own.details.get("tag")}

    def _not_pulled(self, models: list[dict[str, Any]]) -> BackendError:
        listed = [str(m.get("model") or m.get("name")) for m in models]
        have = ", ".join(listed[:12]) + (", ..." if len(listed) > 12 else "") if listed else "no models at all"
        return BackendError(
            f"model {self._name!r} is not pulled on the Ollama server at {self._host}: its model list has no "
            f"{normalize_tag(self._name)!r} (it has {have}). Pull it on that machine with "
            f"`ollama pull {self._name}`, or choose a listed model with model.name=TAG."
        )

    def _server_version(self) -> str:
        """The server's ``/api/version``, or ``unknown``: nice to log, never worth failing a run for.

        The official client has no call for it, so this is one plain GET with the client's own transport
        library, address and timeout.
        """
        import httpx

        key = os.environ.get("OLLAMA_API_KEY")  # sent the way the official client sends it
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        try:
            reply = httpx.get(f"{self._host.url}/api/version", headers=headers,
                              timeout=self._settings.request_timeout_s)
            version = reply.json().get("version") if reply.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return "unknown"
        return str(version) if version else "unknown"

    # -- requests ---------------------------------------------------------------------------------------

    def _build(self, request: Request) -> dict[str, Any]:
        assert self._tag is not None, "identity() lists the tag before the first request"
        body = build_request(request, self._tag, self._num_ctx)
        if not self._chat:  # model.chat=false: /api/generate with raw, the prompt as written (no template)
            del body["messages"]
            body = {"model": body.pop("model"), "prompt": request.prompt.text, "raw": True, **body}
        return body

    def _endpoint(self) -> str:
        """``/api/chat``, or ``/api/generate`` where ``model.chat=false`` sends every cell."""
        return self.chat_endpoint if self._chat else "/api/generate"

    def _send(self, body: Mapping[str, Any]) -> Any:
        if "prompt" in body:
            return self._client.generate(model=body["model"], prompt=body["prompt"], raw=True, stream=False,
                                         options=body["options"], **_logprob_fields(body))
        return self._client.chat(model=body["model"], messages=body["messages"], stream=False,
                                 options=body["options"], **_logprob_fields(body))

    def _read(self, reply: Any, request: Request, body: Mapping[str, Any], latency_s: float) -> Completion:
        labels = request.prompt.displayed_labels if request.params.label_probs else None
        data = reply.model_dump()
        if "prompt" in body:  # /api/generate answers with ``response``: read it as the chat reply's message
            data = {**data, "message": {"role": "assistant", "content": data.get("response")}}
            return read_reply(data, latency_s, {k: v for k, v in body.items() if k != "prompt"}, labels)
        return read_reply(data, latency_s, body, labels)

    def _classify(self, exc: Exception) -> Transient | None:
        return _classify(exc)

    def _failed_request(self, exc: Exception) -> str | None:
        """Any error status but 404 and 401/403, or a body the client could not read, is a failed request."""
        import ollama

        if isinstance(exc, ollama.ResponseError):
            status = exc.status_code
            if status == 404:
                raise BackendError(
                    f"the Ollama server at {self._host} no longer has {self._tag!r} (HTTP 404: {exc.error}); it "
                    f"was removed after the run started. Pull it again with `ollama pull {self._name}` and run the "
                    "same command: it resumes where this one stopped."
                ) from exc
            if status in (401, 403):
                raise self._refused(exc) from exc
            return f"Ollama answered HTTP {status}: {excerpt(exc.error)}"
        if isinstance(exc, ValueError | TypeError):  # the client could not read the body (not JSON, wrong shape)
            return f"unreadable reply from Ollama: {excerpt(str(exc))}"
        return None

    def check_label_probs(self, label_sets: Mapping[str, tuple[str, ...]]) -> None:
        """The server must return log-probabilities, and every label must be one character (``top_k`` source).

        Raises:
            LabelProbsError: If a label is longer than one character.
            BackendError: If a one-token chat with ``logprobs`` comes back without them (Ollama before 0.12.11).
        """
        import ollama

        check_label_sets(label_sets, "ollama", TOP_K)
        self.identity()
        tag = self._tag
        assert tag is not None, "identity() lists the tag"
        try:
            reply = self._retrying(
                lambda: self._client.chat(model=tag, messages=[{"role": "user", "content": "Say OK."}], stream=False,
                                          options={"temperature": 0.0, "num_predict": 1}, logprobs=True,
                                          top_logprobs=TOP_LOGPROBS),
                "/api/chat", "Nothing was asked yet: run the same command again once the server answers.")
        except ollama.ResponseError as exc:
            raise BackendError(f"generation.label_probs=true, but the Ollama server at {self._host} refused a chat "
                               f"with logprobs (HTTP {exc.status_code}: {exc.error}), so nothing was asked.") from exc
        if first_top_logprobs(reply.model_dump()) is None:
            version = self._identity.details.get("server_version", "unknown") if self._identity else "unknown"
            raise BackendError(
                f"generation.label_probs=true, but the Ollama server at {self._host} (version {version}) answered a "
                "chat with logprobs=true without log-probabilities, so nothing was asked. Ollama returns them from "
                "0.12.11: upgrade the server, use the embedded backend or an OpenAI-compatible server, or set "
                "generation.label_probs=false."
            )

    def _refused(self, exc: ollama.ResponseError) -> BackendError:
        return BackendError(
            f"the Ollama server at {self._host} refused the client (HTTP {exc.status_code}: {exc.error}); the "
            "client sends the key in OLLAMA_API_KEY to a server that needs one: set it, or check model.host."
        )

    # -- texts ------------------------------------------------------------------------------------------

    def _where(self) -> str:
        return f"Ollama at {self._host.url}"

    def _who(self) -> str:
        return f"Ollama at {self._host}"

    def close(self) -> None:
        """Close the client's connections."""
        self._client.close()  # type: ignore[no-untyped-call]  # ollama leaves close() unannotated


def _logprob_fields(sent: Mapping[str, Any]) -> dict[str, Any]:
    """The top-level log-probability fields of a built body, as the client's keyword arguments."""
    return {k: sent[k] for k in ("logprobs", "top_logprobs") if k in sent}


def _classify(exc: Exception) -> Transient | None:
    """Transient: a refused, timed-out or dropped connection, or a busy server (429/502/503/504)."""
    import ollama

    if isinstance(exc, ollama.ResponseError):
        return transient_status(exc.status_code)
    return transport_failure(exc)


# The backend's one entry: model.backend="ollama" finds its schema, factory and capabilities here.
OLLAMA = register_backend(BackendEntry(
    "ollama", OllamaModelConfig, OllamaBackend, keyed_settings=("num_ctx", "chat"),
    capabilities=frozenset({"label_probs", "system_turn", "endpoints", "plain"}),
))
