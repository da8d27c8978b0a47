"""Shared fixtures: where the local datasets live and a throwaway frozen-set cache."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from prism.config import PrismConfig

REPO_ROOT = Path(__file__).resolve().parent.parent

# Hypothesis fails an example that takes longer than 200 ms by default: a timed assertion, which a loaded
# machine trips (seen once on the spelling properties at load 6). Tests here never assert on time.
settings.register_profile("prism", deadline=None)
settings.load_profile("prism")


# Small seeded subsets of the ARC-Challenge and SciQ test splits, committed (see tests/data/README.md).
FIXTURE_DATA = REPO_ROOT / "tests" / "data"
# The full datasets, when this machine has them: PRISM_DATA_DIR, else a `shared/data` directory beside the
# checkout (where CI keeps them). A fresh clone has neither, and the checks that need them skip.
SIBLING_DATA = REPO_ROOT.parent / "shared" / "data"


def find_full_data() -> Path | None:
    """The directory of full local datasets (Hub schema), or None when this machine has none."""
    for candidate in (os.environ.get("PRISM_DATA_DIR"), SIBLING_DATA):
        if candidate and (Path(candidate) / "arc_challenge" / "test.jsonl").is_file():
            return Path(candidate)
    return None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The committed fixture subsets in the Hub's schema: every test that needs questions reads these."""
    return FIXTURE_DATA


@pytest.fixture(scope="session")
def full_data_dir() -> Path:
    """The full test splits, for checks of dataset-wide facts; skips (saying why) when none is found."""
    path = find_full_data()
    if path is None:
        pytest.skip(f"needs the full datasets: set PRISM_DATA_DIR or put them at {SIBLING_DATA}")
    return path


@pytest.fixture
def tmp_cache(tmp_path: Path) -> Path:
    """An empty frozen-set cache directory private to one test."""
    path = tmp_path / "frozen"
    path.mkdir()
    return path


CONF_DIR = REPO_ROOT / "prism" / "conf"


@pytest.fixture
def workdir(tmp_path: Path, data_dir: Path) -> Path:
    """A private directory for a run's MLflow store, completion store, frozen cache and outputs."""
    return tmp_path


def run_overrides(workdir: Path, data_dir: Path) -> list[str]:
    """Overrides that keep a test run's every file inside ``workdir``."""
    return [
        f"tracking.uri=sqlite:///{workdir}/mlflow.db",
        f"store.path={workdir}/store.sqlite",
        f"dataset.data_dir={data_dir}",
        f"dataset.cache_dir={workdir}/frozen",
    ]


def compose(config_name: str, overrides: list[str]) -> Any:
    """Compose ``prism/conf/<config_name>.yaml`` with ``overrides``, as its entry point does (a DictConfig)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from prism.conf import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name=config_name, overrides=overrides)


def compose_config(overrides: list[str]) -> PrismConfig:
    """Compose ``prism/conf/config.yaml`` exactly as ``python -m prism`` would, as its schema."""
    from prism.config import PrismConfig, to_schema

    return to_schema(compose("config", overrides), PrismConfig)


def compose_plain(overrides: list[str]) -> dict[str, Any]:
    """The composed ``config.yaml`` resolved to plain dicts, as a run's ``config/resolved.yaml`` holds it."""
    from omegaconf import OmegaConf

    container = OmegaConf.to_container(compose("config", overrides), resolve=True, throw_on_missing=True)
    assert isinstance(container, dict)
    return {str(k): v for k, v in container.items()}


@pytest.fixture(scope="session")
def mlflow_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty MLflow SQLite store with MLflow's tables already made (see :func:`fresh_mlflow`)."""
    path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    code = "import sys, mlflow; mlflow.tracking.MlflowClient(sys.argv[1]).search_experiments()"
    subprocess.run([sys.executable, "-c", code, f"sqlite:///{path}"], check=True, capture_output=True, timeout=300)
    return path


def fresh_mlflow(template: Path, directory: Path) -> Path:
    """Copy the migrated template to ``directory/mlflow.db`` (the store ``run_overrides`` names).

    A new SQLite store costs MLflow several seconds of schema migrations in every process that creates
    one; tests that start many runs in fresh directories copy a migrated one instead.
    """
    directory.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(template, directory / "mlflow.db"))
