"""Faults while a run collects evidence: kills, a full or read-only disk, damaged store and frozen files.

Each test injects its fault, then checks that no completed response was lost or duplicated: every cell
ends up stored exactly once, the same command finishes the run, and what it reports equals what an
uninterrupted run against a fresh store reports. The model is the Ollama stand-in (tests/backends) or a
replay file, never a real model. ``record_property`` writes how often each fault was injected into the
JUnit XML (``pytest --junitxml``), which is where RELIABILITY.md's figures come from.
"""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from backends.ollama_server import OllamaStub
from conftest import compose_config, fresh_mlflow, run_overrides
from diskfault import BOOTSTRAP, DiskFault

from prism.questions import freeze_question_set
from prism.run.pipeline import run
from prism.run.store import CompletionStore, ResponseLog, StoreError, read_jsonl
from prism.types import sha256_text

TESTS_DIR = Path(__file__).resolve().parents[1]
CONDITIONS = ("P0", "P1", "P2", "P3", "P4")

Cell = tuple[str, str, int]


def cell(record: dict[str, Any]) -> Cell:
    return (record["question_id"], record["condition"], record["repetition"])


def stored_prompts(store: Path) -> dict[str, int]:
    """prompt sha256 -> rows in the store (read with plain SQLite, as another process sees it)."""
    if not store.exists():
        return {}
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT prompt_sha256, COUNT(*) FROM completions GROUP BY prompt_sha256").fetchall()
    return dict(rows)


def mlflow_runs(uri: str) -> list[Any]:
    import mlflow

    client = mlflow.tracking.MlflowClient(uri)
    return client.search_runs(client.get_experiment_by_name("prism").experiment_id)


def cli(workdir: Path, *args: str, bootstrap: list[str] | None = None,
        **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``python -m prism ARGS`` (or the disk-fault bootstrap in front of it) as a person runs it."""
    head = ["-c", BOOTSTRAP, *bootstrap] if bootstrap else ["-m", "prism"]
    env = {**os.environ, "PRISM_TESTS_DIR": str(TESTS_DIR), "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, *head, *args], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=300, **kwargs)


# -- SIGKILL, three times in a row, then the same command --------------------------------------------------

KILLS = 3
# Where the kills land is drawn from this seed; PRISM_KILL_SEED=N repeats the test with other kill points.
KILL_SEED = int(os.environ.get("PRISM_KILL_SEED", "20261129"))
CHAT_DELAY_S = 0.3


def test_sigkill_three_times_mid_inference_then_the_same_command_finishes_like_an_uninterrupted_run(
        workdir: Path, data_dir: Path, mlflow_template: Path, record_property: Callable[[str, object], None]) -> None:
    rng = random.Random(KILL_SEED)  # where each kill lands: after which chat, and how far into the next
    n = 4
    ref_dir = workdir / "reference"
    fresh_mlflow(mlflow_template, workdir)
    fresh_mlflow(mlflow_template, ref_dir)
    with OllamaStub() as stub:
        # The uninterrupted run, against a fresh store and MLflow store of its own.
        reference = run(compose_config([*run_overrides(ref_dir, data_dir), "model=llama3", f"model.host={stub.url}",
                                        f"dataset.n={n}", "model.concurrency=2"]), output_dir=ref_dir / "out")
        expected = {cell(r): r for r in read_jsonl(ref_dir / "out/responses/responses.jsonl")}
        assert len(expected) == 5 * n
        cell_of_prompt = {sha256_text(r["prompt"]): c for c, r in expected.items()}

        stub.behaviour.delay_s = CHAT_DELAY_S  # slow enough that every kill lands mid-inference
        command = [*run_overrides(workdir, data_dir), "model=llama3", f"model.host={stub.url}", f"dataset.n={n}",
                   "model.concurrency=2"]
        store = workdir / "store.sqlite"
        killed_logs: list[list[dict[str, Any]]] = []
        kill_points = []
        for attempt in range(KILLS):
            stored_before = stored_prompts(store)
            first_chat = len(stub.chats)
            # At least the 3rd chat of this attempt: with two in flight, one completion is stored by then.
            after_chat, into = rng.randint(3, 5), rng.uniform(0, CHAT_DELAY_S)
            with (workdir / f"kill{attempt}.log").open("w") as log:
                proc = subprocess.Popen([sys.executable, "-m", "prism", *command,
                                         f"hydra.run.dir={workdir}/kill{attempt}"], cwd=workdir, stdout=log,
                                        stderr=subprocess.STDOUT)
                deadline = time.monotonic() + 240
                while len(stub.chats) - first_chat < after_chat:
                    assert proc.poll() is None, (workdir / f"kill{attempt}.log").read_text()[-3000:]
                    assert time.monotonic() < deadline, "the run never reached inference"
                    time.sleep(0.01)
                time.sleep(into)
                proc.send_signal(signal.SIGKILL)
                proc.wait()
            asked = [sha256_text(c["messages"][-1]["content"]) for c in stub.chats[first_chat:]]
            assert not set(asked) & set(stored_before), "a stored cell was asked for again"
            kill_points.append(f"chat {after_chat} + {into:.2f}s")
            killed_logs.append(list(read_jsonl(workdir / f"kill{attempt}/responses/responses.jsonl")))

        stored_before = stored_prompts(store)
        assert 0 < len(stored_before) < 5 * n
        first_chat = len(stub.chats)
        done = cli(workdir, *command, f"hydra.run.dir={workdir}/final")
        assert done.returncode == 0, done.stderr[-3000:]
        asked = {sha256_text(c["messages"][-1]["content"]) for c in stub.chats[first_chat:]}
        total_chats = len(stub.chats) - len(expected)  # less the reference run's

    assert not asked & set(stored_before)
    assert f"{len(stored_before)} responses from the store, {5 * n - len(stored_before)} new" in done.stdout
    # Every cell exactly once, with the uninterrupted run's response.
    final = list(read_jsonl(workdir / "final/responses/responses.jsonl"))
    assert sorted(cell(r) for r in final) == sorted(expected)
    assert {cell(r): r["response"] for r in final} == {c: r["response"] for c, r in expected.items()}
    assert stored_prompts(store) == dict.fromkeys(cell_of_prompt, 1)
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    # What the killed runs logged in whole lines is reused as it was, never asked again.
    by_cell = {cell(r): r for r in final}
    for records in killed_logs:
        for record in records:
            if not record["cached"]:
                assert by_cell[cell(record)]["cached"] and by_cell[cell(record)]["response"] == record["response"]
    # At most the requests in flight at each kill (two) were answered twice; nothing else was asked twice.
    assert 5 * n <= total_chats <= 5 * n + 2 * KILLS
    scored = {cell(r): (r["answer"], r["correct"]) for r in read_jsonl(workdir / "final/results/scored.jsonl")}
    assert scored == {cell(r): (r["answer"], r["correct"]) for r in read_jsonl(ref_dir / "out/results/scored.jsonl")}

    runs = mlflow_runs(f"sqlite:///{workdir}/mlflow.db")
    killed = sorted(r.info.run_id for r in runs if r.info.status == "RUNNING")
    (finished,) = [r for r in runs if r.info.status == "FINISHED"]
    assert len(killed) == KILLS  # SIGKILL leaves a run RUNNING; compare never selects those
    assert finished.data.tags["prism.resumed_from"] == ",".join(killed)
    # Tokens are split between the cells this run asked and those the store served; together they are the
    # reference's (which asked every cell), and every other metric is the reference's.
    usage = ("tokens_", "cost_usd")
    for name, value in finished.data.metrics.items():
        if not name.startswith(usage):
            assert value == pytest.approx(reference.metrics[name]), name
    both = finished.data.metrics["tokens_prompt"] + finished.data.metrics["tokens_from_store_prompt"]
    assert both == reference.metrics["tokens_prompt"] + reference.metrics["tokens_from_store_prompt"]

    record_property("injected", f"{KILLS} SIGKILLs, seed {KILL_SEED} ({'; '.join(kill_points)})")
    record_property("cells", 5 * n)
    record_property("stored_before_final", len(stored_before))
    record_property("asked_twice", total_chats - 5 * n)
    record_property("lost", 0)


# -- A full disk or a read-only file system under responses.jsonl ---------------------------------------


@pytest.mark.parametrize(
    ("fault", "cause", "left", "fix"),
    [
        (DiskFault(after=3, code=errno.ENOSPC), "No space left on device", "was removed", "Free disk space"),
        (DiskFault(after=3, code=errno.EROFS, partial=False, truncate_fails=True), "Read-only file system",
         "may remain", "Make the file system writable"),
        (DiskFault(after=3, code=errno.ENOSPC, truncate_fails=True), "No space left on device", "may remain",
         "Free disk space"),
        (DiskFault(after=3, code=errno.EIO, fsync_fails=True), "Input/output error", "was removed", "Fix the cause"),
    ],
    ids=["enospc-short-write", "erofs", "enospc-cut-refused", "eio-at-fsync"],
)
def test_a_failed_write_is_a_store_error_and_no_half_record_is_ever_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: DiskFault, cause: str, left: str, fix: str,
        record_property: Callable[[str, object], None]) -> None:
    path = tmp_path / "responses" / "responses.jsonl"
    log = ResponseLog(path)
    fault.install(monkeypatch.setattr)
    for i in range(3):
        log.append({"i": i, "text": "é" * 20})
    with pytest.raises(StoreError, match=rf"\({cause}\).*{left}.*\. {fix}.*run the same command again"):
        log.append({"i": 3, "text": "é" * 20})
    with pytest.raises(StoreError, match="takes no more records after a failed write"):
        log.append({"i": 4})  # never a record after a half-written one
    log.close()
    monkeypatch.undo()  # the disk has space again
    assert [r["i"] for r in read_jsonl(path)] == [0, 1, 2]  # a torn tail, if one is left, is skipped
    again = ResponseLog(path)  # a rerun in the same directory: a torn tail is cut, not joined
    again.append({"i": 5})
    again.close()
    assert [r["i"] for r in read_jsonl(path)] == [0, 1, 2, 5]
    assert path.read_bytes().endswith(b"}\n")
    record_property("injected", fault.injected)
    record_property("lost", 0)


def test_reader_decodes_each_line_so_a_tail_cut_inside_a_character_is_only_skipped(tmp_path: Path) -> None:
    path = tmp_path / "responses.jsonl"
    path.write_bytes(json.dumps({"a": "é"}, ensure_ascii=False).encode() + b"\n" + '{"a": "é'.encode()[:-1])
    assert list(read_jsonl(path)) == [{"a": "é"}]
    path.write_bytes(b'{"a": 1}\n\xff\n{"a": 2}\n')
    with pytest.raises(StoreError, match=r"responses.jsonl:2 is not valid UTF-8"):
        list(read_jsonl(path))


class _FullDisk:
    """A connection whose INSERTs fail the way SQLite reports a full disk (SQLITE_FULL)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.lstrip().upper().startswith("INSERT"):
            raise sqlite3.OperationalError("database or disk is full")
        return self._db.execute(sql, *args)

    def close(self) -> None:
        self._db.close()


def _put(store: CompletionStore, key: str) -> None:
    store.put(key, backend="replay", digest="d", prompt_sha256=key, generation={"temperature": 0.0}, repetition=0,
              record={"response": key}, run_id="r", created_at="2026-01-01T00:00:00Z")


@pytest.mark.parametrize(
    ("break_db", "message"),
    [
        (lambda store: setattr(store, "_db", _FullDisk(store._db)), "database or disk is full.*Free disk space"),
        # A real SQLite refusal: the connection turned read-only, as on a file system remounted read-only.
        (lambda store: store._db.execute("PRAGMA query_only = ON"), "readonly.*Make the file system writable"),
    ],
    ids=["sqlite-full", "sqlite-readonly"],
)
def test_a_failed_store_write_is_a_store_error_and_the_store_stays_whole(tmp_path: Path, break_db, message) -> None:
    store = CompletionStore(tmp_path / "store.sqlite")
    for i in range(3):
        _put(store, f"k{i}")
    break_db(store)
    with pytest.raises(StoreError, match=rf"(?s){message}.*run the same command again"):
        _put(store, "k3")
    store.close()
    reopened = CompletionStore(tmp_path / "store.sqlite")  # passes its integrity check
    assert [reopened.get(f"k{i}") for i in range(4)] == [{"response": "k0"}, {"response": "k1"}, {"response": "k2"},
                                                         None]
    reopened.close()


# -- The same faults through a whole run --------------------------------------------------------------------


def replay_file(workdir: Path, data_dir: Path, n: int) -> Path:
    frozen = freeze_question_set("arc_challenge", "test", n, 0, data_dir, workdir / "frozen")
    path = workdir / "replay.jsonl"
    path.write_text("".join(json.dumps({"question_id": q.question_id, "condition": c, "response": "ABCD"[i % 4]}) + "\n"
                            for i, q in enumerate(frozen.questions) for c in CONDITIONS))
    return path


def breaking_store(after: int, breaker: Callable[[CompletionStore], Any]) -> type[CompletionStore]:
    """The run's store class (``prism.run.store.open_store`` makes it), broken by ``breaker`` before write N+1."""

    class BreakingStore(CompletionStore):
        puts = 0

        def put(self, key: str, **fields: Any) -> None:
            if self.puts == after:
                breaker(self)
            self.puts += 1
            super().put(key, **fields)

    return BreakingStore


@pytest.mark.parametrize("fault", ["log-enospc", "log-erofs", "store-full", "store-readonly"])
def test_a_run_stopped_by_a_failed_write_keeps_everything_and_the_same_command_finishes(
        workdir: Path, data_dir: Path, mlflow_template: Path, monkeypatch: pytest.MonkeyPatch, fault: str,
        record_property: Callable[[str, object], None]) -> None:
    import prism.run.store

    n, after = 3, 6
    fresh_mlflow(mlflow_template, workdir)
    replay = replay_file(workdir, data_dir, n)
    overrides = [*run_overrides(workdir, data_dir), "model=replay", f"model.path={replay}", "model.name=scripted",
                 f"dataset.n={n}"]
    disk = None
    if fault.startswith("log"):
        code = errno.ENOSPC if fault == "log-enospc" else errno.EROFS
        disk = DiskFault(after=after, code=code, partial=code == errno.ENOSPC).install(monkeypatch.setattr)
    else:
        breaker = ((lambda s: setattr(s, "_db", _FullDisk(s._db))) if fault == "store-full"
                   else (lambda s: s._db.execute("PRAGMA query_only = ON")))  # SQLite's own read-only refusal
        monkeypatch.setattr(prism.run.store, "CompletionStore", breaking_store(after, breaker))  # open_store's
    with pytest.raises(StoreError, match="run the same command again"):
        run(compose_config(overrides), output_dir=workdir / "first")
    monkeypatch.undo()

    (failed,) = mlflow_runs(f"sqlite:///{workdir}/mlflow.db")
    assert failed.info.status == "FAILED"
    logged = list(read_jsonl(workdir / "first/responses/responses.jsonl"))
    assert len(logged) == after  # whole records only
    # The store is written first: a completion whose log line failed is stored all the same.
    stored = stored_prompts(workdir / "store.sqlite")
    assert len(stored) == (after + 1 if fault.startswith("log") else after)
    assert set(stored.values()) == {1}

    resumed = run(compose_config(overrides), output_dir=workdir / "second")
    assert (resumed.n_cached, resumed.n_fresh) == (len(stored), 5 * n - len(stored))
    final = list(read_jsonl(workdir / "second/responses/responses.jsonl"))
    assert sorted(cell(r) for r in final) == sorted({cell(r) for r in final}) and len(final) == 5 * n
    expected = {(r["question_id"], r["condition"], 0): r["response"] for r in map(json.loads, replay.open())}
    assert {cell(r): r["response"] for r in final} == expected
    assert all(r["response"] == by["response"] for r in logged for by in final if cell(by) == cell(r))
    record_property("injected", disk.injected if disk else 1)
    record_property("lost", 0)


def test_a_full_disk_at_the_cli_is_one_paragraph_and_the_same_command_resumes(
        workdir: Path, data_dir: Path, mlflow_template: Path, record_property: Callable[[str, object], None]) -> None:
    n, after = 3, 6
    fresh_mlflow(mlflow_template, workdir)
    replay = replay_file(workdir, data_dir, n)
    args = [*run_overrides(workdir, data_dir), "model=replay", f"model.path={replay}", "model.name=scripted",
            f"dataset.n={n}"]
    failed = cli(workdir, *args, f"hydra.run.dir={workdir}/first", bootstrap=[str(after), str(errno.ENOSPC)])
    assert failed.returncode == 1
    (line,) = [line for line in failed.stderr.splitlines() if line.startswith("prism: error:")]
    assert line.startswith("prism: error: could not write a raw response")
    assert "No space left on device" in line and "run the same command again" in line
    assert "Traceback" not in failed.stderr and "OSError" not in failed.stderr, failed.stderr[-3000:]
    assert len(list(read_jsonl(workdir / "first/responses/responses.jsonl"))) == after
    (failed_run,) = mlflow_runs(f"sqlite:///{workdir}/mlflow.db")
    assert failed_run.info.status == "FAILED"
    # The same command, in-process (the CLI's own output is what the first run checked).
    resumed = run(compose_config(args), output_dir=workdir / "second")
    assert (resumed.n_cached, resumed.n_fresh) == (after + 1, 5 * n - after - 1)
    record_property("injected", 1)
    record_property("lost", 0)


# -- Damaged store and frozen files: detected, reported, never used or rebuilt ----------------------------


def _filled_store(path: Path, rows: int = 300) -> None:
    store = CompletionStore(path)
    for i in range(rows):
        store.put(f"k{i}", backend="b", digest="d", prompt_sha256="p", generation={}, repetition=0,
                  record={"response": f"answer {i:04d} " + "x" * 200}, run_id="r", created_at="t")
    store.close()  # checkpoints the WAL into the file


def _truncate_mid_page(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.truncate(path.stat().st_size - 4096 - 1000)


def _flip_byte_in_a_record(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[data.find(b"answer 0150") + 8] ^= 0x01  # "0150" -> "0140": valid text, wrong evidence
    path.write_bytes(bytes(data))


def _garble_a_page(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[8192:8192 + 64] = b"\xa5" * 64  # page 3 of ~28: its header, then cells
    path.write_bytes(bytes(data))


def _truncate_header(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.truncate(50)


@pytest.fixture(scope="module")
def filled_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("filled") / "store.sqlite"
    _filled_store(path)
    return path


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (_truncate_mid_page, "failed its integrity check|cannot be opened"),
        (_flip_byte_in_a_record, "does not match its checksum"),
        (_garble_a_page, "failed its integrity check|cannot be opened|cannot read"),
        (_truncate_header, "cannot be opened"),
    ],
    ids=["truncated-mid-page", "one-byte-in-a-record", "garbled-page", "truncated-header"],
)
def test_a_damaged_store_is_reported_and_left_as_it_is(tmp_path: Path, filled_store: Path, damage,
                                                       message: str) -> None:
    path = tmp_path / "store.sqlite"
    path.write_bytes(filled_store.read_bytes())
    damage(path)
    before = path.read_bytes()
    with pytest.raises(StoreError, match=message) as info:
        store = CompletionStore(path)
        for i in range(300):
            store.get(f"k{i}")
    assert "\n" not in str(info.value) and "store.path=NEW" in str(info.value)
    assert path.read_bytes() == before  # never repaired, rebuilt or emptied behind the person's back


def test_damaged_store_and_frozen_files_stop_the_cli_with_one_paragraph(workdir: Path, data_dir: Path,
                                                                        mlflow_template: Path) -> None:
    fresh_mlflow(mlflow_template, workdir)
    replay = replay_file(workdir, data_dir, 2)
    args = [*run_overrides(workdir, data_dir), "model=replay", f"model.path={replay}", "dataset.n=2"]
    (workdir / "store.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x5a" * 4000)
    broken = cli(workdir, *args, f"hydra.run.dir={workdir}/one")
    assert broken.returncode == 1 and "prism: error: the completion store" in broken.stderr
    assert "Traceback" not in broken.stderr, broken.stderr[-3000:]

    (workdir / "store.sqlite").unlink()
    frozen = next((workdir / "frozen").glob("*-n2-seed0-*.jsonl"))
    data = bytearray(frozen.read_bytes())
    data[data.index(b'"question":"') + 12] ^= 0x20  # one letter of one stem changes case
    frozen.write_bytes(bytes(data))
    edited = cli(workdir, *args, f"hydra.run.dir={workdir}/two")
    assert edited.returncode == 1 and f"prism: error: frozen file {frozen} has sha256" in edited.stderr
    assert "Traceback" not in edited.stderr
    assert frozen.read_bytes() == bytes(data)  # reported, not rebuilt
    assert not (workdir / "two/responses").exists()  # stopped before any inference
