"""Fixtures of the dataset-seam tests: the committed subsets, synthetic files, and the full datasets when present."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "tests" / "data"


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    # Loading local data sets the HF offline flags process-wide; monkeypatch restores them after each test.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.delenv("PRISM_DATA_DIR", raising=False)


@pytest.fixture
def custom(tmp_path: Path) -> Callable[..., dict[str, Any]]:
    """A ``dataset=custom`` config mapping for a file under ``tmp_path`` (keys override the defaults)."""

    def make(path: Path, **overrides: Any) -> dict[str, Any]:
        cfg: dict[str, Any] = {"name": "custom", "path": str(path), "answer_format": "letter",
                               "fields": {"question": "stem", "options": ["a", "b", "c", "d"], "answer": "key"}}
        fields = overrides.pop("fields", {})
        cfg["fields"] = {**cfg["fields"], **fields}
        return {**cfg, **overrides}

    return make
