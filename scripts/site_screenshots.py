"""Regenerate the README's screenshots of the published results site (``python -m prism.publish``).

    python scripts/site_screenshots.py                          # SmolLM2 + scripted models, publish, shoot
    python scripts/site_screenshots.py --replay                 # scripted models only: a minute, not ten
    python scripts/site_screenshots.py --skip-runs --workdir D  # publish and shoot the runs already in D

Runs (into a scratch SQLite store in the work directory): SmolLM2-135M-Instruct on 10 ARC-Challenge and 10
SciQ questions under the default condition set (unless ``--replay``), and three scripted replay models on
the same questions under the default set and under ``conditions=robustness`` (every perturbation family).
Then ``python -m prism.publish`` and headless Chromium (Debian's ``chromium``) opening the site from disk at
a desktop and a phone width: site-index, site-model and site-run (``-desktop.png``/``-phone.png``) in
docs/ (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(REPO))  # this checkout's benchmarks package, which no install provides
from screenshots import shoot  # noqa: E402  (the same browser flags and PNG shrinking as the report's shots)

from benchmarks.prompts import condition_names  # noqa: E402  (the same composition as the publish benchmark's)

# Scripted models: (name, chance the usual answer is right, chance a condition departs from it).
REPLAY_MODELS = (("steady", 0.8, 0.05), ("wobbly", 0.5, 0.35), ("stubborn", 0.3, 0.1))
DATASETS = ("arc_challenge", "sciq")
# (page, width name) -> window size; the index is taller so its shot reaches the heatmaps.
SIZES = {"desktop": "1280,1700", "phone": "390,1800"}
INDEX_SIZES = {"desktop": "1280,2900", "phone": "390,2400"}


def run(command: list[str], cwd: Path, env: dict[str, str]) -> None:
    """Run a command, echoing it, and stop on failure."""
    print("+", " ".join(command), flush=True)
    subprocess.run(command, cwd=cwd, env=env, check=True)


def common(workdir: Path, uri: str, data_dir: str, n: int) -> list[str]:
    """Overrides every run of the demo shares."""
    return [f"dataset.n={n}", f"tracking.uri={uri}", f"store.path={workdir}/store.sqlite",
            f"dataset.cache_dir={workdir}/frozen", f"dataset.data_dir={data_dir}"]


def make_replay_runs(workdir: Path, uri: str, n: int, data_dir: str, env: dict[str, str]) -> None:
    """Each scripted model on each dataset under the default condition set and under robustness.

    One multirun over models x datasets x condition sets: each model's config (on a Hydra search path in the
    work directory) names its replay file by ``${dataset.name}`` and ``${conditions.name}``.
    """
    from prism.questions import freeze_question_set

    conf = workdir / "conf" / "model"
    conf.mkdir(parents=True, exist_ok=True)
    for dataset in DATASETS:
        questions = freeze_question_set(dataset, "test", n, 0, data_dir, workdir / "frozen").questions
        for conditions in ("prism", "robustness"):
            names = condition_names(conditions)
            for name, right, departs in REPLAY_MODELS:
                rng = random.Random(f"{name}-{dataset}-{conditions}")
                usual = {q.question_id: q.answer if rng.random() < right
                         else rng.choice([x for x in q.labels if x != q.answer]) for q in questions}
                lines = []
                for condition in names:
                    for q in questions:
                        label = usual[q.question_id] if rng.random() > departs else rng.choice(q.labels)
                        response = f"{label}. {q.options[q.labels.index(label)]}" if rng.random() < 0.6 else label
                        lines.append(json.dumps({"question_id": q.question_id, "condition": condition,
                                                 "response": response}))
                path = workdir / "replay" / f"{name}-{dataset}-{conditions}.jsonl"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for name, _, _ in REPLAY_MODELS:
        replay = f"{workdir}/replay/{name}-${{dataset.name}}-${{conditions.name}}.jsonl"
        (conf / f"{name}.yaml").write_text(f"defaults:\n  - /schema/model/replay@_here_\n  - _self_\nname: {name}\n"
                                           f"backend: replay\npath: {replay}\n", encoding="utf-8")
    run([sys.executable, "-m", "prism", "-m", f"hydra.searchpath=[file://{workdir / 'conf'}]",
         f"model={','.join(name for name, _, _ in REPLAY_MODELS)}", f"dataset={','.join(DATASETS)}",
         "conditions=prism,robustness", *common(workdir, uri, data_dir, n), "store.enabled=false",
         f"hydra.sweep.dir={workdir}/multirun-replay"], workdir, env)


def main() -> None:
    """Make the runs unless told not to, publish the site, and take the screenshots."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "prism-site-screenshots")
    parser.add_argument("--out", type=Path, default=REPO / "docs")
    parser.add_argument("--n", type=int, default=10, help="questions per run (each asked under 5 or 21 conditions)")
    parser.add_argument("--data-dir", default=os.environ.get("PRISM_DATA_DIR") or str(REPO.parent / "shared" / "data"))
    parser.add_argument("--skip-runs", action="store_true", help="publish the runs already in the work directory")
    parser.add_argument("--replay", action="store_true", help="scripted replay models only (no SmolLM2)")
    parser.add_argument("--chromium", default="chromium")
    args = parser.parse_args()
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{workdir}/mlflow.db"
    env = {**os.environ, "PRISM_DATA_DIR": args.data_dir, "HF_HUB_OFFLINE": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    if not args.skip_runs:
        if not args.replay:
            run([sys.executable, "-m", "prism", "-m", "model=smollm2", "model.n_threads=1",
                 f"dataset={','.join(DATASETS)}", *common(workdir, uri, args.data_dir, args.n),
                 f"hydra.sweep.dir={workdir}/multirun"], workdir, env)
        make_replay_runs(workdir, uri, args.n, args.data_dir, env)
    site = workdir / "site"
    run([sys.executable, "-m", "prism.publish", f"tracking.uri={uri}", f"publish.out={site}",
         "publish.title=PRISM results: SmolLM2 and scripted models", f"hydra.run.dir={workdir}/publish"], workdir, env)
    # The model page of a scripted model (it has every perturbation family, so a full heatmap); the run page
    # of SmolLM2 when it ran (real responses).
    model = REPLAY_MODELS[0][0]
    run_page = _first_run_page(site, "smollm2" if (site / "models" / "smollm2.html").is_file() else model)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, page in (("site-index", site / "index.html"), ("site-model", site / "models" / f"{model}.html"),
                       ("site-run", run_page)):
        for width, size in (INDEX_SIZES if name == "site-index" else SIZES).items():
            shoot(args.chromium, page.as_uri(), args.out / f"{name}-{width}.png", size, 2000)


def _first_run_page(site: Path, model: str) -> Path:
    """The run page the model's page links to first."""
    import re

    text = (site / "models" / f"{model}.html").read_text(encoding="utf-8")
    found = re.search(r'href="\.\./(runs/[^"#]+\.html)"', text)
    if not found:
        sys.exit(f"{model}'s page links to no run page")
    return site / found.group(1)


if __name__ == "__main__":
    main()
