"""Replay backend: answers from a JSONL file instead of a model.

Each line is ``{"question_id", "condition", "repetition"?, "response", "finish_reason"?}`` (repetition
defaults to 0, finish_reason to null; ``"error"`` instead of ``"response"`` scripts a failed request).
It exists for exact scenario tests, for importing responses produced elsewhere, and for benchmarks of
everything around inference. Its digest is the file's sha256, so two scripted models never share
stored answers.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from prism.backends.base import BackendError, Request
from prism.config import ReplayModelConfig
from prism.records import CellKey
from prism.types import Completion, ModelIdentity


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
            key = CellKey(str(record["question_id"]), str(record["condition"]), repetition)
            if key in table:
                raise BackendError(f"{where} repeats the cell {tuple(key)}; each (question, condition, repetition) "
                                   "once.")
            table[key] = record
    return table


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
        return Completion(text=str(record["response"]), latency_s=latency, finish_reason=record.get("finish_reason"))

    def close(self) -> None:
        """Nothing to release."""
