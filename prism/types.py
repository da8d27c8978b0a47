"""Frozen records that flow through PRISM (docs/architecture.md, section 3).

Every stage takes and returns these plain values, so the pure core (conditions, parsing, scoring,
metrics) can be tested without a model, a store or MLflow.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from prism.errors import PrismError

# Bumped whenever the shape or meaning of a raw or scored record changes.
PROTOCOL_VERSION = "1"


def sha256_text(text: str) -> str:
    """Return the hex sha256 of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_json(value: Any) -> str:
    """Serialize ``value`` the one way PRISM hashes it: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_UNSAFE_IN_FILENAME = re.compile(r"[^A-Za-z0-9_.-]")
_MAX_FILENAME = 120  # far below the 255 bytes file systems allow, leaving room for a suffix


def safe_filename(name: str) -> str:
    """A file name made from ``name`` (a model tag, run or condition set name) that stays in its directory.

    Letters, digits, ``_``, ``-`` and ``.`` are kept; any other character (``/``, a backslash, ``:``, spaces,
    control characters) becomes ``_`` and leading dots are dropped, so the result is never ``.``, ``..``,
    hidden, longer than 120 characters or a path. A name that had to change gets ``-`` and 8 hex digits of its
    sha256, so ``org/model`` and ``org_model`` stay two files; names that are already safe come back unchanged.
    """
    if name and len(name) <= _MAX_FILENAME and not name.startswith(".") and not _UNSAFE_IN_FILENAME.search(name):
        return name
    safe = _UNSAFE_IN_FILENAME.sub("_", name).lstrip(".")[: _MAX_FILENAME - 9]
    return f"{safe or '_'}-{sha256_text(name)[:8]}"


@dataclass(frozen=True)
class Question:
    """One multiple-choice question in the frozen order of its options.

    Attributes:
        question_id: The dataset's own id (SciQ has none: a hash of its text stands in).
        question: The stem.
        options: Option texts in frozen order.
        labels: Canonical labels, ``A``.. in frozen order.
        answer: Canonical label of the correct option, or None for an item without an answer key (a survey
            item: ``dataset.answer_format=none``).
        dataset: Dataset name, e.g. ``arc_challenge``.
        split: Split the question was drawn from.
        group: The dataset's own grouping (MMLU's subject, MMLU-Pro's category), or None when it has none.
        demonstrations: The question's frozen draw of few-shot demonstrations, in draw order
            (:mod:`prism.questions.demonstrations`), or ``()``. A rendering context, not part of the question:
            it is frozen in a file of its own beside the question set, never written by :meth:`to_dict`, and
            left out of equality, so the frozen bytes and hashes of a question set are the same with or without it.
    """

    question_id: str
    question: str
    options: tuple[str, ...]
    labels: tuple[str, ...]
    answer: str | None
    dataset: str
    split: str
    group: str | None = None
    demonstrations: tuple[Question, ...] = field(default=(), compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """Return the canonical JSON-ready form (tuples become lists).

        ``group`` is written only when the question has one, so the frozen bytes (and hashes) of datasets
        without groups are the same as before groups existed.
        """
        record = asdict(self)
        del record["demonstrations"]
        record["options"] = list(self.options)
        record["labels"] = list(self.labels)
        if self.group is None:
            del record["group"]
        return record

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> Question:
        """Build a question from :meth:`to_dict` output."""
        return cls(
            question_id=str(record["question_id"]),
            question=str(record["question"]),
            options=tuple(str(o) for o in record["options"]),
            labels=tuple(str(label) for label in record["labels"]),
            answer=None if record["answer"] is None else str(record["answer"]),
            dataset=str(record["dataset"]),
            split=str(record["split"]),
            group=None if record.get("group") is None else str(record["group"]),
        )


#: The roles a turn of a conversation can have (prism.turns); a prompt's last turn is always ``user``.
ROLES: tuple[str, ...] = ("system", "user", "assistant")


@dataclass(frozen=True)
class Turn:
    """One message of a conversation: who says it and what.

    Attributes:
        role: ``system``, ``user`` or ``assistant`` (:data:`ROLES`).
        content: The exact text of the message.
    """

    role: str
    content: str

    def to_dict(self) -> dict[str, str]:
        """``{"role", "content"}``: a chat message as every backend's API and the raw record write it."""
        return {"role": self.role, "content": self.content}


class TurnError(PrismError, ValueError):
    """A conversation that no chat API could send as written."""


def check_turns(turns: Sequence[Turn], where: str) -> None:
    """Refuse a conversation that is not one chat: roles known, texts non-empty, system first, user last.

    Args:
        turns: Every turn in order.
        where: What the turns belong to, for the message (question and condition).

    Raises:
        TurnError: Naming the turn and what is wrong with it.
    """
    if not turns or turns[-1].role != "user":
        raise TurnError(f"{where}: the last turn must be the user turn holding the question, not "
                        f"{turns[-1].role if turns else 'nothing'!r}.")
    for index, turn in enumerate(turns):
        if turn.role not in ROLES:
            raise TurnError(f"{where}: turn {index + 1} has role {turn.role!r}; a role is one of {', '.join(ROLES)}.")
        if not turn.content.strip():
            raise TurnError(f"{where}: turn {index + 1} ({turn.role}) is empty; every turn needs a text.")
        if turn.role == "system" and index != 0:
            raise TurnError(f"{where}: turn {index + 1} is a system turn; a system turn can only come first.")


def turns_sha256(turns: Sequence[Turn]) -> str:
    """The hash of a conversation: sha256 of the canonical JSON of its ``[{"role", "content"}]`` list."""
    return sha256_text(canonical_json([turn.to_dict() for turn in turns]))


@dataclass(frozen=True)
class Prompt:
    """A question rendered under one condition: the exact conversation the model sees.

    The conversation is :attr:`turns`: the earlier turns (a system turn, later demonstrations), then the user
    turn holding the question, whose text is :attr:`text`. A one-turn prompt has no earlier turns, and its
    hash (so its store key) is the hash of its text alone, exactly as before prompts had turns.

    Attributes:
        question_id: Id of the rendered question.
        condition: Condition name, e.g. ``P2``.
        text: The exact text of the last user turn, the one holding the question.
        displayed_labels: Labels as shown to the model, in display order.
        canonical_labels: For each displayed position, the canonical label of the option shown there,
            so a displayed answer maps back to the canonical option.
        displayed_options: Option texts in display order (the parser may match on them).
        template_version: Version of the condition templates that produced the text.
        earlier_turns: The turns sent before the user turn, in order (``()`` for a one-turn prompt).
        cloze_target: The cloze continuation this prompt's condition fixes (``label`` or ``text``: lm-eval's
            own forms, ``conditions=cloze``), or None where ``generation.cloze_target`` decides.
    """

    question_id: str
    condition: str
    text: str
    displayed_labels: tuple[str, ...]
    canonical_labels: tuple[str, ...]
    displayed_options: tuple[str, ...]
    template_version: str
    earlier_turns: tuple[Turn, ...] = ()
    cloze_target: str | None = None

    def __post_init__(self) -> None:
        """Refuse a conversation no chat API could send (:func:`check_turns`)."""
        if self.earlier_turns:
            check_turns(self.turns, f"question {self.question_id!r}, condition {self.condition!r}")

    @property
    def turns(self) -> tuple[Turn, ...]:
        """Every turn in order, the user turn holding the question last."""
        return (*self.earlier_turns, Turn("user", self.text))

    def messages(self) -> list[dict[str, str]]:
        """The turns as chat messages (``[{"role", "content"}, ...]``), exactly as every backend sends them."""
        return [turn.to_dict() for turn in self.turns]

    @property
    def sha256(self) -> str:
        """Hex sha256 of the prompt; part of the store key.

        Of the text alone for a one-turn prompt (so every key stored before turns existed still serves),
        else of the canonical JSON of every turn (:func:`turns_sha256`): two prompts whose user
        turns are the same but whose system turns differ never share a stored completion.
        """
        if not self.earlier_turns:
            return sha256_text(self.text)
        return turns_sha256(self.turns)

    def canonical_for(self, displayed: str) -> str:
        """Map a displayed label (exactly as in ``displayed_labels``) to its canonical label."""
        return self.canonical_labels[self.displayed_labels.index(displayed)]


@dataclass(frozen=True)
class GenerationParams:
    """Canonical generation parameters (docs/architecture.md): the only ones comparisons check.

    Attributes:
        temperature: Sampling temperature; 0 is greedy.
        max_tokens: Maximum number of output tokens.
        seed: Sampling seed sent to the backend, or None.
        top_p: Nucleus sampling threshold, or None when unset.
        top_k: Top-k sampling cut-off, or None when unset.
        label_probs: Also read the first reply token's distribution over the option labels.
        cloze: Also read each option's continuation log-likelihood after the prompt (``prism.cloze``).
        cloze_target: What the continuation is where the condition does not fix it: ``label`` (`` B``) or
            ``text`` (`` <option text>``).
    """

    temperature: float
    max_tokens: int
    seed: int | None = None
    top_p: float | None = None
    top_k: int | None = None
    label_probs: bool = False
    cloze: bool = False
    cloze_target: str = "label"

    def canonical(self) -> dict[str, Any]:
        """Return the canonical dict, with the same keys and types on every machine.

        ``label_probs`` joins only when true: a run without it keeps the store keys and records it had
        before the option existed, while a run with it never reuses a completion that lacks probabilities.
        """
        canonical: dict[str, Any] = {
            "temperature": float(self.temperature),
            "max_tokens": int(self.max_tokens),
            "seed": None if self.seed is None else int(self.seed),
            "top_p": None if self.top_p is None else float(self.top_p),
            "top_k": None if self.top_k is None else int(self.top_k),
        }
        if self.label_probs:
            canonical["label_probs"] = True
        if self.cloze:  # likewise: absent unless asked, so every key stored before the option still serves
            canonical["cloze"] = True
            canonical["cloze_target"] = str(self.cloze_target)
        return canonical


@dataclass(frozen=True)
class ModelIdentity:
    """What answered: the name a user gave, the backend, and a digest that pins the weights.

    Attributes:
        name: Model name as configured (``smollm2``, ``llama3``...).
        backend: Backend name (``llamacpp``, ``replay``, ``ollama``, ``openai``).
        digest: Content digest of the weights or their stand-in (docs/architecture.md, "Model identity").
        details: Extra facts worth logging (server version, file path...), never part of any key.
    """

    name: str
    backend: str
    digest: str
    details: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LabelReading:
    """The first reply token's distribution, read as the option labels it could start with.

    Attributes:
        label_probs: Displayed label -> probability, renormalized over the prompt's displayed labels; None
            when no label token was seen (only possible with a top-k list).
        label_mass: The unnormalized total probability of the label tokens: how much the model wanted to
            start its reply with a label at all (None when unknown: a replay line without it).
        top_logprobs: The first position's most likely tokens as (token text, log-probability), most
            likely first, as the backend returned them (or, for ``full``, the top of the whole distribution).
        source: ``full`` when read from the whole distribution, ``top_k`` when only a top-k list was
            available (labels outside the list count as 0), ``replay`` when a replay file gave the numbers.
    """

    label_probs: dict[str, float] | None
    label_mass: float | None
    top_logprobs: tuple[tuple[str, float], ...]
    source: str

    def record_fields(self) -> dict[str, Any]:
        """The raw-record fields of this reading (``label_probs`` and ``label_mass`` absent, not null, when unknown)."""
        fields: dict[str, Any] = {
            "top_logprobs": [{"token": token, "logprob": logprob} for token, logprob in self.top_logprobs],
            "label_probs_source": self.source,
        }
        if self.label_mass is not None:
            fields["label_mass"] = self.label_mass
        if self.label_probs is not None:
            fields["label_probs"] = dict(self.label_probs)
        return fields


@dataclass(frozen=True)
class ClozeReading:
    """Each option's continuation log-likelihood after the prompt (the third reading, ``prism.cloze``).

    Attributes:
        logprobs: Canonical label -> the summed log-probability of the option's continuation tokens.
        tokens: Canonical label -> how many tokens the continuation is.
        chars: Canonical label -> the option's length in characters (what ``acc_norm`` divides by).
        source: ``embedded`` (llama.cpp in this process) or ``echo`` (a server's echoed prompt log-probabilities).
    """

    logprobs: dict[str, float]
    tokens: dict[str, int]
    chars: dict[str, int]
    source: str

    def record_fields(self) -> dict[str, Any]:
        """The raw-record fields of this reading."""
        return {"cloze_logprobs": dict(self.logprobs), "cloze_tokens": dict(self.tokens),
                "cloze_chars": dict(self.chars), "cloze_source": self.source}


@dataclass(frozen=True)
class Completion:
    """What a backend returned for one request.

    A failed request (transport error, timeout, unreadable body) has ``error`` set and ``text`` None;
    an empty completion is ``text == ""`` and is an observed response.

    Attributes:
        text: The completion text, or None when the request failed.
        latency_s: Wall time of the request in seconds.
        prompt_tokens: Prompt tokens as counted by the backend, when known.
        completion_tokens: Completion tokens as counted by the backend, when known.
        error: Why the request failed, or None.
        backend_options: What the backend actually sent, in its own names.
        label_reading: The first token's distribution over the labels, when ``label_probs`` was asked for.
        finish_reason: Why generation stopped (``"stop"``, ``"length"``, ...) as the backend said it,
            or None when it does not say.
        provider_cached_tokens: Prompt tokens the provider served from its own prompt cache, when its usage
            reports them (OpenAI ``prompt_tokens_details.cached_tokens``, Anthropic ``cache_read_input_tokens``).
        endpoint: Which server of an endpoint pool answered (``model.endpoints``), or None outside a pool.
        cloze_reading: Each option's continuation log-likelihood, when ``cloze`` was asked for.
    """

    text: str | None
    latency_s: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None
    backend_options: dict[str, Any] = field(default_factory=dict)
    label_reading: LabelReading | None = None
    finish_reason: str | None = None
    provider_cached_tokens: int | None = None
    endpoint: str | None = None
    cloze_reading: ClozeReading | None = None


@dataclass(frozen=True)
class Parsed:
    """The parser's reading of one response; it never sees the answer key.

    Attributes:
        displayed: The recovered label exactly as it appears in the displayed labels, or None.
        recovered: Whether an answer was recovered.
        compliant: Whether the response followed the output instruction (a bare label, nothing else).
        method: The rule that decided (``exact``, ``bare``, ``leading``, ``statement``,
            ``enumeration``, ``ambiguous``, ``option_text``, ``none``, ``empty``).
    """

    displayed: str | None
    recovered: bool
    compliant: bool
    method: str
