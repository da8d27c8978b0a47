"""A lab's own config groups, kept outside the package: Hydra's ``--config-dir`` and ``hydra.searchpath``.

The package's groups (``pkg://prism.conf``) stay where they are; a lab adds a directory holding
``model/<its tag>.yaml`` or ``dataset/<its copy>.yaml`` and names its options like the shipped ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import REPO_ROOT, compose_config, fresh_mlflow, run_overrides


def prism(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    env.pop("PRISM_DATA_DIR", None)
    return subprocess.run([sys.executable, "-m", "prism", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def write(path: Path, config: dict[str, object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def test_config_dir_adds_a_labs_model_tag(tmp_path: Path) -> None:
    lab = tmp_path / "lab-conf"
    write(lab / "model" / "mytag.yaml", {"defaults": ["/schema/model/ollama@_here_", "_self_"],
                                          "name": "mylab/llama3-ft:8b", "host": "http://gpu-box:11434",
                                          "concurrency": 4})
    shown = prism("--config-dir", str(lab), "model=mytag", "--cfg", "job", cwd=tmp_path, timeout=120)
    assert shown.returncode == 0, shown.stderr[-2000:]
    model = yaml.safe_load(shown.stdout)["model"]
    assert (model["name"], model["backend"], model["host"], model["concurrency"]) == (
        "mylab/llama3-ft:8b", "ollama", "http://gpu-box:11434", 4)
    assert model["retry_budget_s"] > 0  # the schema's defaults fill what the lab's file leaves out
    # The shipped groups are all still there beside the lab's.
    listed = prism("--config-dir", str(lab), "--help", cwd=tmp_path, timeout=120).stdout
    assert "mytag" in listed and "smollm2" in listed and "llama3" in listed


def test_a_labs_misspelled_key_is_still_an_error(tmp_path: Path) -> None:
    lab = tmp_path / "lab-conf"
    write(lab / "model" / "mytag.yaml", {"defaults": ["/schema/model/ollama@_here_", "_self_"], "name": "x",
                                          "hots": "http://gpu-box:11434"})
    shown = prism("--config-dir", str(lab), "model=mytag", "--cfg", "job", cwd=tmp_path, timeout=120)
    assert shown.returncode != 0 and "hots" in shown.stderr and "Traceback" not in shown.stderr


def test_searchpath_runs_a_labs_model_and_dataset(tmp_path: Path, data_dir: Path, mlflow_template: Path) -> None:
    from prism.questions import freeze_question_set

    names = [c.name for c in compose_config([]).conditions.conditions]
    frozen = freeze_question_set("arc_challenge", "test", 2, 0, data_dir, tmp_path / "answers-frozen")
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"question_id": q.question_id, "condition": c, "response": "B"}) + "\n"
                               for q in frozen.questions for c in names), encoding="utf-8")
    lab = tmp_path / "lab-conf"
    write(lab / "model" / "scripted.yaml", {"defaults": ["/schema/model/replay@_here_", "_self_"],
                                            "name": "scripted", "path": str(answers)})
    # A variant of a shipped dataset: its source and field mapping, with the lab's size and copy.
    write(lab / "dataset" / "arc_small.yaml", {"defaults": ["/dataset/arc_challenge@_here_", "_self_"], "n": 2,
                                               "data_dir": str(data_dir)})
    work = tmp_path / "work"
    fresh_mlflow(mlflow_template, work)
    overrides = [o for o in run_overrides(work, data_dir) if not o.startswith("dataset.data_dir=")]
    done = prism(f"hydra.searchpath=[file://{lab}]", "model=scripted", "dataset=arc_small", *overrides,
                 f"hydra.run.dir={work}/out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in (work / "out" / "responses" / "responses.jsonl").open(encoding="utf-8")]
    assert {(r["model"], r["backend"], r["response"]) for r in records} == {("scripted", "replay", "B")}
    assert len(records) == 2 * len(names)
