"""Hydra callbacks of PRISM's commands, listed under ``hydra.callbacks`` in ``prism/conf``."""

from __future__ import annotations

import sys
from typing import Any

from hydra.experimental.callback import Callback

from prism.errors import ConfigError
from prism.run.writable import check_writable_dir


class OutputDirCheck(Callback):
    """A Hydra callback that refuses an unwritable run or sweep directory before Hydra tries to create it.

    Hydra creates the directory itself, after the callbacks' ``on_run_start``, and reports a failure with
    a traceback; the check prints one paragraph and exits with status 1 instead.
    """

    def __init__(self, prog: str = "prism") -> None:
        """Name the command in the error line (``prism``, ``prism.compare``...)."""
        self.prog = prog

    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        """Check ``hydra.run.dir``."""
        self._check(config.hydra.run.dir, "hydra.run.dir")

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        """Check ``hydra.sweep.dir``."""
        self._check(config.hydra.sweep.dir, "hydra.sweep.dir")

    def _check(self, path: str, setting: str) -> None:
        try:
            check_writable_dir(path, setting)
        except ConfigError as exc:
            print(f"{self.prog}: error: {exc}", file=sys.stderr)
            sys.exit(1)
