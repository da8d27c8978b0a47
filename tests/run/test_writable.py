"""Directories PRISM must write into, refused before any work when they cannot be written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT

import prism.run.writable
from prism.errors import ConfigError
from prism.run.writable import check_writable_dir


def test_a_directory_that_can_be_made_passes_and_nothing_is_created(tmp_path: Path) -> None:
    check_writable_dir(tmp_path / "new" / "deeper", "dataset.cache_dir")
    check_writable_dir(tmp_path, "dataset.cache_dir")
    assert list(tmp_path.iterdir()) == []


def test_a_file_in_the_way_is_named_with_the_setting_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        check_writable_dir(tmp_path / "f" / "out", "hydra.run.dir")
    message = str(caught.value)
    assert f"cannot write to {tmp_path}/f/out (hydra.run.dir): {tmp_path}/f is a file, not a directory" in message
    assert "hydra.run.dir=DIR" in message and "\n" not in message
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    with pytest.raises(ConfigError, match="a broken link, not a directory"):
        check_writable_dir(tmp_path / "dangling" / "x", "store.path")


def test_a_directory_without_write_permission_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Permission bits do not stop root, so the permission check itself is answered "no" here.
    monkeypatch.setattr(prism.run.writable.os, "access", lambda path, mode: Path(path) != tmp_path)
    with pytest.raises(ConfigError, match=rf"may not write in {tmp_path} \(or its file system is read-only\)"):
        check_writable_dir(tmp_path / "out", "hydra.run.dir")


def _prism(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize(("module", "args", "setting"), [
    ("prism", ("hydra.run.dir={blocked}/run",), "hydra.run.dir"),
    ("prism", ("-m", "hydra.sweep.dir={blocked}/sweep", "seed=0,1"), "hydra.sweep.dir"),
    ("prism.compare", ("hydra.run.dir={blocked}/compare",), "hydra.run.dir"),
    ("prism.reproduce", ("some-run-id", "hydra.run.dir={blocked}/again"), "hydra.run.dir"),
])
def test_an_unwritable_run_directory_is_one_paragraph_before_hydra_makes_it(
        tmp_path: Path, module: str, args: tuple[str, ...], setting: str) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("x", encoding="utf-8")
    done = _prism(module, *(a.format(blocked=blocked) for a in args), cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    assert "Traceback" not in output and "HYDRA_FULL_ERROR" not in output, output[-3000:]
    (line,) = [line for line in done.stderr.splitlines() if line.startswith(f"{module}: error:")]
    assert f"cannot write to {blocked}/" in line and f"({setting})" in line and f"{setting}=DIR" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # nothing was written anywhere
