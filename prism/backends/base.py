"""The seam every backend plugs into, and the lazy registry that finds backends by name.

``import prism`` never imports llama_cpp, ollama, openai or mlflow: a backend module is imported only
when a run asks for it by name.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from prism.config import MODEL_SCHEMAS, ModelConfig
from prism.errors import PrismError
from prism.records import CellKey
from prism.types import Completion, GenerationParams, ModelIdentity, Prompt


class BackendError(PrismError, RuntimeError):
    """A backend that cannot start or cannot go on; the message says what to do about it."""


@dataclass(frozen=True)
class Request:
    """One cell of an experiment: a prompt, the parameters to sample it with, and its repetition."""

    prompt: Prompt
    params: GenerationParams
    repetition: int

    @property
    def cell(self) -> CellKey:
        """Which (question, condition, repetition) this request asks for."""
        return CellKey(self.prompt.question_id, self.prompt.condition, self.repetition)


class Backend(Protocol):
    """What the pipeline needs from a model server or an in-process model."""

    #: How many requests the pipeline may have in flight at once.
    concurrency: int

    def identity(self) -> ModelIdentity:
        """Return the model's name, backend name and digest; called once, before any request."""
        ...

    def generate(self, request: Request) -> Completion:
        """Answer one request. A transport failure is a Completion with ``error`` set, not an exception."""
        ...

    def close(self) -> None:
        """Release the model or connections."""
        ...


# name -> "module:attribute"; the module is imported on first use only.
BACKENDS: dict[str, str] = {
    "llamacpp": "prism.backends.llamacpp:LlamaCppBackend",
    "replay": "prism.backends.replay:ReplayBackend",
    "ollama": "prism.backends.ollama:OllamaBackend",
    "openai": "prism.backends.openai_compat:OpenAIBackend",
}

# Backends that send a system turn as a system message (prism.turns). A backend left out is refused before
# inference when a condition has a system turn (require_system_turns); the built-in ones all send one.
SYSTEM_TURNS: frozenset[str] = frozenset({"llamacpp", "replay", "ollama", "openai"})


def create_backend(model: ModelConfig) -> Backend:
    """Instantiate the backend that ``model.backend`` names, with its own schema's settings.

    Args:
        model: The ``model`` config group, an instance of its backend's schema.

    Raises:
        BackendError: If the name is unknown (the message lists the known ones), or the settings are
            another backend's schema (``model.backend`` overridden on a model file of another backend).
    """
    name = model.backend
    if name not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}; known backends: {', '.join(sorted(BACKENDS))}.")
    schema = MODEL_SCHEMAS[name]
    if not isinstance(model, schema):
        raise BackendError(
            f"model.backend={name!r} cannot read the settings of this model file, which are those of "
            f"{type(model).__name__}. Choose a model file of the {name} backend (model=...), or write one whose "
            f"defaults name /schema/model/{name}@_here_, instead of overriding model.backend."
        )
    module_name, attribute = BACKENDS[name].split(":")
    factory = getattr(importlib.import_module(module_name), attribute)
    backend: Backend = factory(model)
    return backend


def require_label_probs(backend: Backend, name: str, label_sets: Mapping[str, tuple[str, ...]]) -> None:
    """Stop before inference unless ``backend`` can read the first token's probabilities of these labels.

    A backend that can has a ``check_label_probs(label_sets)`` method, which raises when its model or
    server cannot give them (no log-probabilities, or labels it cannot read); one without the method gives
    none. It is optional, so backends written before ``generation.label_probs`` existed still plug in.

    Args:
        backend: The run's backend.
        name: Its name (``model.backend``), for the message.
        label_sets: Condition name -> the displayed labels of its prompts.

    Raises:
        BackendError: If the backend gives no log-probabilities, naming what to use instead.
    """
    check = getattr(backend, "check_label_probs", None)
    if check is None:
        raise BackendError(
            f"generation.label_probs=true asks for the first reply token's probabilities, but the {name!r} backend "
            "gives no log-probabilities, so nothing was asked. Use model=smollm2 (embedded llama.cpp), an "
            "OpenAI-compatible server that returns logprobs (model=openai: vLLM, llama.cpp's server), Ollama "
            "0.12.11 or later (model.backend=ollama), or a replay file with label_probs per line; or set "
            "generation.label_probs=false."
        )
    check(label_sets)


def require_system_turns(backend: Backend, name: str, roles: Mapping[str, Iterable[str]]) -> None:
    """Stop before inference unless ``backend`` sends the system turns these conditions' prompts have.

    A backend not in :data:`SYSTEM_TURNS` is refused. One that is may still depend on its model: a backend
    with a ``check_system_turns(conditions)`` method (llama.cpp, whose chat template may have no system
    role) raises when its model would drop the system turn. A run without system turns checks nothing.

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
    if name not in SYSTEM_TURNS:
        raise BackendError(
            f"conditions {conditions} send a system turn, but the {name!r} backend cannot send one, so nothing was "
            f"asked. Use a backend that sends system turns ({', '.join(sorted(SYSTEM_TURNS))}), or a condition "
            "set without system turns (every set but conditions=turns and a grid crossing its axis)."
        )
    check = getattr(backend, "check_system_turns", None)
    if check is not None:
        check(conditions)
