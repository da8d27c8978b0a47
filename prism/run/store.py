"""Evidence on disk: the run's append-only ``responses.jsonl`` and the content-addressed completion store.

Every completion is written to the run's log (flushed and fsynced) the moment it arrives, before
anything parses it, and is never rewritten. The SQLite store keys completions by per-request values
only, (backend, model digest, prompt sha256, canonical generation parameters, repetition), so a rerun
reuses them, a larger ``generation.repetitions`` extends them, and an interrupted run resumes.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prism.errors import PrismError
from prism.types import canonical_json, sha256_text

if TYPE_CHECKING:
    from prism.config import StoreConfig

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
# The identity each (backend, model, address) last answered with, so that a dry run can count the cells
# the store holds for a server it must not ask (store keys hold the identity's digest).
_IDENTITIES = """
CREATE TABLE IF NOT EXISTS identities (
    backend TEXT NOT NULL,
    model TEXT NOT NULL,
    address TEXT NOT NULL,
    digest TEXT NOT NULL,
    details TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (backend, model, address)
)
"""


# How long a writer waits for another process's lock before the store reports it locked.
_BUSY_TIMEOUT_S = 60.0


log = logging.getLogger(__name__)


class StoreError(PrismError, RuntimeError):
    """The store or the response log cannot be used as it is; the message says why and what to do."""


# What to do about a failed write, by cause; anything else gets the generic advice.
_WRITE_FIXES = {
    errno.ENOSPC: "Free disk space",
    errno.EDQUOT: "Free space within your disk quota",
    errno.EROFS: "Make the file system writable again",
    errno.EACCES: "Make the file writable",
}


def _write_fix(exc: BaseException) -> str:
    """The fix for a failed write, from its errno (OSError) or SQLite's message (sqlite3)."""
    if isinstance(exc, OSError) and exc.errno in _WRITE_FIXES:
        return _WRITE_FIXES[exc.errno]
    text = str(exc).lower()
    if "full" in text:
        return _WRITE_FIXES[errno.ENOSPC]
    if "readonly" in text or "read-only" in text:
        return _WRITE_FIXES[errno.EROFS]
    return "Fix the cause above"


def store_key(backend: str, digest: str, prompt_sha256: str, generation: Mapping[str, Any], repetition: int,
              settings: Mapping[str, Any] | None = None) -> str:
    """The store key: a sha256 over the per-request values that determine a completion.

    ``settings`` are backend settings outside the model digest that can change a completion (a context
    size that cuts a long prompt). They enter the key only when given, i.e. when they differ from their
    defaults, so the keys of every completion stored before they were keyed stay the same.
    """
    values: dict[str, Any] = {
        "backend": backend,
        "model_digest": digest,
        "prompt_sha256": prompt_sha256,
        "generation": dict(generation),
        "repetition": int(repetition),
    }
    if settings:
        values["settings"] = dict(settings)
    return sha256_text(canonical_json(values))


def _enable_wal(db: sqlite3.Connection, timeout_s: float = _BUSY_TIMEOUT_S) -> None:
    """Put the database in WAL mode, waiting out another process that is doing the same.

    Switching a new database to WAL takes an exclusive lock, and SQLite answers "database is locked" at
    once, without its busy timeout, when another connection opens the same new file at that moment: the
    parallel jobs of a sweep (joblib, Ray) all open one store as they start. The mode is stored in the
    file, so a retry usually finds it already set by the winner and returns at once.
    """
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.25)


class CompletionStore:
    """A SQLite table of observed completions; failed requests are never stored, so they are retried.

    Every :meth:`put` is its own committed transaction, so a killed process loses no completion it stored.
    With ``sync_interval_s`` 0 (the default) each commit is also fsynced (``synchronous=FULL``); with a
    positive interval commits go to the write-ahead log without an fsync (``synchronous=NORMAL``, which
    SQLite keeps consistent and durable against a killed process) and the log is made durable on disk at
    most that many seconds later, and on :meth:`close`: a power loss then costs at most that interval of
    completions, which a resumed run asks again. An fsync costs milliseconds on a busy disk, more than a
    replayed or fast-served completion itself.
    """

    def __init__(self, path: str | Path, sync_interval_s: float = 0.0) -> None:
        """Open (creating if needed) the store at ``path``; ``sync_interval_s`` as in the class docstring."""
        self.path = Path(path)
        self.sync_interval_s = float(sync_interval_s)
        self._last_sync = time.monotonic()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # WAL lets several runs read while one writes; the timeout makes a second writer wait
            # instead of failing on a locked database.
            self._db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
            _enable_wal(self._db)
            self._db.execute("PRAGMA synchronous=FULL" if self.sync_interval_s <= 0 else "PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
            self._db.execute(_IDENTITIES)
            (check,) = self._db.execute("PRAGMA quick_check").fetchone()
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"the completion store {str(self.path)!r} cannot be opened ({exc}); move it aside to start "
                "a fresh one (store.path=NEW) or run with store.enabled=false."
            ) from exc
        if check != "ok":
            self._db.close()
            found = "; ".join(str(check).split("\n")[:3])  # SQLite lists every damaged cell: keep one paragraph
            raise StoreError(
                f"the completion store {str(self.path)!r} failed its integrity check ({found}); it was not used "
                "or changed. Move it aside to start a fresh one (store.path=NEW) or run with store.enabled=false."
            )

    def record_identity(self, address: str, backend: str, model: str, digest: str, details: Mapping[str, str],
                        recorded_at: str) -> None:
        """Remember the identity ``backend``/``model`` at ``address`` answered with (replacing an earlier one)."""
        try:
            self._db.execute("INSERT OR REPLACE INTO identities VALUES (?, ?, ?, ?, ?, ?)",
                             (backend, model, address, digest, canonical_json(dict(details)), recorded_at))
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot write to the completion store {str(self.path)!r} ({exc}). "
                             f"{_write_fix(exc)}, or run with store.enabled=false.") from exc

    def last_identity(self, address: str, backend: str, model: str) -> tuple[str, dict[str, str], str] | None:
        """(digest, details, recorded_at) last recorded for ``backend``/``model`` at ``address``, or None."""
        row = self._db.execute("SELECT digest, details, recorded_at FROM identities WHERE backend = ? AND model = ? "
                               "AND address = ?", (backend, model, address)).fetchone()
        if row is None:
            return None
        return str(row[0]), {str(k): str(v) for k, v in json.loads(row[1]).items()}, str(row[2])

    def present(self, keys: Sequence[str]) -> set[str]:
        """Which of ``keys`` the store holds, without reading their records (a dry run's count)."""
        found: set[str] = set()
        for start in range(0, len(keys), 500):
            chunk = list(keys[start : start + 500])
            marks = ",".join("?" * len(chunk))
            found.update(key for (key,) in self._db.execute(f"SELECT key FROM completions WHERE key IN ({marks})",
                                                            chunk))
        return found

    def get(self, key: str) -> dict[str, Any] | None:
        """Return the stored completion for ``key``, or None; a record whose checksum fails is an error."""
        try:
            row = self._db.execute("SELECT record, record_sha256 FROM completions WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError as exc:  # e.g. a page damaged after the integrity check at open
            raise StoreError(
                f"cannot read the completion store {str(self.path)!r} ({exc}); it is damaged. Move it aside "
                "(store.path=NEW) and rerun, or run with store.enabled=false."
            ) from exc
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

    def get_many(self, keys: Sequence[str]) -> dict[str, tuple[dict[str, Any], str | None]]:
        """The stored completions among ``keys``, each with the run id that produced it, in one pass.

        What :meth:`get` does for one key (a record whose checksum fails is an error), for a batch: a run
        of a million cells looks its cells up a few hundred at a time instead of one query each.
        """
        found: dict[str, tuple[dict[str, Any], str | None]] = {}
        for start in range(0, len(keys), 500):
            chunk = list(keys[start : start + 500])
            marks = ",".join("?" * len(chunk))
            try:
                rows = self._db.execute(
                    f"SELECT key, record, record_sha256, run_id FROM completions WHERE key IN ({marks})", chunk
                ).fetchall()
            except sqlite3.DatabaseError as exc:  # e.g. a page damaged after the integrity check at open
                raise StoreError(
                    f"cannot read the completion store {str(self.path)!r} ({exc}); it is damaged. Move it aside "
                    "(store.path=NEW) and rerun, or run with store.enabled=false."
                ) from exc
            for key, record_text, record_sha, run_id in rows:
                if sha256_text(record_text) != record_sha:
                    raise StoreError(
                        f"stored completion {key} in {str(self.path)!r} does not match its checksum; the store is "
                        "corrupted. Move it aside (store.path=NEW) and rerun."
                    )
                found[key] = (json.loads(record_text), run_id)
        return found

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
        try:
            self._db.execute(
                "INSERT OR IGNORE INTO completions VALUES (?,?,?,?,?,?,?,?,?,?)",
                (key, backend, digest, prompt_sha256, canonical_json(dict(generation)), repetition, text,
                 sha256_text(text), run_id, created_at),
            )
        except sqlite3.DatabaseError as exc:
            # "database or disk is full", "attempt to write a readonly database", I/O errors: SQLite rolls
            # the statement back, so the store holds every earlier completion and no part of this one.
            raise StoreError(
                f"could not write a completion to the store {str(self.path)!r} ({exc}). The run stopped here; "
                f"the store still holds every completion written before, and none in part. {_write_fix(exc)}, "
                "then run the same command again: stored completions are reused, not asked again."
            ) from exc
        if self.sync_interval_s > 0 and time.monotonic() - self._last_sync >= self.sync_interval_s:
            self.sync()

    def merge_from(self, other: CompletionStore, batch: int = 2000) -> int:
        """Copy every completion of ``other`` (a shard store) that this store lacks; return how many were new.

        Content-addressed: a key already here is left as it was (first answer wins), so merging a shard twice,
        or two shards holding the same cell, adds it once. Each batch is one transaction.

        Raises:
            StoreError: If ``other`` cannot be read or this store cannot be written.
        """
        added = 0
        try:
            rows = other._db.execute("SELECT * FROM completions")
            while chunk := rows.fetchmany(batch):
                before = self._db.total_changes
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.executemany("INSERT OR IGNORE INTO completions VALUES (?,?,?,?,?,?,?,?,?,?)", chunk)
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                added += self._db.total_changes - before
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"could not merge the shard store {str(other.path)!r} into {str(self.path)!r} ({exc}). "
                f"{_write_fix(exc)}, then run the same command again: the shard is kept until it is merged."
            ) from exc
        return added

    def count(self) -> int:
        """How many completions the store holds."""
        (n,) = self._db.execute("SELECT COUNT(*) FROM completions").fetchone()
        return int(n)

    def sync(self) -> None:
        """Make every committed completion durable on disk now (a no-op when each commit already was).

        A checkpoint fsyncs the write-ahead log before it copies it into the database (``synchronous=NORMAL``).
        """
        if self.sync_interval_s <= 0:
            return
        try:
            self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"could not make the completion store {str(self.path)!r} durable on disk ({exc}). "
                f"{_write_fix(exc)}, then run the same command again: stored completions are reused."
            ) from exc
        self._last_sync = time.monotonic()

    def close(self) -> None:
        """Make the last completions durable (see :meth:`sync`), then close the database."""
        try:
            self.sync()
        finally:
            self._db.close()


class ResponseLog:
    """The run's ``responses.jsonl``: one JSON object per line, appended and fsynced.

    Each record is written with ``os.write`` on an unbuffered descriptor, so no bytes of a failed write wait
    in a buffer for a later flush or ``close`` to add to the file. A write that fails (disk full, read-only
    file system) is cut back off the file when the file system allows, and the log then refuses every
    later append: a record is never written after a half-written one. A new run opens its own file (Hydra
    gives every run its own output directory); reopening a file whose last line a killed writer left
    unfinished cuts that tail off first, so the next record never joins it.

    Every record is handed to the operating system before :meth:`append` returns, so a killed process loses
    none. With ``sync_interval_s`` 0 (the default) it is also fsynced before :meth:`append` returns; with a
    positive interval the file is fsynced at most that many seconds after a record, and on :meth:`sync` and
    :meth:`close` (a power loss costs at most that interval, and those completions are in the store).
    """

    def __init__(self, path: str | Path, sync_interval_s: float = 0.0) -> None:
        """Open ``path`` for appending (creating parent directories); ``sync_interval_s`` as in the docstring."""
        self.path = Path(path)
        self._failure: str | None = None
        self.sync_interval_s = float(sync_interval_s)
        self._last_sync = time.monotonic()
        self._synced_size = 0
        self.last_offset = -1
        """Where the last appended record starts in the file (its byte offset)."""
        fd = -1
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            self._fd = fd
            self._cut_torn_tail()
            self._synced_size = os.fstat(fd).st_size
        except OSError as exc:
            if fd >= 0:
                os.close(fd)
            raise StoreError(
                f"cannot open the response log {str(self.path)!r} for writing ({exc.strerror or exc}). "
                f"{_write_fix(exc)}, then run the same command again."
            ) from exc

    def _cut_torn_tail(self) -> None:
        """Remove an unfinished last line (a writer killed mid-record): it was never a record."""
        size = os.fstat(self._fd).st_size
        if size == 0:
            return
        with self.path.open("rb") as handle:
            handle.seek(size - 1)
            if handle.read(1) == b"\n":
                return
            handle.seek(0)
            keep = handle.read().rfind(b"\n") + 1  # read whole only on this rare path, after a kill
        log.warning("%s ends with an unfinished record (%d bytes, a writer was killed mid-write); cutting it off "
                    "before appending", self.path, size - keep)
        os.ftruncate(self._fd, keep)

    def append(self, record: Mapping[str, Any], durable: bool = True) -> int:
        """Write one record, durably before returning unless the log syncs by interval (see the class).

        Args:
            record: The JSON object to write as one line.
            durable: False for a record that is already durable elsewhere (a completion served from the
                store): it is written but not fsynced on its own; :meth:`sync` or :meth:`close` does that.

        Returns:
            The byte offset where the record starts (also kept as :attr:`last_offset`).

        Raises:
            StoreError: If the write or fsync fails, or an earlier append of this log failed.
        """
        if self._failure is not None:
            raise StoreError(f"the response log {str(self.path)!r} takes no more records after a failed write "
                             f"({self._failure}).")
        data = memoryview((json.dumps(dict(record), ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
        start = os.fstat(self._fd).st_size
        try:
            while data:  # a short write (the disk filling up) returns the bytes that fit; write the rest
                written = os.write(self._fd, data)
                if written <= 0:  # never for a regular file; guards the loop against spinning
                    raise OSError(errno.EIO, "the write made no progress")
                data = data[written:]
            if durable and (self.sync_interval_s <= 0 or time.monotonic() - self._last_sync >= self.sync_interval_s):
                self._fsync()
        except OSError as exc:
            self._fail(exc, start)
        self.last_offset = start
        return start

    def sync(self) -> None:
        """Fsync every record written so far.

        Raises:
            StoreError: If the fsync fails; the records written since the last fsync are cut off when the
                file system allows (their completions are in the store, so a rerun logs them again).
        """
        if self._failure is not None:
            return
        try:
            self._fsync()
        except OSError as exc:
            self._fail(exc, self._synced_size, "the records written since the last fsync")

    def _fsync(self) -> None:
        os.fsync(self._fd)
        self._last_sync = time.monotonic()
        self._synced_size = os.fstat(self._fd).st_size

    def _fail(self, exc: OSError, keep: int, what: str = "the unfinished record") -> None:
        """Refuse later appends, cut the file back to ``keep`` bytes when allowed, and raise the StoreError."""
        self._failure = f"{exc.strerror or exc}"
        try:
            os.ftruncate(self._fd, keep)
            left = f"{what} {'was' if what.endswith('record') else 'were'} removed"
        except OSError:  # a read-only file system refuses this too; readers skip a torn last line
            left = "an unfinished last line may remain, which readers skip"
        raise StoreError(
            f"could not write a raw response to {str(self.path)!r} ({self._failure}). The run stopped here; "
            f"every response written before is kept and {left}. {_write_fix(exc)}, then run the same "
            "command again: completions already in the store are reused, not asked again."
        ) from exc

    def close(self) -> None:
        """Fsync what is not yet (see :meth:`sync`) and close the file; a failing close then loses nothing."""
        try:
            if self._failure is None and os.fstat(self._fd).st_size != self._synced_size:
                self.sync()
        finally:
            self._close_fd()

    def _close_fd(self) -> None:
        try:
            os.close(self._fd)
        except OSError as exc:
            log.warning("closing %s failed (%s); every record was already fsynced", self.path, exc)


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the records of a JSONL file, skipping (with a warning) a torn last line left by a kill.

    Lines are decoded one by one: a kill can cut the last line inside a multi-byte character.

    Raises:
        StoreError: If a line other than the last is not UTF-8 or not a JSON object (naming file and line).
    """
    lines = Path(path).read_bytes().split(b"\n")
    if lines[-1].strip():  # text after the last newline was never finished
        log.warning("%s:%d is an unfinished last line (a writer was killed mid-record); skipped", path, len(lines))
    for number, raw in enumerate(lines[:-1], start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise StoreError(f"{path}:{number} is not valid UTF-8.") from exc
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, or nesting too deep to parse
            raise StoreError(f"{path}:{number} is not a JSON record ({getattr(exc, 'msg', exc)}).") from exc
        if not isinstance(record, dict):
            raise StoreError(f"{path}:{number} is not a JSON object.")
        yield record


def open_store(cfg: StoreConfig) -> CompletionStore | None:
    """The run's completion store at ``store.path``, synced as ``store.sync_interval_s`` says; None when disabled.

    Raises:
        StoreError: As :class:`CompletionStore`.
    """
    return CompletionStore(cfg.path, cfg.sync_interval_s) if cfg.enabled else None


def store_directory(cfg: StoreConfig) -> Path | None:
    """The directory the store's file is made in (for the writable check), or None when the store is disabled."""
    return Path(cfg.path).expanduser().parent if cfg.enabled else None


def sync_interval(cfg: StoreConfig) -> float:
    """How often, in seconds, the run's files (its response log, and the store) are made durable on disk."""
    return float(cfg.sync_interval_s)
