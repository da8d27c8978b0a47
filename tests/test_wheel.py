"""PRISM as a user installs it: a built wheel, installed where no source tree is importable.

The wheel is built from a copy of the sources (``pip wheel --no-deps --no-build-isolation``), installed with
``pip install --no-deps --target SITE``, and every command runs as a child process with ``PYTHONPATH=SITE``
from an empty directory, so only what the wheel ships can be found: the config tree (``pkg://prism.conf``)
and the console scripts. The dependencies come from this environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import REPO_ROOT, compose_config, fresh_mlflow

COMMANDS = ("prism", "prism-compare", "prism-reproduce", "prism-upload", "prism-publish")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a clean copy of the sources (no stale build/ or egg-info of the checkout)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "src"
    shutil.copytree(REPO_ROOT / "prism", source / "prism", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(root / "dist"), str(source)], check=True, capture_output=True, timeout=600)
    (built,) = (root / "dist").glob("prism_eval-*.whl")
    return built


@pytest.fixture(scope="module")
def site(wheel: Path) -> Path:
    """The wheel installed into a directory of its own, without dependencies."""
    target = wheel.parent.parent / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=600)
    return target


def installed(site: Path, command: str, *args: str, cwd: Path,
              timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run an installed console script from ``cwd`` with only the wheel's directory on ``PYTHONPATH``."""
    env = {**os.environ, "PYTHONPATH": str(site), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env.pop("PRISM_DATA_DIR", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([str(site / "bin" / command), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def run_args(work: Path, data_dir: Path, name: str) -> list[str]:
    """Overrides that keep a run's every file in ``work`` (its outputs in ``work/name``)."""
    return [f"tracking.uri=sqlite:///{work}/mlflow.db", f"store.path={work}/store.sqlite",
            f"dataset.data_dir={data_dir}", f"dataset.cache_dir={work}/frozen", f"hydra.run.dir={work}/{name}"]


def write_replay(path: Path, data_dir: Path, n: int) -> Path:
    """A replay file answering "A" to every cell of the default experiment's first ``n`` questions."""
    from prism.conditions import condition_set_from_config
    from prism.questions import freeze_question_set

    cfg = compose_config([])
    names = condition_set_from_config(cfg.conditions).names
    frozen = freeze_question_set("arc_challenge", "test", n, 0, data_dir, path.parent / "replay-frozen")
    path.write_text("".join(json.dumps({"question_id": q.question_id, "condition": c, "response": "A"}) + "\n"
                            for q in frozen.questions for c in names), encoding="utf-8")
    return path


def test_wheel_ships_every_config_file(wheel: Path) -> None:
    shipped = set(zipfile.ZipFile(wheel).namelist())
    configs = {p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "prism" / "conf").rglob("*.yaml")}
    assert configs and configs <= shipped, sorted(configs - shipped)
    assert "prism/py.typed" in shipped


def test_installed_commands_and_a_replay_run(site: Path, tmp_path: Path, data_dir: Path,
                                            mlflow_template: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    probe = subprocess.run([sys.executable, "-c", "import prism; print(prism.__file__)"], cwd=empty, text=True,
                           env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, check=True)
    assert Path(probe.stdout.strip()).is_relative_to(site), "the child must import the installed wheel"
    for command in COMMANDS:
        shown = installed(site, command, "--help", cwd=empty, timeout=120)
        assert shown.returncode == 0, (command, shown.stderr[-2000:])
        assert "usage" in shown.stdout.lower() or "override" in shown.stdout.lower(), (command, shown.stdout)
    listed = installed(site, "prism", "--help", cwd=empty, timeout=120).stdout
    assert "model: " in listed and "smollm2" in listed and "replay" in listed  # the groups come from the wheel
    assert list(empty.iterdir()) == [], "--help must not write into the working directory"

    work = tmp_path / "work"
    fresh_mlflow(mlflow_template, work)
    replay = write_replay(work / "replay.jsonl", data_dir, 2)
    done = installed(site, "prism", "model=replay", f"model.path={replay}", "model.name=scripted", "dataset.n=2",
                     *run_args(work, data_dir, "replay"), cwd=empty)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "MLflow run" in done.stdout
    records = (work / "replay" / "responses" / "responses.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(records) == 2 * len(compose_config([]).conditions.conditions)


@pytest.mark.model
def test_installed_embedded_run_and_comparison(site: Path, tmp_path: Path, data_dir: Path,
                                               mlflow_template: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    work = tmp_path / "work"
    fresh_mlflow(mlflow_template, work)
    embedded = installed(site, "prism", "dataset.n=2", "model.n_threads=1", *run_args(work, data_dir, "smollm2"),
                         cwd=empty, timeout=600)
    assert embedded.returncode == 0, embedded.stderr[-3000:]
    replay = write_replay(work / "replay.jsonl", data_dir, 2)
    scripted = installed(site, "prism", "model=replay", f"model.path={replay}", "model.name=scripted", "dataset.n=2",
                         *run_args(work, data_dir, "replay"), cwd=empty)
    assert scripted.returncode == 0, scripted.stderr[-3000:]

    compared = installed(site, "prism-compare", f"tracking.uri=sqlite:///{work}/mlflow.db", "bootstrap=50",
                         "permutations=50", f"hydra.run.dir={work}/compare", f"artifact_cache={work}/artifacts",
                         cwd=empty)
    assert compared.returncode == 0, compared.stderr[-3000:]
    assert "smollm2" in compared.stdout and "scripted" in compared.stdout
    assert (work / "compare" / "comparison" / "report.html").is_file()
    assert any((work / "artifacts").iterdir()), "the finished runs' artifacts are cached where artifact_cache says"
    # Only MLflow's artifact root: a sqlite:// store keeps artifacts in ./mlruns of the working directory.
    assert {p.name for p in empty.iterdir()} <= {"mlruns"}, "every other file goes where the overrides say"
