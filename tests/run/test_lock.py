"""Two identical runs started at once against one store: one asks, the other waits and reuses."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from backends.ollama_server import OllamaStub
from conftest import run_overrides

from prism.run.lock import experiment_lock, lock_path


def test_lock_is_per_experiment_and_released_when_the_holder_ends(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    with experiment_lock(store, "a" * 64) as waited:
        assert waited < 1
        assert "pid" in lock_path(store, "a" * 64).read_text()
        with experiment_lock(store, "b" * 64) as other:  # another experiment never waits
            assert other < 1
    released = threading.Event()

    def hold() -> None:
        with experiment_lock(store, "c" * 64):
            time.sleep(0.5)
        released.set()

    holder = threading.Thread(target=hold)
    holder.start()
    time.sleep(0.1)
    with experiment_lock(store, "c" * 64, poll_s=0.02) as waited:
        assert released.is_set() and waited >= 0.3
    holder.join()


def test_two_identical_runs_at_once_ask_each_cell_once_and_both_finish(workdir: Path, data_dir: Path) -> None:
    # Slow enough (20 x 0.5 s) that the second run starts while the first is asking.
    with OllamaStub(delay_s=0.5) as stub:
        args = [sys.executable, "-m", "prism", *run_overrides(workdir, data_dir), "model=llama3",
                f"model.host={stub.url}", "dataset.n=4"]
        first = subprocess.Popen([*args, f"hydra.run.dir={workdir}/first"], cwd=workdir, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        second = subprocess.Popen([*args, f"hydra.run.dir={workdir}/second"], cwd=workdir, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        outputs = [p.communicate(timeout=300)[0] for p in (first, second)]
        assert first.returncode == 0 and second.returncode == 0, outputs
        assert len(stub.chats) == 20, "every cell was asked exactly once"
    waiting = [o for o in outputs if "another run of this same experiment is using the store" in o]
    assert len(waiting) == 1
    for name in ("first", "second"):
        records = [json.loads(line) for line in (workdir / name / "responses/responses.jsonl").open()]
        cells = {(r["question_id"], r["condition"], r["repetition"]) for r in records}
        assert len(records) == len(cells) == 20
    with sqlite3.connect(workdir / "store.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM completions").fetchone() == (20,)
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
