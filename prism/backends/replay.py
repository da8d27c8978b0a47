"""Replay backend: answers from a JSONL file instead of a model.

Each line is ``{"question_id", "condition", "repetition"?, "response", "finish_reason"?}`` (repetition
defaults to 0, finish_reason to null; ``"error"`` instead of ``"response"`` scripts a failed request). For
``generation.label_probs=true`` a line may also carry ``label_probs`` (displayed label -> probability,
renormalized here over the prompt's labels), ``label_mass`` and ``top_logprobs`` (``[{"token", "logprob"}]``);
such records say ``label_probs_source: replay``, and a line without ``label_probs`` gives a cell without them.
It exists for exact scenario tests, for importing responses produced elsewhere, and for benchmarks of
everything around inference. Its digest is the file's sha256, so two scripted models never share stored
answers. The file is indexed, not held (:class:`ReplayIndex`), so its size is bounded by the disk only.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prism.backends.base import BackendError, Request
from prism.backends.registry import BackendEntry, register_backend
from prism.config import ModelConfig
from prism.records import CellKey
from prism.types import Completion, LabelReading, ModelIdentity


@dataclass
class ReplayModelConfig(ModelConfig):
    """Answers read from a JSONL file of {question_id, condition, repetition?, response} records."""

    name: str = "replay"
    backend: str = "replay"
    # The JSONL file to answer from (required).
    path: str | None = None


def read_replay_file(path: Path) -> dict[CellKey, dict[str, Any]]:
    """Read and check a whole replay file into memory (small files: tests, tools); runs use :class:`ReplayIndex`.

    Raises:
        BackendError: As :class:`ReplayIndex`.
    """
    index = ReplayIndex(path)
    try:
        return dict(index.items())
    finally:
        index.close()


class ReplayIndex:
    """A replay file checked line by line once, then read back one line per cell when it is asked.

    The file is never held whole: the index keeps, per line, a 64-bit hash of its cell, its byte offset and
    length and its line number (32 bytes a line, sorted by hash), so a million-cell file costs about 32 MB
    and a lookup one binary search and one read. Every line is checked while indexing, before anything is
    asked, exactly as when the file was read whole; the digest (sha256 of the file) comes from the same pass.
    """

    def __init__(self, path: Path) -> None:
        """Index ``path``.

        Raises:
            BackendError: If the file is missing, or a line is not a JSON object with the required fields
                (naming the file and line), or a cell appears twice.
        """
        import numpy as np

        if not path.is_file():
            raise BackendError(
                f"replay file {str(path)!r} does not exist; pass an existing JSONL file as model.path=FILE."
            )
        self.path = path
        hashes, offsets, lengths, numbers = array("Q"), array("q"), array("q"), array("q")
        digest = hashlib.sha256()
        self.has_label_probs = False
        offset = 0
        with path.open("rb") as handle:  # bytes: a line that is not UTF-8 is named like any other bad line
            for number, line in enumerate(handle, start=1):
                digest.update(line)
                size = len(line)
                if line.strip():
                    record = _check_line(line, f"{path}:{number}")
                    self.has_label_probs = self.has_label_probs or record.get("label_probs") is not None
                    hashes.append(_cell_hash(CellKey.of(record)))
                    offsets.append(offset)
                    lengths.append(size)
                    numbers.append(number)
                offset += size
        self.digest = digest.hexdigest()
        order = np.argsort(np.frombuffer(hashes, dtype=np.uint64), kind="stable")
        self._hashes = np.frombuffer(hashes, dtype=np.uint64)[order]
        self._offsets = np.frombuffer(offsets, dtype=np.int64)[order]
        self._lengths = np.frombuffer(lengths, dtype=np.int64)[order]
        self._numbers = np.frombuffer(numbers, dtype=np.int64)[order]
        self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        self._check_repeats()

    def __len__(self) -> int:
        """The number of cells (non-blank lines)."""
        return len(self._hashes)

    def _read(self, position: int) -> dict[str, Any]:
        line = os.pread(self._fd, int(self._lengths[position]), int(self._offsets[position]))
        record: dict[str, Any] = json.loads(line.decode("utf-8"))
        return record

    def _check_repeats(self) -> None:
        """Refuse a cell that appears twice, naming the first line (in file order) that repeats one."""
        import numpy as np

        same = np.flatnonzero(self._hashes[1:] == self._hashes[:-1])
        if not len(same):
            return
        first_repeat: tuple[int, CellKey] | None = None
        for value in np.unique(self._hashes[same]):  # a hash shared by two lines: a repeat, or a collision
            lines: dict[CellKey, list[int]] = {}
            for position in np.flatnonzero(self._hashes == value):
                lines.setdefault(CellKey.of(self._read(int(position))), []).append(int(self._numbers[position]))
            for key, numbers in lines.items():
                if len(numbers) > 1 and (first_repeat is None or sorted(numbers)[1] < first_repeat[0]):
                    first_repeat = (sorted(numbers)[1], key)
        if first_repeat is not None:
            self.close()
            number, key = first_repeat
            raise BackendError(f"{self.path}:{number} repeats the cell {tuple(key)}; each (question, condition, "
                               "repetition) once.")

    def get(self, key: CellKey) -> dict[str, Any] | None:
        """The line of cell ``key``, or None when the file has none."""
        import numpy as np

        value = np.uint64(_cell_hash(key))
        position = int(np.searchsorted(self._hashes, value))
        while position < len(self._hashes) and self._hashes[position] == value:
            record = self._read(position)
            if CellKey.of(record) == key:
                return record
            position += 1
        return None

    def items(self) -> Iterator[tuple[CellKey, dict[str, Any]]]:
        """Every (cell, line) in file order."""
        for position in sorted(range(len(self._offsets)), key=lambda p: int(self._offsets[p])):
            record = self._read(position)
            yield CellKey.of(record), record

    def close(self) -> None:
        """Release the file."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _cell_hash(key: CellKey) -> int:
    """A 64-bit hash of a cell, stable across processes (Python's own ``hash`` of a string is not)."""
    text = f"{key.question_id}\x1f{key.condition}\x1f{key.repetition}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def _check_line(line: bytes, where: str) -> dict[str, Any]:
    """One replay line as its JSON object, checked.

    Raises:
        BackendError: Naming ``where`` and what is wrong with the line.
    """
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
    return record


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
        self._index = ReplayIndex(self._path)
        self._digest = self._index.digest
        self._name = model.name or "replay"

    def identity(self) -> ModelIdentity:
        """Name from ``model.name``; digest = sha256 of the replay file."""
        return ModelIdentity(self._name, "replay", self._digest, {"path": str(self._path)})

    def check_label_probs(self, label_sets: Mapping[str, tuple[str, ...]]) -> None:
        """A replay file gives label probabilities only if its lines carry them.

        Raises:
            BackendError: If no line of the file has ``label_probs``.
        """
        if not self._index.has_label_probs:
            raise BackendError(
                f"generation.label_probs=true, but no line of the replay file {str(self._path)!r} has label_probs, "
                "so there are no probabilities to record and nothing was asked. Add label_probs (and label_mass) "
                "to its lines, or set generation.label_probs=false."
            )

    def generate(self, request: Request) -> Completion:
        """Look the cell up; a cell the file lacks is an error naming it."""
        key = request.cell
        start = time.perf_counter()
        record = self._index.get(key)
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
        """Release the replay file."""
        self._index.close()


# The backend's one entry: model.backend="replay" finds its schema, factory and capabilities here.
REPLAY = register_backend(BackendEntry(
    "replay", ReplayModelConfig, ReplayBackend, capabilities=frozenset({"label_probs", "system_turn"}),
))
