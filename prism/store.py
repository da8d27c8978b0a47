"""Evidence on disk: the run's append-only ``responses.jsonl`` and the content-addressed completion store.

Every completion is written to the run's log (flushed and fsynced) the moment it arrives, before
anything parses it, and is never rewritten. The SQLite store keys completions by per-request values
only, (backend, model digest, prompt sha256, canonical generation parameters, repetition), so a rerun
reuses them, a larger ``generation.repetitions`` extends them, and an interrupted run resumes.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from prism.errors import PrismError
from prism.types import canonical_json, sha256_text

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    model_digest TEXT NOT NULL,
    prompt_sha256 TEXT NOT NULL,
    generation TEXT NOT NULL,
    repetition INTEGER NOT NULL,
    record TEXT NOT NULL,
    record_sha256 TEXT NOT NULL,
    run_id TEXT,
    created_at TEXT NOT NULL
)
"""


class StoreError(PrismError, RuntimeError):
    """The store or the response log cannot be used as it is; the message says why and what to do."""


def store_key(backend: str, digest: str, prompt_sha256: str, generation: Mapping[str, Any], repetition: int) -> str:
    """The store key: a sha256 over the per-request values that determine a completion."""
    return sha256_text(
        canonical_json(
            {
                "backend": backend,
                "model_digest": digest,
                "prompt_sha256": prompt_sha256,
                "generation": dict(generation),
                "repetition": int(repetition),
            }
        )
    )


class CompletionStore:
    """A SQLite table of observed completions; failed requests are never stored, so they are retried."""

    def __init__(self, path: str | Path) -> None:
        """Open (creating if needed) the store at ``path``."""
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # WAL lets several runs read while one writes; the timeout makes a second writer wait
            # instead of failing on a locked database.
            self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute(_SCHEMA)
            (check,) = self._db.execute("PRAGMA quick_check").fetchone()
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"the completion store {str(self.path)!r} cannot be opened ({exc}); move it aside to start "
                "a fresh one (store.path=NEW) or run with store.enabled=false."
            ) from exc
        if check != "ok":
            raise StoreError(f"the completion store {str(self.path)!r} failed its integrity check: {check}.")

    def get(self, key: str) -> dict[str, Any] | None:
        """Return the stored completion for ``key``, or None; a record whose checksum fails is an error."""
        row = self._db.execute("SELECT record, record_sha256 FROM completions WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        record_text, record_sha = row
        if sha256_text(record_text) != record_sha:
            raise StoreError(
                f"stored completion {key} in {str(self.path)!r} does not match its checksum; the store is "
                "corrupted. Move it aside (store.path=NEW) and rerun."
            )
        record: dict[str, Any] = json.loads(record_text)
        return record

    def producers(self, keys: list[str]) -> dict[str, str | None]:
        """Map each stored key to the MLflow run id that produced it."""
        found: dict[str, str | None] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, run_id in self._db.execute(
                f"SELECT key, run_id FROM completions WHERE key IN ({marks})", chunk
            ):
                found[key] = run_id
        return found

    def put(
        self, key: str, *, backend: str, digest: str, prompt_sha256: str, generation: Mapping[str, Any],
        repetition: int, record: Mapping[str, Any], run_id: str | None, created_at: str,
    ) -> None:
        """Store a completion once; a key already present is left as it was (first answer wins)."""
        text = canonical_json(dict(record))
        self._db.execute(
            "INSERT OR IGNORE INTO completions VALUES (?,?,?,?,?,?,?,?,?,?)",
            (key, backend, digest, prompt_sha256, canonical_json(dict(generation)), repetition, text,
             sha256_text(text), run_id, created_at),
        )

    def close(self) -> None:
        """Close the database."""
        self._db.close()


class ResponseLog:
    """The run's ``responses.jsonl``: one JSON object per line, appended, flushed and fsynced."""

    def __init__(self, path: str | Path) -> None:
        """Open ``path`` for appending (creating parent directories)."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle: IO[str] = self.path.open("a", encoding="utf-8")

    def append(self, record: Mapping[str, Any]) -> None:
        """Write one record durably before returning."""
        self._handle.write(json.dumps(dict(record), ensure_ascii=False, sort_keys=True) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        """Close the file."""
        self._handle.close()


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the records of a JSONL file, skipping a torn last line left by a kill.

    Raises:
        StoreError: If a line other than the last is not a JSON object (naming file and line).
    """
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    complete = lines[:-1]  # text after the last newline was never finished
    for number, line in enumerate(complete, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise StoreError(f"{path}:{number} is not a JSON record ({exc.msg}).") from exc
        if not isinstance(record, dict):
            raise StoreError(f"{path}:{number} is not a JSON object.")
        yield record
