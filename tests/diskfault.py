"""A test double for a disk that fills up, or a file system that turns read-only, under one file.

Tests run as root here, so ``chmod`` cannot stop a write; this double replaces ``os.write``, ``os.fsync`` and
``os.ftruncate`` for the one file whose path ends with ``suffix`` (found through ``/proc/self/fd``) and
passes every other descriptor through. After ``after`` successful writes, the next write stores half its
bytes and returns that short count, as a filling disk does (``partial``), and every later write fails with
``code``; or every write fails at once (a read-only file system). ``ftruncate`` of that file can be made
to fail too, as a read-only file system refuses it. It is installed in-process by a test (through
``monkeypatch.setattr``) or in a ``python -m prism`` subprocess by :data:`BOOTSTRAP`.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class DiskFault:
    """Fail writes to one file after ``after`` successful ones; counts what it injected."""

    suffix: str = "responses.jsonl"
    after: int = 0
    code: int = errno.ENOSPC
    partial: bool = True
    truncate_fails: bool = False
    fsync_fails: bool = False  # writes succeed, fsync fails: delayed allocation finding the disk full
    writes: int = 0  # successful writes to the file (whole or short)
    injected: int = 0  # calls that failed because of this double

    def _target(self, fd: int) -> bool:
        try:
            return os.readlink(f"/proc/self/fd/{fd}").endswith(self.suffix)
        except OSError:
            return False

    def _error(self) -> OSError:
        self.injected += 1
        return OSError(self.code, os.strerror(self.code))

    def install(self, set_attr: Callable[[Any, str, Any], None] = setattr) -> DiskFault:
        """Patch ``os`` with ``set_attr`` (``monkeypatch.setattr`` in-process, so it is undone)."""
        real_write, real_fsync, real_ftruncate = os.write, os.fsync, os.ftruncate
        state = {"short": False}

        def write(fd: int, data: Any) -> int:
            target = self._target(fd)
            if not target or self.writes < self.after or self.fsync_fails:
                written = real_write(fd, data)
                self.writes += target
                return written
            if self.partial and not state["short"] and len(data) > 1:
                state["short"] = True
                self.injected += 1
                self.writes += 1
                return real_write(fd, bytes(data[: len(data) // 2]))
            raise self._error()

        def fsync(fd: int) -> None:
            if self.fsync_fails and self._target(fd) and self.writes > self.after:
                raise self._error()
            real_fsync(fd)

        def ftruncate(fd: int, length: int) -> None:
            if self.truncate_fails and self._target(fd):
                raise self._error()
            real_ftruncate(fd, length)

        set_attr(os, "write", write)
        set_attr(os, "fsync", fsync)
        set_attr(os, "ftruncate", ftruncate)
        return self


# Run `python -m prism ARGS` with a DiskFault installed: python -c BOOTSTRAP AFTER ERRNO ARGS...
BOOTSTRAP = """
import os, runpy, sys
sys.path.insert(0, os.environ["PRISM_TESTS_DIR"])
from diskfault import DiskFault
DiskFault(after=int(sys.argv[1]), code=int(sys.argv[2])).install()
sys.argv = ["prism", *sys.argv[3:]]
runpy.run_module("prism", run_name="__main__", alter_sys=True)
"""
