"""One run of one experiment at a time per completion store.

Two identical runs started at once would both ask the model for every missing cell. The store would
stay consistent (the first completion of a cell wins), but the second run would repeat the work. A lock
file per experiment (the sha256 of its logged params) beside the store makes the second run wait, say
so, and then take every cell from the store. Different experiments never wait for each other, so the
jobs of a parallel sweep run side by side.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

try:  # POSIX only; elsewhere identical runs are not serialized (the store still stays consistent)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


def lock_path(store_path: str | Path, experiment_sha256: str) -> Path:
    """The lock file of one experiment on one store."""
    store = Path(store_path)
    return store.parent / f"{store.name}.locks" / f"{experiment_sha256[:32]}.lock"


@contextmanager
def experiment_lock(store_path: str | Path, experiment_sha256: str, poll_s: float = 0.5) -> Iterator[float]:
    """Hold the experiment's lock; yields how many seconds were spent waiting for another run.

    The holder's pid and start time are written into the lock file so the waiting run can say whom it
    waits for. The lock is an ``flock``: the kernel releases it when its holder dies, even by SIGKILL.
    """
    if fcntl is None:
        yield 0.0
        return
    path = lock_path(store_path, experiment_sha256)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+", encoding="utf-8") as handle:
        start = time.monotonic()
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            log.warning(
                "another run of this same experiment is using the store (%s); waiting for it to finish, "
                "then every cell it stored is reused instead of asked again. Stop it, or run with "
                "store.enabled=false, to not wait.", holder,
            )
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    time.sleep(poll_s)
        waited = time.monotonic() - start
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        handle.flush()
        try:
            yield waited
        finally:
            handle.seek(0)
            handle.truncate()
            fcntl.flock(handle, fcntl.LOCK_UN)
