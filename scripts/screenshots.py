"""Regenerate the README's screenshots of PRISM in MLflow and of a comparison's report page.

    python scripts/screenshots.py                          # run SmolLM2 and Gemma 3 270M (n=20), compare, shoot
    python scripts/screenshots.py --replay                 # two scripted replay models instead: seconds, not minutes
    python scripts/screenshots.py --skip-runs --workdir D  # shoot the latest comparison already in D/mlflow.db

Writes into docs/ (``--out``): mlflow-runs.png (the experiment's runs: the compared runs and the
comparison), comparison-run.png (the comparison run's page), report-in-mlflow.png (report.html in the
run's artifact view) and report.png (report.html opened as a file). Everything runs on this machine:
a scratch tracking store in the work directory, ``mlflow ui`` on a loopback address, and Debian's
headless Chromium (``apt-get install chromium``). The runs read local datasets (``--data-dir``, else
PRISM_DATA_DIR, else the test fixtures in tests/data/) and need the ``models`` extra for Gemma; on two idle
cores they take a few minutes each.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Flags that let Debian's Chromium run headless as root on a machine without network (see the README).
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars"]
# MLflow 3's UI opens an assistant panel over a third of the page on its first load when it is served
# as localhost or 127.0.0.1. Another loopback address keeps the page as a returning user sees it; the
# server is told to accept that host (its DNS-rebinding and CORS checks).
HOST = "127.0.0.2"


def run(command: list[str], cwd: Path, env: dict[str, str]) -> None:
    """Run a command, echoing it, and stop on failure."""
    print("+", " ".join(command), flush=True)
    subprocess.run(command, cwd=cwd, env=env, check=True)


def make_runs(workdir: Path, uri: str, models: str, n: int, env: dict[str, str]) -> None:
    """One PRISM run per model (a Hydra sweep), then their comparison."""
    run([sys.executable, "-m", "prism", "-m", f"model={models}", f"dataset.n={n}", f"tracking.uri={uri}",
         f"store.path={workdir}/store.sqlite", f"dataset.cache_dir={workdir}/frozen",
         f"hydra.sweep.dir={workdir}/multirun"], workdir, env)
    compare(workdir, uri, models, env)


def compare(workdir: Path, uri: str, models: str, env: dict[str, str]) -> None:
    """Compare the latest run of each model."""
    run([sys.executable, "-m", "prism.compare", f"tracking.uri={uri}", f"filters.models=[{models}]",
         f"hydra.run.dir={workdir}/compare"], workdir, env)


# Scripted models for a demo in seconds: (name, chance the usual answer is right, chance a condition
# departs from it). Their answers are drawn with a seeded generator, so the demo is the same every time.
REPLAY_MODELS = (("steady", 0.75, 0.05), ("wobbly", 0.45, 0.35))


def make_replay_runs(workdir: Path, uri: str, n: int, data_dir: str, env: dict[str, str]) -> str:
    """Runs of two scripted replay models (no inference), then their comparison; returns the model names."""
    import json
    import random

    from prism.questions import freeze_question_set

    questions = freeze_question_set("arc_challenge", "test", n, 0, data_dir, workdir / "frozen").questions
    for name, right, departs in REPLAY_MODELS:
        rng = random.Random(name)
        usual = {q.question_id: q.answer if rng.random() < right else rng.choice([x for x in q.labels if x != q.answer])
                 for q in questions}
        lines = []
        for condition in ("P0", "P1", "P2", "P3", "P4"):
            for q in questions:
                label = usual[q.question_id] if rng.random() > departs else rng.choice(q.labels)
                # Most answers restate the option, as small instruction-tuned models do.
                response = f"{label}. {q.options[q.labels.index(label)]}" if rng.random() < 0.7 else label
                lines.append(json.dumps({"question_id": q.question_id, "condition": condition, "response": response}))
        (workdir / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        run([sys.executable, "-m", "prism", "model=replay", f"model.path={workdir / name}.jsonl", f"model.name={name}",
             f"dataset.n={n}", f"tracking.uri={uri}", "store.enabled=false", f"dataset.cache_dir={workdir}/frozen",
             f"hydra.run.dir={workdir}/run-{name}"], workdir, env)
    models = ",".join(name for name, _, _ in REPLAY_MODELS)
    compare(workdir, uri, models, env)
    return models


def latest_comparison(uri: str) -> tuple[str, str]:
    """(experiment id, run id) of the newest comparison run in the store."""
    import mlflow

    client = mlflow.tracking.MlflowClient(uri)
    experiment = client.get_experiment_by_name("prism")
    if experiment is None:
        sys.exit(f"no experiment 'prism' in {uri}: run without --skip-runs first")
    runs = client.search_runs([experiment.experiment_id], "tags.`prism.kind` = 'comparison'",
                              order_by=["attributes.start_time DESC"], max_results=1)
    if not runs:
        sys.exit(f"no comparison run in {uri}: run `python -m prism.compare tracking.uri={uri}` first")
    return str(experiment.experiment_id), str(runs[0].info.run_id)


def free_port() -> int:
    """A port nothing listens on at HOST."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def start_ui(workdir: Path, uri: str, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``mlflow ui`` on HOST in its own process group and wait until it answers."""
    port = free_port()
    base = f"http://{HOST}:{port}"
    log = (workdir / "mlflow-ui.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", HOST, "--port", str(port),
         "--allowed-hosts", f"{HOST}:{port},{HOST}", "--cors-allowed-origins", base],
        cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=5) as reply:
                if reply.status == 200:
                    return process, base
        except OSError:
            time.sleep(2)
    stop(process)
    sys.exit(f"mlflow ui did not answer at {base} within 180 s; see {workdir / 'mlflow-ui.log'}")


def stop(process: subprocess.Popen[bytes]) -> None:
    """End the UI server and the workers it started (its own process group)."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(process.pid, signal.SIGKILL)


def shoot(chromium: str, url: str, path: Path, size: str, budget_ms: int,
          filled: tuple[int, int, int, int] | None = None) -> None:
    """Screenshot ``url`` in a fresh headless Chromium profile, then shrink the PNG.

    Args:
        chromium: The browser binary.
        url: What to open.
        path: The PNG to write.
        size: Window size, ``WIDTH,HEIGHT``.
        budget_ms: Chromium's virtual time budget: how long the page's scripts may run before the shot.
        filled: A box (left, top, right, bottom) that must not be blank. The MLflow UI renders an HTML
            artifact in a frame after fetching it, and on a busy machine the shot can come first: the shot
            is then taken again with a longer budget.
    """
    for attempt in range(4):
        with tempfile.TemporaryDirectory(prefix="prism-chromium-") as profile:
            subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={size}",
                            f"--virtual-time-budget={budget_ms * (attempt + 1)}", f"--screenshot={path}", url],
                           check=True, capture_output=True, timeout=600)
        if filled is None or not blank(path, filled):
            break
        print(f"{path.name}: still loading, again with a longer budget", flush=True)
    else:
        sys.exit(f"{url} did not render within {4 * budget_ms} ms of virtual time")
    optimize(path)
    print(f"{path}  {path.stat().st_size // 1024} KiB", flush=True)


def blank(path: Path, box: tuple[int, int, int, int]) -> bool:
    """Whether a region of a screenshot is one flat colour (nothing drawn there yet)."""
    from PIL import Image, ImageStat

    with Image.open(path) as image:
        spread = ImageStat.Stat(image.convert("L").crop(box)).stddev[0]
    return bool(spread < 2.0)


def optimize(path: Path) -> None:
    """Re-save as a 256-colour PNG: screenshots of text lose nothing visible and shrink several-fold."""
    from PIL import Image

    with Image.open(path) as image:
        reduced = image.convert("RGB").quantize(colors=256)
    reduced.save(path, optimize=True)


def main() -> None:
    """Parse the options, make the runs unless told not to, and take the screenshots."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "prism-screenshots")
    parser.add_argument("--out", type=Path, default=REPO / "docs")
    parser.add_argument("--models", default="smollm2,gemma3_270m")
    parser.add_argument("--n", type=int, default=20, help="questions per run (each is asked under 5 conditions)")
    parser.add_argument("--data-dir", default=os.environ.get("PRISM_DATA_DIR") or str(REPO / "tests" / "data"))
    parser.add_argument("--skip-runs", action="store_true", help="use the latest comparison already in the store")
    parser.add_argument("--replay", action="store_true", help="two scripted replay models instead of real ones")
    args = parser.parse_args()

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("no chromium on PATH: apt-get update && apt-get install -y chromium")
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{workdir}/mlflow.db"
    env = {**os.environ, "PRISM_DATA_DIR": args.data_dir}
    env.pop("MLFLOW_TRACKING_URI", None)
    if args.replay and not args.skip_runs:
        make_replay_runs(workdir, uri, args.n, args.data_dir, env)
    elif not args.skip_runs:
        make_runs(workdir, uri, args.models, args.n, env)
    experiment, comparison = latest_comparison(uri)

    import mlflow.artifacts

    report = Path(mlflow.artifacts.download_artifacts(run_id=comparison, artifact_path="comparison/report.html",
                                                      dst_path=str(workdir / "report"), tracking_uri=uri))
    # The file as a reader opens it: summary and readings first.
    shoot(chromium, report.as_uri(), args.out / "report.png", "1400,1700", 5000)

    process, base = start_ui(workdir, uri, env)
    try:
        ui = "?workflowType=machine_learning"  # the classic runs view, not the GenAI overview
        shoot(chromium, f"{base}/#/experiments/{experiment}/runs{ui}", args.out / "mlflow-runs.png", "1400,520",
              20000, filled=(220, 250, 900, 330))
        shoot(chromium, f"{base}/#/experiments/{experiment}/runs/{comparison}{ui}", args.out / "comparison-run.png",
              "1400,1000", 20000, filled=(220, 300, 880, 700))
        # The artifact view fetches the page and renders it in a frame: give it time.
        shoot(chromium, f"{base}/#/experiments/{experiment}/runs/{comparison}/artifacts/comparison/report.html{ui}",
              args.out / "report-in-mlflow.png", "1400,1000", 40000, filled=(520, 220, 1380, 900))
    finally:
        stop(process)


if __name__ == "__main__":
    main()
