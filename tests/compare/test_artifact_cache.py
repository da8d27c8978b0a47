"""Cells read from ``results/cells.parquet`` or, for runs logged before it, ``scored.jsonl``; the artifact cache.

Two replay runs of 10 questions are logged by today's code (so each has ``cells.parquet``); a comparison of
them must write the same tables whether it reads the Parquet cells, the JSON records of a run that lacks
the Parquet file (as every run logged before it does), or the cache of an earlier comparison.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from conftest import compose, compose_config, run_overrides

from prism.compare.artifact_cache import ArtifactCache
from prism.compare.core import compare
from prism.config import CompareConfig, to_schema
from prism.names import CELLS_ARTIFACT, SCORED_ARTIFACT, LoggedRun
from prism.questions import freeze_question_set
from prism.run.pipeline import run

N = 10


def artifact_dir(uri: str, run_id: str) -> Path:
    import mlflow

    return Path(unquote(urlparse(mlflow.tracking.MlflowClient(uri).get_run(run_id).info.artifact_uri).path))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> tuple[Path, str, list[str]]:
    root = tmp_path_factory.mktemp("cells")
    frozen = freeze_question_set("arc_challenge", "test", N, 0, data_dir, root / "frozen")
    ids = []
    for name in ("alpha", "beta"):
        rng = random.Random(name)
        lines: list[dict[str, Any]] = []
        for condition in ("P0", "P1", "P2", "P3", "P4"):
            for q in frozen.questions:
                if rng.random() < 0.05:
                    lines.append({"question_id": q.question_id, "condition": condition, "error": "timeout"})
                else:
                    lines.append({"question_id": q.question_id, "condition": condition,
                                  "response": rng.choice([*q.labels, "no idea"])})
        path = root / f"{name}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        cfg = compose_config([*run_overrides(root, data_dir), "model=replay", f"model.path={path}",
                              f"model.name={name}", f"dataset.n={N}"])
        ids.append(run(cfg, output_dir=root / f"run-{name}").run_id)
    return root, f"sqlite:///{root}/mlflow.db", ids


def tables(root: Path, uri: str, ids: list[str], name: str, cache: Path | None, *extra: str) -> dict[str, str]:
    cfg = to_schema(compose("compare", [f"tracking.uri={uri}", f"runs=[{','.join(ids)}]", "bootstrap=200",
                                        "permutations=200", "power_simulations=50",
                                        f"artifact_cache={cache if cache else 'null'}", *extra]), CompareConfig)
    out = compare(cfg, output_dir=root / name).output_dir / "comparison"
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(out.glob("*.csv"))}


def test_parquet_json_and_cache_give_the_same_tables(runs: tuple[Path, str, list[str]],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    root, uri, ids = runs
    for run_id in ids:
        assert (artifact_dir(uri, run_id) / CELLS_ARTIFACT).is_file(), "today's runs log cells.parquet"
    cache = root / "cache"
    from_parquet = tables(root, uri, ids, "parquet", cache)
    # The cache holds what was read: each run's cells, prompts and config.
    for run_id in ids:
        assert (cache / run_id / CELLS_ARTIFACT).is_file()
        assert not (cache / run_id / SCORED_ARTIFACT).exists(), "the Parquet cells were read, not the JSON"
    # A run logged before cells.parquet existed: its JSON records are read instead.
    older = artifact_dir(uri, ids[1]) / CELLS_ARTIFACT
    kept = root / "kept.parquet"
    shutil.move(older, kept)
    try:
        from_json = tables(root, uri, ids, "json", None)
    finally:
        shutil.move(kept, older)
    assert from_json == from_parquet
    # The cache answers without the store's artifacts: move them away, compare again.
    moved = {run_id: root / f"moved-{run_id}" for run_id in ids}
    for run_id, where in moved.items():
        shutil.move(artifact_dir(uri, run_id), where)
    try:
        from_cache = tables(root, uri, ids, "cached", cache, "timings=true")
    finally:
        for run_id, where in moved.items():
            shutil.move(where, artifact_dir(uri, run_id))
    assert from_cache == from_parquet
    # timings=true prints each stage's wall time.
    printed = capsys.readouterr().out
    assert "compare stages (wall seconds):" in printed
    for stage in ("read runs' cells", "tables", "write CSV", "figures", "report page", "total"):
        assert f"  {stage}" in printed, printed


def test_an_unfinished_run_is_never_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import prism.compare.artifact_cache as artifact_cache

    def fake_download(run_id: str, artifact_path: str, uri: str | None, dst: Path,
                      artifact_uri: str | None = None) -> Path:
        dst.mkdir(parents=True, exist_ok=True)
        (dst / "f").write_text(run_id, encoding="utf-8")
        return dst / "f"

    monkeypatch.setattr(artifact_cache, "download", fake_download)
    cache = ArtifactCache(tmp_path / "cache")
    running = LoggedRun("r1", "RUNNING", 0, {}, {})
    assert cache.fetch(running, "results/x", None, tmp_path / "dst") == tmp_path / "dst" / "f"
    assert not (tmp_path / "cache").exists()
    finished = LoggedRun("r2", "FINISHED", 0, {}, {})
    got = cache.fetch(finished, "results/x", None, tmp_path / "dst2")
    assert got == tmp_path / "cache" / "r2" / "results" / "x" and got.read_text(encoding="utf-8") == "r2"
    assert [p.name for p in (tmp_path / "cache" / "r2" / "results").iterdir()] == ["x"], "no staging left behind"
