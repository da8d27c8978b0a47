"""``prism-export push=``: the export folder uploaded to a loopback stand-in of the Hub (``hub_server.py``).

``prism-export`` runs as a process of its own, as a user runs it, with ``HF_ENDPOINT`` pointing at the
stand-in (another process) and ``HF_TOKEN`` set; ``huggingface_hub`` makes its real requests. Xet storage
is switched off (``HF_HUB_DISABLE_XET=1``): ``hf_xet``'s chunk protocol has no stand-in (see hub_server.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURE_DATA, compose, fresh_mlflow
from hub_server import HubServer

from prism.config import ImportConfig, to_schema
from prism.importer.export import DISK, PARQUET
from prism.importer.run import import_log

GEN = FIXTURE_DATA / "imports" / "samples_arc_local_gen.jsonl"
REPO_ROOT = Path(__file__).resolve().parents[2]
TOKEN = "hf_standin_token"
REPO = "prism-test/arc-local-gen"


@pytest.fixture(scope="module")
def exported_run(tmp_path_factory: pytest.TempPathFactory, mlflow_template: Path) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("push")
    uri = f"sqlite:///{fresh_mlflow(mlflow_template, root)}"
    cfg = to_schema(compose("import", [f"tracking.uri={uri}", "format=lm_eval", f"path={GEN}",
                                       "model.name=smollm2"]), ImportConfig)
    return {"uri": uri, "run_id": import_log(cfg, root / "import").run_id}


def prism_export(run: dict[str, Any], out: Path, hub: str, token: str, *extra: str) -> subprocess.CompletedProcess[str]:
    # TRANSFORMERS_OFFLINE too: huggingface_hub reads it as HF_HUB_OFFLINE, and compare's embedding tests set it in
    # this process (prism.compare.embedding), which would leave the push offline when they ran first.
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("HF_", "HUGGINGFACE_", "TRANSFORMERS_"))}
    env.update({"HF_ENDPOINT": hub, "HF_TOKEN": token, "HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
                "HF_HOME": str(out.parent / "hf-home"), "PYTHONPATH": str(REPO_ROOT)})
    return subprocess.run([sys.executable, "-m", "prism.importer.export_main", f"run={run['run_id']}",
                           f"out={out}", f"tracking.uri={run['uri']}", f"push={REPO}", *extra],
                          env=env, capture_output=True, text=True, timeout=300, check=False)


def folder_files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.relative_to(out).parts[0] != DISK}


def test_push_uploads_the_folder_to_the_hub_as_a_dataset_repo(exported_run: dict[str, Any], tmp_path: Path) -> None:
    with HubServer(tmp_path, TOKEN) as hub:
        done = prism_export(exported_run, tmp_path / "ds", hub.url, TOKEN)
        assert done.returncode == 0, done.stderr
        state = hub.repo(REPO)
        requests = hub.requests()
    assert f"pushed: {hub.url}/datasets/{REPO}/commit/{state['commits'][0]['oid']}" in done.stdout
    # The repo holds exactly the folder's files, byte for byte, save_to_disk's copy left out.
    local = folder_files(tmp_path / "ds")
    assert set(local) == {"README.md", PARQUET} and state["files"] == local
    assert (tmp_path / "ds" / DISK).is_dir()
    # The Parquet went through git-lfs (batch, PUT, verify), the card inline in the commit.
    assert state["type"] == "dataset" and state["modes"] == {"README.md": "regular", PARQUET: "lfs"}
    assert [c["summary"] for c in state["commits"]] == ["PRISM export"]
    calls = [(r["method"], r["path"].split(REPO)[-1] if REPO in r["path"] else r["path"]) for r in requests]
    assert calls[0] == ("POST", "/api/repos/create")
    assert ("POST", "/api/validate-yaml") in calls and ("POST", "/preupload/main") in calls
    assert ("POST", ".git/info/lfs/objects/batch") in calls and calls[-1] == ("POST", "/commit/main")
    assert [m for m, p in calls if p.startswith("/_storage/")] == ["PUT", "POST"]
    assert all(r["authorized"] for r in requests if not r["path"].startswith("/_storage/"))


def test_a_second_push_to_the_same_repo_changes_nothing_it_need_not(exported_run: dict[str, Any],
                                                                     tmp_path: Path) -> None:
    with HubServer(tmp_path, TOKEN) as hub:
        first = prism_export(exported_run, tmp_path / "ds", hub.url, TOKEN)
        assert first.returncode == 0, first.stderr
        again = prism_export(exported_run, tmp_path / "ds", hub.url, TOKEN, "overwrite=true")
        assert again.returncode == 0, again.stderr
        state = hub.repo(REPO)
    # The repo existed (409, accepted); the export's bytes are the same, so no file is sent again. The card
    # and the Parquet are rewritten byte-identically, so the second push commits nothing.
    assert len(state["commits"]) == 1 and state["files"] == folder_files(tmp_path / "ds")
    assert f"pushed: {hub.url}/datasets/{REPO}/commit/{state['commits'][0]['oid']}" in again.stdout


def test_a_refused_push_says_so_and_leaves_the_dataset_on_disk(exported_run: dict[str, Any], tmp_path: Path) -> None:
    with HubServer(tmp_path, TOKEN) as hub:
        done = prism_export(exported_run, tmp_path / "ds", hub.url, "hf_wrong_token")
        requests = hub.requests()
    assert done.returncode == 1
    assert f"could not push {tmp_path / 'ds'} to the Hub as {REPO!r}" in done.stderr
    assert "the dataset is on disk" in done.stderr and "HF_TOKEN" in done.stderr
    assert set(folder_files(tmp_path / "ds")) == {"README.md", PARQUET}
    assert requests and not any(r["authorized"] for r in requests)
