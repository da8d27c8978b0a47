"""The seam every backend plugs into: the request it is asked, the protocol it answers by, its error.

``import prism`` never imports llama_cpp, ollama, openai or mlflow: a backend module is imported only
when a run asks for it by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

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
