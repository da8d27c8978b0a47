"""A larger log made by the fixtures' own commands, imported: agreement of each tool's extraction with PRISM's.

``scripts/make_import_fixtures.py`` runs lm-eval (the generative ARC task) and inspect_ai against SmolLM2 served
by ``llama_cpp.server`` on the first ``n`` questions of ARC-Challenge test (the full split from
``--data-dir``), then each log is imported with ``prism.importer`` into a scratch MLflow store. The tools
come from their own virtual environment, ``PRISM_IMPORT_VENV`` (default ``/work/venv-import``; see
tests/data/imports/README.md). Reported per tool: the share of responses of each verdict, the tool's
accuracy as it scored its own extraction, PRISM's accuracy on the same responses, and the import's wall time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import Context, Section

REPO = Path(__file__).resolve().parent.parent
N_FULL = 200
N_QUICK = 5
LOGS = {"lm_eval": ("lm_eval_gen", "samples_arc_local_gen.jsonl"), "inspect": ("inspect", "inspect_arc.eval")}


def _import(fmt: str, path: Path, uri: str, out: Path) -> tuple[dict[str, float], float]:
    """Import one log; its metrics and the import's wall seconds."""
    from hydra import compose, initialize_config_dir

    from prism.conf import register_configs
    from prism.config import ImportConfig, to_schema
    from prism.importer.run import import_log

    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "prism" / "conf"), version_base="1.3"):
        cfg = to_schema(compose("import", [f"tracking.uri={uri}", f"format={fmt}", f"path={path}",
                                           "dataset.name=arc_challenge", "model.name=smollm2"]), ImportConfig)
    started = time.perf_counter()
    result = import_log(cfg, out)
    return result.imported.metrics, time.perf_counter() - started


def run(ctx: Context) -> Section:
    """Make the logs at ``n`` questions, import each, report the agreement."""
    n = N_QUICK if ctx.quick else N_FULL
    venv = Path(os.environ.get("PRISM_IMPORT_VENV", "/work/venv-import"))
    logs = ctx.workdir / "import-logs"
    steps = [step for fmt, (step, _) in LOGS.items() if fmt == "lm_eval" or _has_inspect()]
    command = [sys.executable, str(REPO / "scripts" / "make_import_fixtures.py"), "--venv", str(venv), "--n", str(n),
               "--data", str(ctx.data_dir / "arc_challenge" / "test.jsonl"), "--out", str(logs)]
    for step in steps:
        command += ["--only", step]
    started = time.perf_counter()
    subprocess.run(command, check=True)
    made = time.perf_counter() - started
    uri = f"sqlite:///{ctx.workdir / 'import-mlflow.db'}"
    section = Section(title="Importing other tools' logs (issue 41)",
                      command="python -m benchmarks --only import_logs")
    rows = []
    for fmt, (step, name) in LOGS.items():
        if step not in steps:
            continue
        metrics, seconds = _import(fmt, logs / name, uri, ctx.workdir / f"import-{fmt}")
        get = {k.split("/", 1)[1]: v for k, v in metrics.items() if k.startswith("import_agreement/")}
        section.figures.update({f"{fmt}/{k}": v for k, v in get.items()})
        rows.append(f"| {fmt} | {int(get['n'])} | {get['same']:.1%} | {get['differs']:.1%} | "
                    f"{get['prism_unknown']:.1%} | {get['source_unknown']:.1%} | {get['source_accuracy']:.1%} | "
                    f"{get['prism_accuracy']:.1%} | {seconds:.1f} |")
    section.body = [
        f"The first {n} questions of ARC-Challenge test, SmolLM2-135M-Instruct greedy through llama_cpp.server "
        f"(making the logs took {made:.0f} s).",
        "",
        "| tool | responses | same | differs | PRISM UNKNOWN | tool UNKNOWN | tool's accuracy | PRISM's accuracy | "
        "import s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
    ]
    return section


def _has_inspect() -> bool:
    """Whether prism.importer can read inspect logs here (the [inspect] extra)."""
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        return False
    return True
