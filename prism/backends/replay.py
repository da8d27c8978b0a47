"""Replay backend: answers from a JSONL file instead of a model.

Each line is ``{"question_id", "condition", "repetition"?, "response", "finish_reason"?}`` (repetition
defaults to 0, finish_reason to null; ``"error"`` instead of ``"response"`` scripts a failed request). For
``generation.label_probs=true`` a line may also carry ``label_probs`` (displayed label -> probability,
renormalized here over the prompt's labels), ``label_mass`` and ``top_logprobs`` (``[{"token", "logprob"}]``);
such records say ``label_probs_source: replay``, and a line without ``label_probs`` gives a cell without them.
It exists for exact scenario tests, for importing responses produced elsewhere, and for benchmarks of
everything around inference. Its digest is the file's sha256, so two scripted models never share stored
answers.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prism.backends.base import BackendError, Request
from prism.config import ReplayModelConfig
from prism.records import CellKey
from prism.types import Completion, LabelReading, ModelIdentity


def read_replay_file(path: Path) -> dict[CellKey, dict[str, Any]]:
    """Read and check a replay file.

    Raises:
        BackendError: If the file is missing, or a line is not a JSON object with the required fields
            (naming the file and line), or a cell appears twice.
    """
    if not path.is_file():
        raise BackendError(
            f"replay file {str(path)!r} does not exist; pass an existing JSONL file as model.path=FILE."
        )
    table: dict[CellKey, dict[str, Any]] = {}
    with path.open("rb") as handle:  # bytes: a line that is not UTF-8 is named like any other bad line
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise BackendError(f"{where} is not valid UTF-8; fix or remove that line.") from exc
            except (ValueError, RecursionError) as exc:  # JSONDecodeError, or nesting too deep to read
                raise BackendError(f"{where} is not valid JSON ({getattr(exc, 'msg', exc)}); fix or remove that "
                                   "line.") from exc
            if not isinstance(record, dict):
                raise BackendError(f"{where} must be a JSON object with question_id, condition and response.")
            missing = [k for k in ("question_id", "condition") if k not in record]
            if missing or ("response" not in record and "error" not in record):
                missing += [] if ("response" in record or "error" in record) else ["response"]
                raise BackendError(f"{where} lacks {', '.join(missing)}; each line needs question_id, "
                                   "condition and response (repetition is optional, default 0).")
            response = record.get("response")
            if response is not None and not isinstance(response, str):
                raise BackendError(f"{where}: response must be a string or null, not {type(response).__name__}.")
            reason = record.get("finish_reason")
            if reason is not None and not isinstance(reason, str):
                raise BackendError(f"{where}: finish_reason must be a string such as \"stop\" or \"length\", or "
                                   f"null, not {type(reason).__name__}.")
            repetition = record.get("repetition", 0)
            if not isinstance(repetition, int) or isinstance(repetition, bool) or repetition < 0:
                raise BackendError(f"{where}: repetition must be a whole number >= 0, not {repetition!r}.")
            _check_label_fields(record, where)
            key = CellKey(str(record["question_id"]), str(record["condition"]), repetition)
            if key in table:
                raise BackendError(f"{where} repeats the cell {tuple(key)}; each (question, condition, repetition) "
                                   "once.")
            table[key] = record
    return table


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value and value >= 0


def _check_label_fields(record: dict[str, Any], where: str) -> None:
    """Refuse label fields of the wrong shape: numbers are never guessed, so a bad one is an error."""
    probs = record.get("label_probs")
    if probs is not None and not (isinstance(probs, dict) and probs and all(_number(v) for v in probs.values())
                                  and sum(probs.values()) > 0):
        raise BackendError(f"{where}: label_probs must map displayed labels to probabilities (numbers >= 0, not all "
                           f"0), not {probs!r}.")
    if record.get("label_mass") is not None and not (_number(record["label_mass"]) and record["label_mass"] <= 1):
        raise BackendError(f"{where}: label_mass must be a probability between 0 and 1, not {record['label_mass']!r}.")
    top = record.get("top_logprobs")
    if top is not None and not (isinstance(top, list) and all(
            isinstance(t, dict) and isinstance(t.get("token"), str) and isinstance(t.get("logprob"), int | float)
            for t in top)):
        raise BackendError(f"{where}: top_logprobs must be a list of {{\"token\": text, \"logprob\": number}}.")


def replay_reading(record: dict[str, Any], labels: tuple[str, ...], where: str) -> LabelReading | None:
    """The label reading a replay line gives for a prompt with these labels, or None when it has none.

    Raises:
        BackendError: If ``label_probs`` names a label the prompt does not display.
    """
    probs = record.get("label_probs")
    if probs is None:
        return None
    strangers = sorted(set(probs) - set(labels))
    if strangers:
        raise BackendError(f"{where}: label_probs names {strangers}, which the prompt does not display (its labels "
                           f"are {list(labels)}); fix the line.")
    total = float(sum(probs.values()))
    top = tuple((str(t["token"]), float(t["logprob"])) for t in record.get("top_logprobs") or [])
    mass = record.get("label_mass")
    return LabelReading({label: float(probs.get(label, 0.0)) / total for label in labels},
                        None if mass is None else float(mass), top, "replay")


class ReplayBackend:
    """A scripted model whose answers come from a JSONL file."""

    concurrency = 1

    def __init__(self, model: ReplayModelConfig) -> None:
        """Load the file named by ``model.path``; ``model.name`` is the reported model name."""
        if not model.path:
            raise BackendError("the replay backend needs a file: model=replay model.path=FILE model.name=NAME.")
        self._path = Path(model.path).expanduser()
        self._table = read_replay_file(self._path)
        self._digest = hashlib.sha256(self._path.read_bytes()).hexdigest()
        self._name = model.name or "replay"

    def identity(self) -> ModelIdentity:
        """Name from ``model.name``; digest = sha256 of the replay file."""
        return ModelIdentity(self._name, "replay", self._digest, {"path": str(self._path)})

    def check_label_probs(self, label_sets: Mapping[str, tuple[str, ...]]) -> None:
        """A replay file gives label probabilities only if its lines carry them.

        Raises:
            BackendError: If no line of the file has ``label_probs``.
        """
        if not any(record.get("label_probs") is not None for record in self._table.values()):
            raise BackendError(
                f"generation.label_probs=true, but no line of the replay file {str(self._path)!r} has label_probs, "
                "so there are no probabilities to record and nothing was asked. Add label_probs (and label_mass) "
                "to its lines, or set generation.label_probs=false."
            )

    def generate(self, request: Request) -> Completion:
        """Look the cell up; a cell the file lacks is an error naming it."""
        key = request.cell
        start = time.perf_counter()
        record = self._table.get(key)
        if record is None:
            raise BackendError(
                f"replay file {str(self._path)!r} has no response for question_id={key.question_id!r}, "
                f"condition={key.condition!r}, repetition={key.repetition}; add that line or run fewer questions."
            )
        latency = time.perf_counter() - start
        if record.get("response") is None:
            return Completion(text=None, latency_s=latency, error=str(record.get("error") or "scripted failure"))
        reading = None
        if request.params.label_probs:
            where = f"replay file {str(self._path)!r}, cell {key}"
            reading = replay_reading(record, request.prompt.displayed_labels, where)
        return Completion(text=str(record["response"]), latency_s=latency, label_reading=reading,
                          finish_reason=record.get("finish_reason"))

    def close(self) -> None:
        """Nothing to release."""
