from __future__ import annotations

import json
import multiprocessing
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from prism.run.store import CompletionStore, ResponseLog, StoreError, read_jsonl, store_key

GEN = {"temperature": 0.0, "max_tokens": 48, "seed": 0, "top_p": None, "top_k": None}


def put(store: CompletionStore, key: str, response: str = "B") -> None:
    store.put(key, backend="llamacpp", digest="d", prompt_sha256="p", generation=GEN, repetition=0,
              record={"response": response}, run_id="run1", created_at="2026-01-01T00:00:00Z")


def test_key_depends_on_every_per_request_value_and_nothing_else() -> None:
    base = store_key("llamacpp", "d", "p", GEN, 0)
    assert base == store_key("llamacpp", "d", "p", dict(reversed(list(GEN.items()))), 0)  # order-free
    variants = [
        store_key("ollama", "d", "p", GEN, 0),
        store_key("llamacpp", "e", "p", GEN, 0),
        store_key("llamacpp", "d", "q", GEN, 0),
        store_key("llamacpp", "d", "p", {**GEN, "temperature": 0.7}, 0),
        store_key("llamacpp", "d", "p", GEN, 1),
    ]
    assert len({base, *variants}) == 6


def test_put_get_roundtrip_and_first_answer_wins(tmp_path: Path) -> None:
    store = CompletionStore(tmp_path / "s.sqlite")
    put(store, "k1", "B")
    put(store, "k1", "C")  # a second writer of the same cell never overwrites evidence
    assert store.get("k1") == {"response": "B"}
    assert store.get("missing") is None
    assert store.producers(["k1", "missing"]) == {"k1": "run1"}
    store.close()
    assert CompletionStore(tmp_path / "s.sqlite").get("k1") == {"response": "B"}


def test_tampered_record_is_detected_by_its_checksum(tmp_path: Path) -> None:
    store = CompletionStore(tmp_path / "s.sqlite")
    put(store, "k1")
    store.close()
    db = sqlite3.connect(tmp_path / "s.sqlite")
    db.execute("UPDATE completions SET record = ? WHERE key = 'k1'", (json.dumps({"response": "D"}),))
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="does not match its checksum"):
        CompletionStore(tmp_path / "s.sqlite").get("k1")


def test_a_file_that_is_not_a_store_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "s.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot be opened"):
        CompletionStore(bad)


def test_response_log_appends_and_reader_skips_a_torn_last_line(tmp_path: Path) -> None:
    log = ResponseLog(tmp_path / "r" / "responses.jsonl")
    log.append({"a": 1})
    log.append({"a": 2})
    log.close()
    with (tmp_path / "r" / "responses.jsonl").open("a") as handle:
        handle.write('{"a": 3, "resp')  # a kill in the middle of a write
    assert [r["a"] for r in read_jsonl(tmp_path / "r" / "responses.jsonl")] == [1, 2]


def test_reader_names_file_and_line_of_a_corrupt_record(tmp_path: Path) -> None:
    path = tmp_path / "responses.jsonl"
    path.write_text('{"a": 1}\nnot json\n{"a": 2}\n')
    with pytest.raises(StoreError, match=r"responses.jsonl:2"):
        list(read_jsonl(path))


def _open_and_put(path: str, worker: int, barrier: Any) -> None:
    barrier.wait()  # every process opens the new store at the same moment, as a parallel sweep's jobs do
    store = CompletionStore(path)  # an error here ends the process with exit code 1 and its traceback
    for i in range(5):
        put(store, f"k{i}", response=str(worker))
    store.close()


def test_parallel_jobs_can_all_open_one_new_store_at_once(tmp_path: Path) -> None:
    # Switching a new file to WAL fails at once with "database is locked" (no busy wait) for a process
    # that races another doing the same; before the retry, most runs of this test lost a job in some round.
    context = multiprocessing.get_context("fork")
    for round_ in range(40):
        path = str(tmp_path / f"s{round_}.sqlite")
        barrier = context.Barrier(6)
        workers = [context.Process(target=_open_and_put, args=(path, w, barrier)) for w in range(6)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=120)
        assert [w.exitcode for w in workers] == [0] * 6, f"round {round_}"
        store = CompletionStore(path)
        assert store.get("k0") is not None and len(store.producers([f"k{i}" for i in range(5)])) == 5
        store.close()


def test_backend_settings_enter_the_key_only_when_given() -> None:
    # The key the code gave before settings were keyed, pinned: stores written then keep serving every cell.
    assert store_key("llamacpp", "d", "p", GEN, 0) == store_key("llamacpp", "d", "p", GEN, 0, {}) == (
        "32f8333e315f733cac21b9a50aa15964b14a85b427e19230623ff0f3e1f5a2bf")
    assert store_key("llamacpp", "d", "p", GEN, 0, {"n_ctx": 4096}) != store_key("llamacpp", "d", "p", GEN, 0)
    assert store_key("llamacpp", "d", "p", GEN, 0, {"n_ctx": 4096}) != store_key("llamacpp", "d", "p", GEN, 0,
                                                                                  {"n_ctx": 8192})


def test_get_many_reads_a_batch_with_its_producers_and_checks_every_checksum(tmp_path: Path) -> None:
    store = CompletionStore(tmp_path / "s.sqlite")
    for i in range(1200):  # more than one query's worth of keys
        put(store, f"k{i}", f"R{i}")
    keys = [f"k{i}" for i in range(0, 1300, 3)]
    found = store.get_many(keys)
    assert found == {k: ({"response": f"R{k[1:]}"}, "run1") for k in keys if int(k[1:]) < 1200}
    store.close()
    db = sqlite3.connect(tmp_path / "s.sqlite")
    db.execute("UPDATE completions SET record = ? WHERE key = 'k3'", (json.dumps({"response": "D"}),))
    db.commit()
    db.close()
    with pytest.raises(StoreError, match=r"k3 .* does not match its checksum"):
        CompletionStore(tmp_path / "s.sqlite").get_many(["k0", "k3"])


def _counting_fsync(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    import os

    calls: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def test_response_log_fsyncs_each_record_by_default_and_by_interval_when_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting_fsync(monkeypatch)
    log = ResponseLog(tmp_path / "each.jsonl")
    offsets = [log.append({"a": i}) for i in range(3)]
    assert len(calls) == 3 and offsets == [0, 9, 18] and log.last_offset == 18
    log.append({"a": 3}, durable=False)  # already durable elsewhere: no fsync of its own
    assert len(calls) == 3
    log.close()  # ... until the log is closed
    assert len(calls) == 4
    calls.clear()
    log = ResponseLog(tmp_path / "interval.jsonl", sync_interval_s=3600)
    for i in range(100):
        log.append({"a": i})
    assert calls == []  # every record reached the OS (a killed process loses none) ...
    assert [r["a"] for r in read_jsonl(tmp_path / "interval.jsonl")] == list(range(100))
    log.close()
    assert len(calls) == 1  # ... and all are on disk at close


def test_a_store_with_a_sync_interval_keeps_every_commit_for_the_next_process(tmp_path: Path) -> None:
    store = CompletionStore(tmp_path / "s.sqlite", sync_interval_s=3600)
    for i in range(50):
        put(store, f"k{i}", f"R{i}")
    # Another connection (a resumed run after a kill) sees every committed completion at once.
    other = CompletionStore(tmp_path / "s.sqlite")
    assert other.get("k49") == {"response": "R49"}
    other.close()
    store.close()
    with sqlite3.connect(tmp_path / "s.sqlite") as db:
        assert db.execute("SELECT count(*) FROM completions").fetchone() == (50,)


def test_present_names_the_held_keys_without_reading_their_records(tmp_path: Path) -> None:
    store = CompletionStore(tmp_path / "s.sqlite")
    keys = [f"k{i}" for i in range(1203)]  # more than one batch of 500
    for key in keys[::2]:
        put(store, key, key)
    assert store.present([*keys, "absent"]) == set(keys[::2])
    assert store.present([]) == set()
