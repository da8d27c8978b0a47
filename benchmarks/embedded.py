"""Set-up shared by the benchmarks that run the embedded model: the prompts, the model file, a warm store.

Nothing here is timed. ``prepare`` freezes the question set, writes the requests PRISM will send (so the
baseline script sends byte-identical ones), migrates an MLflow store and runs PRISM once on one question,
which also warms the operating system's file cache for the GGUF file and every module, so neither side of
a comparison pays a cold start the other does not.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import REPO, Context, Timed, run_timed
from benchmarks.prompts import compose, write_requests

RAW_SCRIPT = REPO / "benchmarks" / "raw_llamacpp.py"


@dataclass(frozen=True)
class Embedded:
    """The prepared inputs of one embedded-model benchmark."""

    workdir: Path
    overrides: list[str]
    model_path: Path
    n_ctx: int
    n_threads: int
    n_prompts: int

    def requests_file(self, order: str) -> Path:
        """The requests in ``order`` (``condition`` or ``question``), written once."""
        path = self.workdir / f"requests-{order}-major.jsonl"
        if not path.exists():
            write_requests(self.overrides, path, order)
        return path

    def prism(self, name: str, *extra: str) -> Timed:
        """Run ``python -m prism`` with the benchmark's overrides, its output in ``runs/<name>``."""
        args = [sys.executable, "-m", "prism", *self.overrides, f"hydra.run.dir={self.workdir / 'runs' / name}",
                *extra]
        return run_timed(args, cwd=self.workdir)

    def raw(self, order: str, name: str) -> Timed:
        """Run the minimal llama.cpp script over the requests in ``order``."""
        args = [sys.executable, str(RAW_SCRIPT), str(self.model_path), str(self.requests_file(order)),
                str(self.workdir / f"{name}.jsonl"), "--n-ctx", str(self.n_ctx), "--n-threads", str(self.n_threads)]
        return run_timed(args, cwd=self.workdir)


def bench_overrides(ctx: Context, name: str, n_questions: int, store: bool) -> list[str]:
    """The default experiment on ``n_questions``, every file it writes in ``ctx.workdir / name`` (made here)."""
    workdir = ctx.workdir / name
    workdir.mkdir(parents=True, exist_ok=True)
    return [
        f"dataset.n={n_questions}",
        f"dataset.data_dir={ctx.data_dir}",
        f"dataset.cache_dir={workdir / 'frozen'}",
        f"tracking.uri=sqlite:///{workdir / 'mlflow.db'}",
        f"tracking.experiment=benchmark-{name}",
        f"store.enabled={str(store).lower()}",
        f"store.path={workdir / 'store.sqlite'}",
    ]


def prepare(ctx: Context, name: str, n_questions: int, store: bool) -> Embedded:
    """Freeze the questions, write the requests, warm MLflow and the model file; return the inputs."""
    from prism.backends.llamacpp import LlamaCppModelConfig, resolve_model_path

    workdir = ctx.workdir / name
    overrides = bench_overrides(ctx, name, n_questions, store)
    cfg = compose(overrides)
    model = cfg.model
    assert isinstance(model, LlamaCppModelConfig), "the embedded benchmark runs a llama.cpp model"
    prepared = Embedded(
        workdir=workdir, overrides=overrides, model_path=resolve_model_path(model),
        n_ctx=model.n_ctx,
        n_threads=model.n_threads or os.cpu_count() or 1,  # what LlamaCppBackend passes
        n_prompts=write_requests(overrides, workdir / "requests-condition-major.jsonl", "condition"),
    )
    # Warm-up on one question with the store off: migrates mlflow.db, caches the GGUF digest, reads the
    # model file and every module once.
    prepared.prism("warmup", "dataset.n=1", "store.enabled=false", f"dataset.cache_dir={workdir / 'frozen-warmup'}")
    return prepared


def read_responses(path: Path) -> dict[tuple[str, str], str]:
    """``(question_id, condition) -> response`` from a raw script's output or a run's responses.jsonl."""
    with path.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return {(row["question_id"], row["condition"]): row["response"] for row in rows}


def run_responses(workdir: Path, name: str) -> dict[tuple[str, str], str]:
    """The responses a PRISM run in ``runs/<name>`` recorded."""
    return read_responses(workdir / "runs" / name / "responses" / "responses.jsonl")


def agreement(a: dict[tuple[str, str], str], b: dict[tuple[str, str], str]) -> str:
    """``identical: 500/500`` style text; a benchmark whose sides answered differently says so."""
    same = sum(1 for key, text in a.items() if b.get(key) == text)
    return f"{same}/{len(a)}" + ("" if len(a) == len(b) else f" (sides have {len(a)} and {len(b)} cells)")
