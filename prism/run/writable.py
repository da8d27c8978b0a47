"""Directories PRISM writes into, checked before any work starts: one paragraph instead of a traceback.

A run writes its output directory (Hydra's ``hydra.run.dir``, or ``hydra.sweep.dir`` under ``-m``), the
frozen-set cache (``dataset.cache_dir``) and the completion store (``store.path``). One that cannot be
written would otherwise fail deep inside Hydra or the loader with a traceback; here it is refused first,
naming the setting that chose it. Nothing is created by the check. The run and sweep directories are
checked by a Hydra callback (``prism.run.callbacks.OutputDirCheck``), because Hydra creates them before PRISM runs.
"""

from __future__ import annotations

import os
from pathlib import Path

from prism.errors import ConfigError


def check_writable_dir(path: str | os.PathLike[str], setting: str) -> None:
    """Refuse ``path`` unless it is, or can be created as, a directory this process can write in.

    Args:
        path: The directory (it need not exist yet).
        setting: The override that chose it, named in the error (``dataset.cache_dir``).

    Raises:
        ConfigError: One paragraph naming the directory, what is in the way and how to fix it.
    """
    target = Path(path).expanduser().absolute()
    existing = target
    while not os.path.lexists(existing) and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        problem = f"{existing} is {'a file' if existing.exists() else 'a broken link'}, not a directory"
    elif not os.access(existing, os.W_OK | os.X_OK):
        problem = f"this user may not write in {existing} (or its file system is read-only)"
    else:
        return
    raise ConfigError(f"cannot write to {target} ({setting}): {problem}. Point {setting} at a directory you can "
                      f"write in ({setting}=DIR), or fix {existing}; nothing was asked or written yet.")


def check_writable_dirs(out: Path, frozen_cache: Path, store: Path | None) -> None:
    """Refuse an output directory, frozen-set cache or store directory that cannot be written, before any work.

    Args:
        out: The run's output directory.
        frozen_cache: Where its frozen sets go (:func:`prism.questions.freezing.frozen_cache_dir`).
        store: The directory of its completion store (:func:`prism.run.store.store_directory`), or None.

    Raises:
        ConfigError: Naming the directory and the setting that chose it.
    """
    check_writable_dir(out, "hydra.run.dir")
    check_writable_dir(frozen_cache, "dataset.cache_dir")
    if store is not None:
        check_writable_dir(store, "store.path")
