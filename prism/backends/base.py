"""The seam every backend plugs into, and the lazy registry that finds backends by name.

``import prism`` never imports llama_cpp, ollama, openai or mlflow: a backend module is imported only
when a run asks for it by name.
"""

from __future__ import annotations

import importlib
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
