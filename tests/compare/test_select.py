"""prism.compare.select: a run's condition set read back from its logged ``config/resolved.yaml``."""

from __future__ import annotations

from pathlib import Path

import yaml

from prism.compare.select import load_condition_set
from prism.conditions import condition_set_from_config

SETS = Path(__file__).resolve().parents[2] / "prism" / "conf" / "conditions"


def _resolved(tmp_path: Path, name: str, model: str, conditions: dict[str, object]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"model": {"name": model}, "seed": 1, "conditions": conditions}), encoding="utf-8")
    return path


def test_runs_of_one_condition_set_share_one_rebuilt_set_and_others_get_their_own(tmp_path: Path) -> None:
    prism_set = yaml.safe_load((SETS / "prism.yaml").read_text(encoding="utf-8"))
    other = {**prism_set, "conditions": prism_set["conditions"][:3]}  # P0-P2 only
    first = load_condition_set(_resolved(tmp_path, "a.yaml", "m01", prism_set))
    second = load_condition_set(_resolved(tmp_path, "b.yaml", "m02", prism_set))
    assert second is first  # the same logged mapping: rebuilt once
    assert first == condition_set_from_config(prism_set)
    third = load_condition_set(_resolved(tmp_path, "c.yaml", "m03", other))
    assert third == condition_set_from_config(other)
    assert third.names != first.names
