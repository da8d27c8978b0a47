"""The run path at scale: cells made on demand, the store read in batches, records read back in scored order.

The scale checks of ``python -m benchmarks --only run_scale`` at a few thousand cells: a run and its rerun
give the same scored records byte for byte (apart from ``cached``), and a run killed (SIGKILL) at half its
cells and resumed loses nothing and asks only for the cells the store lacked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import compose_config, run_overrides

from benchmarks.run_scale import compare_records
from prism.conditions import condition_set_from_config, render_all
from prism.questions import freeze_question_set
from prism.records import CellKey
from prism.run.cells import CellGrid, RecordOffsets, records_in_scored_order, reuse_stored
from prism.run.inference import make_cells
from prism.run.pipeline import build_requests, repetition_params, run
from prism.run.store import CompletionStore, ResponseLog
from prism.types import ModelIdentity

IDENTITY = ModelIdentity("m", "replay", "d" * 64, {})


def _grid(data_dir: Path, tmp_path: Path, n: int = 3, repetitions: int = 2) -> tuple[CellGrid, list]:
    cfg = compose_config([f"dataset.n={n}", f"generation.repetitions={repetitions}", f"dataset.data_dir={data_dir}",
                          f"dataset.cache_dir={tmp_path / 'frozen'}"])
    frozen = freeze_question_set("arc_challenge", "test", n, 0, data_dir, tmp_path / "frozen")
    condition_set = condition_set_from_config(cfg.conditions)
    grid = CellGrid(render_all(frozen.questions, condition_set), repetition_params(cfg.generation),
                    [q.question_id for q in frozen.questions], condition_set.names, IDENTITY, "arc_challenge", "test",
                    {"n_ctx": 4096})
    expected = make_cells(build_requests(frozen, condition_set, cfg.generation), IDENTITY, "arc_challenge", "test",
                          {"n_ctx": 4096})
    return grid, expected


def test_the_grid_makes_the_same_cells_and_keys_as_the_list_in_the_same_order(data_dir: Path, tmp_path: Path) -> None:
    grid, expected = _grid(data_dir, tmp_path)
    assert len(grid) == len(expected) == 3 * 5 * 2
    assert list(grid) == expected
    assert [grid.index(c.request.cell) for c in expected] == list(range(len(expected)))


def test_scored_order_is_condition_then_question_then_repetition(data_dir: Path, tmp_path: Path) -> None:
    grid, expected = _grid(data_dir, tmp_path)
    order = {name: i for i, name in enumerate(grid.conditions)}
    position = {q: i for i, q in enumerate(grid.question_ids)}
    want = sorted(range(len(expected)), key=lambda i: (order[expected[i].request.prompt.condition],
                                                       position[expected[i].request.prompt.question_id],
                                                       expected[i].request.repetition))
    assert list(grid.scored_order()) == want


def test_a_grid_refuses_prompts_out_of_condition_major_order(data_dir: Path, tmp_path: Path) -> None:
    grid, _ = _grid(data_dir, tmp_path)
    with pytest.raises(ValueError, match="condition-major"):
        CellGrid(list(reversed(grid.prompts)), grid.params, grid.question_ids, grid.conditions, IDENTITY, "a", "t")


def test_reuse_logs_the_stored_cells_and_returns_only_the_missing_ones(data_dir: Path, tmp_path: Path) -> None:
    grid, _ = _grid(data_dir, tmp_path)
    store = CompletionStore(tmp_path / "store.sqlite")
    stored = [0, 7, len(grid) - 1]
    for index in stored:
        cell = grid.cell(index)
        store.put(cell.key, backend="replay", digest="d" * 64, prompt_sha256=cell.request.prompt.sha256,
                  generation=cell.request.params.canonical(), repetition=cell.request.repetition,
                  record={"response": f"A{index}", "timestamp": "t"}, run_id=f"run{index}", created_at="t")
    log = ResponseLog(tmp_path / "responses.jsonl")
    offsets = RecordOffsets(len(grid))
    producers: set[str] = set()
    missing = reuse_stored(grid, store, log, offsets, producers.add)
    log.close()
    store.close()
    assert list(missing) == [i for i in range(len(grid)) if i not in stored]
    assert producers == {f"run{i}" for i in stored}
    back = list(records_in_scored_order(tmp_path / "responses.jsonl", grid, offsets))
    assert sorted(r.response for r in back) == sorted(f"A{i}" for i in stored)
    assert all(r.cached for r in back)
    assert [grid.index(r.cell) for r in back] == [i for i in grid.scored_order() if i in stored]


def _replay_file(path: Path, data_dir: Path, tmp_path: Path, n: int, repetitions: int) -> int:
    from benchmarks.run_scale import condition_set, write_replay

    frozen = freeze_question_set("arc_challenge", "test", n, 0, data_dir, tmp_path / "frozen")
    return write_replay(path, list(frozen.questions), condition_set(), repetitions)


def test_a_run_and_its_rerun_give_the_same_scored_records_and_tables(data_dir: Path, workdir: Path) -> None:
    replay = workdir / "replay.jsonl"
    cells = _replay_file(replay, data_dir, workdir, 40, 3)
    overrides = [*run_overrides(workdir, data_dir), "model=replay", f"model.path={replay}", "dataset.n=40",
                 "conditions=robustness", "generation.repetitions=3", "store.sync_interval_s=1"]
    first = run(compose_config(overrides), output_dir=workdir / "first")
    rerun = run(compose_config(overrides), output_dir=workdir / "rerun")
    assert (first.n_fresh, rerun.n_cached) == (cells, cells) == (40 * 21 * 3, 40 * 21 * 3)
    a = (workdir / "first/results/scored.jsonl").read_bytes().splitlines()
    identical, shared, other = compare_records(workdir / "first/results/scored.jsonl",
                                               workdir / "rerun/results/scored.jsonl", ("cached",))
    # Only cells whose conditions render one prompt (sharing its stored completion) may differ, in timing only.
    assert (other, identical + shared) == (0, cells) and identical > cells * 0.9
    for table in sorted((workdir / "first/results").glob("*.csv")):
        assert table.read_bytes() == (workdir / "rerun/results" / table.name).read_bytes(), table.name
    assert first.metrics == rerun.metrics
    # Every cell's raw record appears once in the response log, in scored order when read back.
    responses = [json.loads(line) for line in (workdir / "rerun/responses/responses.jsonl").read_text().splitlines()]
    assert sorted(CellKey.of(r) for r in responses) == sorted(CellKey.of(json.loads(line)) for line in a)


def test_a_run_killed_at_half_its_cells_resumes_asking_only_what_the_store_lacks(data_dir: Path,
                                                                                 workdir: Path) -> None:
    """The benchmark's own check (``benchmarks.run_scale.measure``) at 4,200 cells: it raises on any failure."""
    from benchmarks.common import Context
    from benchmarks.run_scale import condition_set, measure

    ctx = Context(workdir=workdir, data_dir=data_dir, quick=True)
    figures = measure(ctx, 100, 2, condition_set(), kill=True, default_sync=False)
    cells = 100 * 21 * 2
    assert figures["cells"] == cells
    assert cells // 2 <= figures["kill_stored"] < cells
    assert figures["kill_logged"] <= figures["kill_stored"]  # store first, then log: every logged cell is stored
    assert figures["resume_asked"] == cells - figures["kill_stored"]
    assert not list(workdir.glob("run_scale-*")), "the benchmark removes what it wrote"


def test_compare_records_accepts_only_the_timing_of_a_shared_prompt(tmp_path: Path) -> None:
    def write(path: Path, records: list[dict]) -> Path:
        path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
        return path

    base = {"prompt_sha256": "p", "repetition": 0, "cached": False, "timestamp": "t1", "latency_s": 0.1, "answer": "A"}
    first = [base, {**base, "prompt_sha256": "p", "condition": "shuffle"}, {**base, "prompt_sha256": "q"}]
    a = write(tmp_path / "a.jsonl", first)
    served = [{**r, "cached": True} for r in first]
    served[1] = {**served[1], "timestamp": "t0"}  # the shared prompt's first-asked completion
    assert compare_records(a, write(tmp_path / "b.jsonl", served), ("cached",)) == (2, 1, 0)
    served[2] = {**served[2], "timestamp": "t0"}  # a prompt of its own: its timing must not change
    assert compare_records(a, write(tmp_path / "c.jsonl", served), ("cached",)) == (1, 1, 1)
    served[0] = {**served[0], "answer": "B"}
    assert compare_records(a, write(tmp_path / "d.jsonl", served), ("cached",))[2] == 2
    assert compare_records(a, write(tmp_path / "e.jsonl", served[:2]), ("cached",))[2] >= 1
