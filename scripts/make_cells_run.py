"""Make ``tests/data/cells_run``: a run's results as today's code logs them, ``cells.parquet`` beside ``scored.jsonl``.

A replay run of 12 ARC-Challenge fixture questions x the ``prism`` condition set (P0-P4), two repetitions,
with failed requests, unrecoverable responses and every answer form, tracking off; its ``results/`` and
``config/resolved.yaml`` are copied into the fixture. ``tests/results/test_cells_file.py`` and the compare
tests read it. Run from the repository root: ``PYTHONPATH=$PWD python scripts/make_cells_run.py``.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "data" / "cells_run"
N = 12


def main() -> None:
    """Make the run and copy its results into the fixture."""
    from prism.questions import freeze_question_set

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        frozen = freeze_question_set("arc_challenge", "test", N, 0, REPO / "tests" / "data", work / "frozen")
        rng = random.Random(38)
        lines = []
        for condition in ("P0", "P1", "P2", "P3", "P4"):
            for repetition in (0, 1):
                for q in frozen.questions:
                    line: dict[str, object] = {"question_id": q.question_id, "condition": condition,
                                               "repetition": repetition}
                    draw = rng.random()
                    if draw < 0.05:
                        line["error"] = "scripted timeout"
                    elif draw < 0.15:
                        line["response"] = "I cannot tell."
                    else:
                        label = q.answer if rng.random() < 0.7 else rng.choice(q.labels)
                        line["response"] = rng.choice([label, f"The answer is {label}.", f"({label})"])
                    lines.append(line)
        replay = work / "replay.jsonl"
        replay.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        subprocess.run([sys.executable, "-m", "prism", "model=replay", f"model.path={replay}", "model.name=cells",
                        f"dataset.n={N}", "generation.repetitions=2", f"tracking.uri=sqlite:///{work / 'mlflow.db'}",
                        "store.enabled=false", f"dataset.data_dir={REPO / 'tests' / 'data'}",
                        f"dataset.cache_dir={work / 'frozen'}", f"hydra.run.dir={work / 'hydra'}"],
                       check=True, cwd=work)
        (out,) = {p.parent.parent for p in work.rglob("scored.jsonl") if "artifacts" not in str(p)}
        shutil.rmtree(OUT, ignore_errors=True)
        (OUT / "results").mkdir(parents=True)
        (OUT / "config").mkdir()
        for name in ("scored.jsonl", "cells.parquet"):
            shutil.copy(out / "results" / name, OUT / "results" / name)
        shutil.copy(out / "config" / "resolved.yaml", OUT / "config" / "resolved.yaml")


if __name__ == "__main__":
    main()
