"""Raw and scored response records (docs/architecture.md, "Raw response record", "Scored record"), and the cell key.

A raw record is built in one place (:func:`prism.run.inference.raw_record`), a scored one in one place
(:func:`prism.results.scoring.score_record`), and both become JSON in one place (their ``to_json``), with the
field names of the contract. Every other stage reads the typed records or, past the files, the JSON.

An optional field (declared with :func:`optional`) is recorded only when a backend or stage had it: while
it is None it is absent from the JSON, not null, so runs that never record it keep their exact records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple, TypeVar

R = TypeVar("R", bound="RawRecord")

_OPTIONAL = "prism.optional"


def optional() -> Any:
    """A record field that defaults to None and is left out of the JSON while it is None."""
    return field(default=None, metadata={_OPTIONAL: True})


class CellKey(NamedTuple):
    """One cell of a run: which question, under which condition, which repetition.

    The key the replay backend looks answers up by, the metrics group records by (:data:`CELL_COLUMNS`) and
    a reproduction matches records by. (The completion store keys content instead: the prompt's hash, not
    its question and condition, see ``prism.run.store.store_key``.)
    """

    question_id: str
    condition: str
    repetition: int = 0

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> CellKey:
        """The cell a JSON record (raw, scored or replay line) answers; a missing repetition is 0."""
        return cls(str(record["question_id"]), str(record["condition"]), int(record.get("repetition", 0)))


#: The cell's columns in a table of records, in key order.
CELL_COLUMNS: tuple[str, ...] = CellKey._fields


@dataclass(frozen=True, kw_only=True)
class RawRecord:
    """What one request was and what came back, written before any parsing (``responses.jsonl``)."""

    question_id: str
    """The dataset's id of the question."""
    dataset: str
    """Dataset name, e.g. ``arc_challenge``."""
    split: str
    """Split the question was drawn from."""
    condition: str
    """Condition name, e.g. ``P2``."""
    repetition: int
    """0-based repetition index of the cell."""
    prompt: str
    """The exact text of the last user turn as sent, the one holding the question (``prism.turns``)."""
    prompt_sha256: str
    """Hex sha256 of the prompt (part of the store key): of ``prompt`` for a one-turn prompt, else of every turn."""
    response: str | None
    """The completion text; None exactly when the request failed (``error`` set)."""
    model: str
    """The model name as configured."""
    model_digest: str
    """Digest that pins the weights (see ``ModelIdentity``)."""
    backend: str
    """Backend name: ``llamacpp``, ``ollama``, ``openai`` or ``replay``."""
    generation: dict[str, Any]
    """Canonical generation parameters of the request (``GenerationParams.canonical``)."""
    backend_options: dict[str, Any]
    """What the backend actually sent, in its own names."""
    latency_s: float | None
    """Wall time of the request in seconds (of the run that asked, for a stored completion)."""
    prompt_tokens: int | None
    """Prompt tokens as counted by the backend, when known."""
    completion_tokens: int | None
    """Completion tokens as counted by the backend, when known."""
    timestamp: str
    """UTC arrival time of the completion, ISO 8601."""
    template_version: str
    """Version of the condition templates that rendered the prompt."""
    protocol_version: str
    """Version of the record's shape and meaning (``prism.types.PROTOCOL_VERSION``)."""
    cached: bool
    """Whether the completion came from the store rather than the model in this run."""
    error: str | None
    """Why the request failed, or None for an observed response."""
    finish_reason: str | None = optional()
    """Why generation stopped as the backend said it (``stop``, ``length``, ...); None when it did not say."""
    provider_cached_tokens: int | None = optional()
    """Prompt tokens the provider served from its own prompt cache, when its usage says (OpenAI
    ``prompt_tokens_details.cached_tokens``, Anthropic ``cache_read_input_tokens``); absent otherwise."""
    endpoint: str | None = optional()
    """Which server of an endpoint pool answered (``model.endpoints``, ``prism.backends.pool``); absent
    outside a pool. Not part of the completion key: any endpoint of the pool serves the same cells."""
    label_probs: dict[str, float] | None = field(default=None, metadata={_OPTIONAL: True})
    """generation.label_probs: displayed label -> first-token probability, renormalized over the labels."""
    label_mass: float | None = field(default=None, metadata={_OPTIONAL: True})
    """generation.label_probs: the labels' unnormalized total probability at the first position."""
    top_logprobs: list[dict[str, Any]] | None = field(default=None, metadata={_OPTIONAL: True})
    """generation.label_probs: the first position's top tokens, ``[{"token", "logprob"}]``."""
    label_probs_source: str | None = field(default=None, metadata={_OPTIONAL: True})
    """generation.label_probs: ``full``, ``top_k`` or ``replay`` (``prism.label_probs``)."""
    cloze_logprobs: dict[str, float] | None = field(default=None, metadata={_OPTIONAL: True})
    """generation.cloze: canonical label -> the summed log-probability of its continuation after the prompt."""
    cloze_tokens: dict[str, int] | None = field(default=None, metadata={_OPTIONAL: True})
    """generation.cloze: canonical label -> how many tokens its continuation is."""
    cloze_chars: dict[str, int] | None = field(default=None, metadata={_OPTIONAL: True})
    """generation.cloze: canonical label -> the choice's length in characters (``acc_norm``'s divisor)."""
    cloze_source: str | None = field(default=None, metadata={_OPTIONAL: True})
    """generation.cloze: ``embedded`` (llama.cpp in this process) or ``echo`` (a server's echoed prompt);
    ``lm_eval`` for a log-likelihood log imported from lm-evaluation-harness (``prism.importer``)."""
    turns: list[dict[str, str]] | None = field(default=None, metadata={_OPTIONAL: True})
    """The turns sent before ``prompt``, in order, as ``[{"role", "content"}]``; absent for a one-turn prompt."""

    @property
    def cell(self) -> CellKey:
        """The cell this record answers."""
        return CellKey(self.question_id, self.condition, self.repetition)

    def to_json(self) -> dict[str, Any]:
        """The record as the JSON object of the contract; unset optional fields are left out."""
        return _to_json(self)

    @classmethod
    def from_json(cls: type[R], data: Mapping[str, Any]) -> R:
        """Read a record written by :meth:`to_json` (keys of other record kinds are ignored).

        Raises:
            ValueError: Naming the required fields that ``data`` lacks.
        """
        names = [f.name for f in fields(cls) if f.init]
        required = [f.name for f in fields(cls) if f.init and not f.metadata.get(_OPTIONAL)]
        missing = [name for name in required if name not in data]
        if missing:
            raise ValueError(f"a {cls.__name__} needs {', '.join(missing)}; the record has {', '.join(data)}")
        return cls(**{name: data[name] for name in names if name in data})


@dataclass(frozen=True, kw_only=True)
class ScoredRecord:
    """A raw record read by the parser and checked against the key (``results/scored.jsonl``).

    Its JSON holds every field of the raw record but the prompt text and earlier turns (which stay in
    ``responses.jsonl``), then these fields.
    """

    raw: RawRecord
    """The record that was scored."""
    displayed: str | None
    """The label the parser recovered, as displayed to the model; None for UNKNOWN."""
    answer: str | None
    """The canonical label of that option; None for UNKNOWN."""
    recovered: bool
    """Whether an answer was recovered."""
    compliant: bool
    """Whether the response followed the output instruction."""
    method: str
    """The parser rule that decided, or ``failed`` for a failed request."""
    correct_answer: str | None
    """The canonical label of the correct option; None for an item without an answer key (a survey item)."""
    correct: bool | None
    """``answer == correct_answer``; False for UNKNOWN; None without an answer key."""
    parser_version: str
    """Version of the parser that read the response."""
    scorer_version: str
    """Version of the scorer (``prism.results.scoring.SCORER_VERSION``)."""
    option_probs: dict[str, float] | None = field(default=None, metadata={_OPTIONAL: True})
    """With label probabilities: canonical option -> probability (``prism.label_probs.likelihood_fields``)."""
    likelihood_answer: str | None = field(default=None, metadata={_OPTIONAL: True})
    """With label probabilities: the likeliest canonical option (a tie: the first displayed)."""
    likelihood_correct: bool | None = field(default=None, metadata={_OPTIONAL: True})
    """With label probabilities: ``likelihood_answer == correct_answer``."""
    cloze_answer: str | None = field(default=None, metadata={_OPTIONAL: True})
    """With the cloze reading: the option whose continuation has the largest summed log-probability (``acc``)."""
    cloze_norm_answer: str | None = field(default=None, metadata={_OPTIONAL: True})
    """With the cloze reading: the largest per character of the choice (lm-eval's ``acc_norm``)."""
    cloze_correct: bool | None = field(default=None, metadata={_OPTIONAL: True})
    """With the cloze reading and a key: ``cloze_answer == correct_answer``."""
    cloze_norm_correct: bool | None = field(default=None, metadata={_OPTIONAL: True})
    """With the cloze reading and a key: ``cloze_norm_answer == correct_answer``."""

    @property
    def cell(self) -> CellKey:
        """The cell this record answers."""
        return self.raw.cell

    def to_json(self) -> dict[str, Any]:
        """The scored record of the contract: the raw fields without ``prompt``, then the scored ones."""
        record = self.raw.to_json()
        record.pop("prompt")
        record.pop("turns", None)  # the earlier turns are prompt text too
        own = _to_json(self)
        own.pop("raw")
        return {**record, **own}


def _to_json(record: Any) -> dict[str, Any]:
    """A record's fields by name (nested dicts copied), leaving out optional fields that are None."""
    out: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if value is None and f.metadata.get(_OPTIONAL):
            continue
        out[f.name] = dict(value) if isinstance(value, dict) else value
    return out
