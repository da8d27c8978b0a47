"""One registry of backends: each is one entry (name, schema, factory, keyed settings, capabilities).

A backend is a module of this package that registers its :class:`BackendEntry` when imported, beside its
config schema (a subclass of :class:`~prism.config.ModelConfig`) and a YAML under ``prism/conf/model/``.
Nothing else names it: Hydra's ConfigStore learns its schema from here (:func:`prism.conf.register_configs`),
a run finds its factory and the settings that enter the completion key here, and whether it can read label
probabilities (or any other capability) is declared here, never probed on the instance.

The registry is lazy: ``import prism`` imports no backend. The first look-up imports this package's
modules, which import only the standard library and PRISM at module level; each backend imports its
client library (llama_cpp, ollama, openai) when it is instantiated. Code outside the package (a lab's own
backend, a test) adds an entry with :func:`register_backend`.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

from prism.backends.base import Backend, BackendError
from prism.config import ModelConfig
from prism.types import GenerationParams, Prompt

#: What a backend can do beyond generating text. ``label_probs``: the first reply token's probabilities
#: over the option labels (``generation.label_probs``; the backend has ``check_label_probs``).
#: ``system_turn``: it sends a system turn as a system message (``prism.turns``); a backend whose model may
#: still lose one (a chat template without a system role) also has ``check_system_turns(conditions)``.
#: ``count_tokens``: it counts a prompt's tokens with the model's own tokenizer, without a request
#: (``count_tokens(text)``; a dry run estimates by characters otherwise).
#: ``endpoints``: one run over many servers of one model (``model.endpoints``, :mod:`prism.backends.pool`);
#: the factory is a :class:`~prism.backends.remote.RemoteBackend` with an ``address_field``.
#: ``plain``: it sends a prompt as plain text with no chat template (``model.chat=false``). ``cloze``: each
#: option's continuation log-likelihood after the prompt (``generation.cloze``; a backend whose server may
#: not give them has ``check_cloze()``). ``context_window``: it says the context its model was loaded or is
#: served with (``context_window()``, None when a server does not say). ``prompt_tokens``: it counts a whole
#: conversation's tokens as its chat template renders it (``prompt_tokens(prompt)``). The last two let a run
#: refuse a prompt that does not fit before inference (:mod:`prism.run.context`).
Capability = Literal["label_probs", "system_turn", "endpoints", "count_tokens", "plain", "cloze", "context_window",
                     "prompt_tokens"]
CAPABILITIES: tuple[str, ...] = get_args(Capability)


class TokenCountingBackend(Backend, Protocol):
    """A backend with the ``count_tokens`` capability."""

    def count_tokens(self, text: str) -> int:
        """The number of tokens ``text`` is as a prompt of this model."""
        ...


class ContextWindowBackend(Backend, Protocol):
    """A backend with the ``context_window`` capability."""

    def context_window(self) -> int | None:
        """The model's context in tokens, prompt and reply together; None when it is not known."""
        ...


class PromptTokensBackend(Backend, Protocol):
    """A backend with the ``prompt_tokens`` capability."""

    def prompt_tokens(self, prompt: Prompt) -> int:
        """Tokens of the whole conversation as the model's chat template renders it."""
        ...


class LabelProbsBackend(Backend, Protocol):
    """A backend with the ``label_probs`` capability: it checks, before inference, that it can read them."""

    def check_label_probs(self, label_sets: Mapping[str, tuple[str, ...]]) -> None:
        """Raise :class:`BackendError` unless every condition's labels can be read from the first token."""
        ...


@dataclass(frozen=True)
class BackendEntry:
    """Everything PRISM knows about one backend.

    Attributes:
        name: What ``model.backend`` says, and the schema's name in the ConfigStore (``schema/model/<name>``).
        schema: The ``model`` group's dataclass for this backend.
        factory: Builds the backend from an instance of ``schema`` (usually the backend class itself).
        keyed_settings: Settings of ``schema`` outside the model digest that can change a completion (the
            context size, when a prompt is cut to fit it). Each enters the completion key only when it differs
            from the schema's default, so stores written before it was keyed keep serving every cell.
        capabilities: What the backend can do beyond generating text (:data:`Capability`).
    """

    name: str
    schema: type[ModelConfig]
    factory: Callable[[Any], Backend]
    keyed_settings: tuple[str, ...] = ()
    capabilities: frozenset[Capability] = frozenset()

    def __post_init__(self) -> None:
        """Refuse an entry that could not work, naming what is wrong with it."""
        fields = {f.name: f for f in dataclasses.fields(self.schema)}
        for key in self.keyed_settings:
            if key not in fields:
                raise BackendError(f"backend {self.name!r}: keyed setting {key!r} is not a field of "
                                   f"{self.schema.__name__}; its fields are {', '.join(sorted(fields))}.")
        unknown = set(self.capabilities) - set(CAPABILITIES)
        if unknown:
            raise BackendError(f"backend {self.name!r}: unknown capabilities {sorted(unknown)}; known: "
                               f"{', '.join(CAPABILITIES)}.")
        if "label_probs" in self.capabilities and not hasattr(self.factory, "check_label_probs"):
            raise BackendError(f"backend {self.name!r} declares label_probs but its factory has no "
                               "check_label_probs(label_sets) method to refuse what it cannot read.")
        for capability, method in (("count_tokens", "count_tokens(text)"), ("context_window", "context_window()"),
                                   ("prompt_tokens", "prompt_tokens(prompt)")):
            if capability in self.capabilities and not hasattr(self.factory, method.split("(")[0]):
                raise BackendError(f"backend {self.name!r} declares {capability} but its factory has no {method} "
                                   "method.")
        if "endpoints" in self.capabilities and (not getattr(self.factory, "address_field", "")
                                                 or "endpoints" not in fields):
            raise BackendError(f"backend {self.name!r} declares endpoints but its schema has no endpoints field or "
                               "its factory no address_field naming the setting each endpoint's URL goes to.")

    def defaults(self) -> dict[str, Any]:
        """The schema's default of every field that has one."""
        return {f.name: f.default for f in dataclasses.fields(self.schema)
                if f.default is not dataclasses.MISSING}


_ENTRIES: dict[str, BackendEntry] = {}
_discovered = False


def register_backend(entry: BackendEntry) -> BackendEntry:
    """Add ``entry`` to the registry and return it (so a module can keep it as a constant).

    Registering the same entry twice (a module imported again) is harmless; another entry under a taken
    name is refused, since two backends would then answer to one ``model.backend``.

    Raises:
        BackendError: If another entry already has this name.
    """
    known = _ENTRIES.get(entry.name)
    if known is not None and known != entry:
        raise BackendError(f"a backend named {entry.name!r} is registered already (schema "
                           f"{known.schema.__name__}); give the new one another name.")
    _ENTRIES[entry.name] = entry
    return entry


def _discover() -> None:
    """Import every module of this package once, so the built-in backends have registered."""
    global _discovered
    if _discovered:
        return
    package = importlib.import_module("prism.backends")
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"prism.backends.{module.name}")
    _discovered = True


def backend_entries() -> dict[str, BackendEntry]:
    """Every registered backend by name, the built-in ones included."""
    _discover()
    return dict(_ENTRIES)


def backend_entry(name: str) -> BackendEntry:
    """The entry of the backend ``model.backend`` names.

    Raises:
        BackendError: If no backend has that name; the message lists the known ones.
    """
    entries = backend_entries()
    if name not in entries:
        raise BackendError(f"unknown backend {name!r}; known backends: {', '.join(sorted(entries))}.")
    return entries[name]


def create_backend(model: ModelConfig) -> Backend:
    """Instantiate the backend that ``model.backend`` names, with its own schema's settings.

    Args:
        model: The ``model`` config group, an instance of its backend's schema.

    Raises:
        BackendError: If the name is unknown (the message lists the known ones), or the settings are
            another backend's schema (``model.backend`` overridden on a model file of another backend).
    """
    entry = backend_entry(model.backend)
    if not isinstance(model, entry.schema):
        raise BackendError(
            f"model.backend={entry.name!r} cannot read the settings of this model file, which are those of "
            f"{type(model).__name__}. Choose a model file of the {entry.name} backend (model=...), or write one "
            f"whose defaults name /schema/model/{entry.name}@_here_, instead of overriding model.backend."
        )
    if getattr(model, "endpoints", None):
        if "endpoints" not in entry.capabilities:
            raise BackendError(f"model.endpoints is set, but the {entry.name!r} backend cannot spread a run over "
                               "several servers; use model.backend=openai or ollama, or leave model.endpoints empty.")
        from prism.backends.pool import EndpointPool  # only a run over several servers needs it

        return EndpointPool.from_config(model, entry.factory)
    return entry.factory(model)


def keyed_settings(model: ModelConfig) -> dict[str, Any]:
    """This model's keyed settings (:attr:`BackendEntry.keyed_settings`) that differ from their defaults."""
    entries = backend_entries()
    entry = entries.get(model.backend)
    if entry is None:
        return {}
    defaults = entry.defaults()
    return {key: getattr(model, key) for key in entry.keyed_settings
            if getattr(model, key, defaults[key]) != defaults[key]}


def require_label_probs(backend: Backend, name: str, label_sets: Mapping[str, tuple[str, ...]]) -> None:
    """Stop before inference unless ``backend`` can read the first token's probabilities of these labels.

    A backend whose entry declares the ``label_probs`` capability checks its model or server itself
    (``check_label_probs``), which raises when they cannot give them; any other backend gives none.

    Args:
        backend: The run's backend.
        name: Its name (``model.backend``).
        label_sets: Condition name -> the displayed labels of its prompts.

    Raises:
        BackendError: If the backend gives no log-probabilities, naming what to use instead.
    """
    entry = backend_entries().get(name)
    if entry is None or "label_probs" not in entry.capabilities:
        raise BackendError(
            f"generation.label_probs=true asks for the first reply token's probabilities, but the {name!r} backend "
            "gives no log-probabilities, so nothing was asked. Use model=smollm2 (embedded llama.cpp), an "
            "OpenAI-compatible server that returns logprobs (model=openai: vLLM, llama.cpp's server), Ollama "
            "0.12.11 or later (model.backend=ollama), or a replay file with label_probs per line; or set "
            "generation.label_probs=false."
        )
    checked: LabelProbsBackend = backend  # type: ignore[assignment]  # declared by the entry, checked there
    checked.check_label_probs(label_sets)


def require_system_turns(backend: Backend, name: str, roles: Mapping[str, Iterable[str]]) -> None:
    """Stop before inference unless ``backend`` sends the system turns these conditions' prompts have.

    A backend whose entry lacks the ``system_turn`` capability is refused. One that has it may still depend
    on its model: a backend class with a ``check_system_turns(conditions)`` method (llama.cpp, whose chat
    template may have no system role) raises when its model would drop the system turn. A run without
    system turns checks nothing.

    Args:
        backend: The run's backend.
        name: Its name (``model.backend``), for the message.
        roles: Condition name -> the roles of its prompts' turns (:func:`prism.turns.turn_roles`).

    Raises:
        BackendError: Naming the conditions with a system turn, the backend and what to use instead.
    """
    conditions = [c for c, found in roles.items() if "system" in set(found)]
    if not conditions:
        return
    entries = backend_entries()
    entry = entries.get(name)
    if entry is None or "system_turn" not in entry.capabilities:
        able = sorted(n for n, e in entries.items() if "system_turn" in e.capabilities)
        raise BackendError(
            f"conditions {conditions} send a system turn, but the {name!r} backend cannot send one, so nothing was "
            f"asked. Use a backend that sends system turns ({', '.join(able)}), or a condition "
            "set without system turns (every set but conditions=turns and a grid crossing its axis)."
        )
    if hasattr(entry.factory, "check_system_turns"):
        backend.check_system_turns(conditions)  # type: ignore[attr-defined]  # the class declares it


def token_counter(backend: Backend, name: str) -> TokenCountingBackend | None:
    """``backend`` as a token counter when its entry declares ``count_tokens``, else None."""
    entry = backend_entries().get(name)
    if entry is None or "count_tokens" not in entry.capabilities:
        return None
    counter: TokenCountingBackend = backend  # type: ignore[assignment]  # declared by the entry, checked there
    return counter


def context_window(backend: Backend, name: str) -> int | None:
    """The context ``backend`` says (its entry declares ``context_window``), else None.

    A pool of endpoints (:mod:`prism.backends.pool`) is not an instance of its entry's factory and says no
    context: its prompts are not checked against one.
    """
    entry = backend_entries().get(name)
    if entry is None or "context_window" not in entry.capabilities or not _made_by(entry, backend):
        return None
    sized: ContextWindowBackend = backend  # type: ignore[assignment]  # declared by the entry, checked there
    return sized.context_window()


def prompt_token_counter(backend: Backend, name: str) -> Callable[[Prompt], int] | None:
    """``backend.prompt_tokens`` when its entry declares ``prompt_tokens``, else None (tokens are estimated)."""
    entry = backend_entries().get(name)
    if entry is None or "prompt_tokens" not in entry.capabilities or not _made_by(entry, backend):
        return None
    counter: PromptTokensBackend = backend  # type: ignore[assignment]  # declared by the entry, checked there
    return counter.prompt_tokens


def _made_by(entry: BackendEntry, backend: Backend) -> bool:
    """Whether ``backend`` is what the entry's factory builds (a factory that is not a class: assumed so)."""
    return not isinstance(entry.factory, type) or isinstance(backend, entry.factory)


def require_plain(name: str, roles: Mapping[str, Iterable[str]]) -> None:
    """Stop before inference unless the backend can send plain completions of these one-turn prompts.

    Args:
        name: The backend's name (``model.backend``).
        roles: Condition name -> the roles of its prompts' turns (:func:`prism.turns.turn_roles`).

    Raises:
        BackendError: If the backend has no plain completion, or a condition's prompts have turns other than
            one user turn (a plain prompt has no roles to put them in).
    """
    entries = backend_entries()
    entry = entries.get(name)
    if entry is None or "plain" not in entry.capabilities:
        able = sorted(n for n, e in entries.items() if "plain" in e.capabilities)
        raise BackendError(f"model.chat=false sends the prompt as plain text with no chat template, but the {name!r} "
                           f"backend cannot, so nothing was asked. Use a backend that can ({', '.join(able)}), or "
                           "set model.chat=true.")
    turned = [c for c, found in roles.items() if set(found) - {"user"}]
    if turned:
        raise BackendError(f"model.chat=false sends one plain prompt, but conditions {turned} have turns other than "
                           "one user turn (a system turn or earlier turns), which a plain prompt cannot hold; nothing "
                           "was asked. Use a condition set with one user turn per prompt, or set model.chat=true.")


def require_cloze(backend: Backend, name: str) -> None:
    """Stop before inference unless ``backend`` can read each option's continuation log-likelihood.

    Raises:
        BackendError: If the backend gives no prompt log-probabilities, or its server's are unusable.
    """
    entries = backend_entries()
    entry = entries.get(name)
    if entry is None or "cloze" not in entry.capabilities:
        able = sorted(n for n, e in entries.items() if "cloze" in e.capabilities)
        why = (" Ollama returns no log-probabilities of the prompt's tokens, only of generated ones."
               if name == "ollama" else "")
        raise BackendError(f"generation.cloze=true needs the log-probability of each option's continuation after the "
                           f"prompt, but the {name!r} backend cannot give it, so nothing was asked.{why} Use a backend "
                           f"that can ({', '.join(able)}: the embedded llama.cpp model, or an OpenAI-compatible "
                           "server that echoes prompt log-probabilities, such as vLLM), or set generation.cloze=false.")
    if hasattr(entry.factory, "check_cloze"):
        backend.check_cloze()  # type: ignore[attr-defined]  # the class declares it


def require_capabilities(backend: Backend, model: ModelConfig, settings: GenerationParams,
                         label_sets: Mapping[str, tuple[str, ...]], roles: Mapping[str, Iterable[str]]) -> None:
    """Stop before inference unless the run's backend can do what its prompts and settings ask.

    The checks of :func:`require_label_probs` (``settings.label_probs``), :func:`require_system_turns`,
    :func:`require_plain` (``model.chat=false``) and :func:`require_cloze` (``settings.cloze``), in that order;
    ``model.backend`` and ``model.chat`` are read here, where they are used, not by the caller.

    Args:
        backend: The run's backend, made from ``model``.
        model: The run's model config.
        settings: The generation settings every request of the run carries (the same in each repetition but
            for the seed).
        label_sets: Condition name -> the displayed labels of its prompts (read only with label probabilities).
        roles: Condition name -> the roles of its prompts' turns.

    Raises:
        BackendError: Naming what the backend cannot do and what to use instead.
    """
    name = model.backend
    if settings.label_probs:
        require_label_probs(backend, name, label_sets)
    require_system_turns(backend, name, roles)
    if not model.chat:
        require_plain(name, roles)
    if settings.cloze:
        require_cloze(backend, name)


@dataclass(frozen=True)
class ContextLimits:
    """What the context check (:func:`prism.run.context.check_context`) needs of the run's model."""

    window: int | None
    """The context in tokens the backend says, or None when it does not say."""
    counter: Callable[[Prompt], int] | None
    """The backend's own count of a prompt's tokens, or None (then they are estimated)."""
    where: str
    """What to call the setting that sets the window, in a message."""


def context_limits(backend: Backend, model: ModelConfig) -> ContextLimits:
    """The window, token counter and setting name of ``backend`` (made from ``model``)."""
    name = model.backend
    # Whether the schema has the setting, not its value (the backend reads that): an embedded model's window
    # is model.n_ctx, a server's is the server's own.
    sized_here = "n_ctx" in {f.name for f in dataclasses.fields(model)}
    where = "model.n_ctx" if sized_here else f"the {name} server's"
    return ContextLimits(context_window(backend, name), prompt_token_counter(backend, name), where)
