"""Results written a scored record at a time are byte for byte what the frame of every record held gives."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import compose_config

import prism.results.summary
from prism.backends.base import Request
from prism.conditions import condition_set_from_config, render_all
from prism.questions import FrozenSet, freeze_question_set
from prism.records import RawRecord
from prism.results.metric_columns import BIAS_KEYS
from prism.results.summary import score_all, write_results
from prism.run.inference import Cell, raw_record
from prism.types import GenerationParams, ModelIdentity


class HeldRecords:
    """What the metrics were given before the columns were coded: every scored record, held whole."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def add(self, record: dict[str, Any]) -> None:
        self.records.append(record)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.records)

    @property
    def label_probs(self) -> bool:
        return any("label_probs_source" in record for record in self.records)

    @property
    def bias_records(self) -> list[dict[str, Any]]:
        return [{key: record.get(key) for key in BIAS_KEYS} for record in self.records
                if record.get("error") is None and record.get("likelihood_answer") is not None]


@pytest.fixture(scope="module")
def frozen(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> FrozenSet:
    return freeze_question_set("arc_challenge", "test", 12, 0, data_dir, tmp_path_factory.mktemp("frozen"))


def _records(frozen: FrozenSet, conditions: str, label_probs: bool, repetitions: int = 2) -> list[RawRecord]:
    """A model's records in every form: answers, UNKNOWN, failed requests, some cells never asked."""
    condition_set = condition_set_from_config(compose_config([f"conditions={conditions}"]).conditions)
    rng = random.Random(f"{conditions}:{label_probs}")
    identity = ModelIdentity("m", "replay", "d", {})
    records = []
    for repetition in range(repetitions):
        params = GenerationParams(temperature=0.0, max_tokens=8, seed=repetition)
        for prompt in render_all(frozen.questions, condition_set):
            if rng.random() < 0.05:  # not asked (a run cut short)
                continue
            cell = Cell(Request(prompt, params, repetition), "arc_challenge", "test", key=prompt.sha256)
            label = rng.choice(prompt.displayed_labels)
            completion: dict[str, Any] = {"response": rng.choice([label, f"The answer is {label}.", "No idea."])}
            if label_probs and rng.random() < 0.8:
                probs = [rng.random() for _ in prompt.displayed_labels]
                completion.update(label_probs={lab: p / sum(probs) for lab, p in zip(prompt.displayed_labels, probs,
                                                                                        strict=True)},
                                  label_mass=rng.random(), label_probs_source="replay")
            error = "timeout" if rng.random() < 0.05 else None
            records.append(raw_record(cell, identity, completion, cached=False, error=error))
    return records


def _results(out: Path, records: list[RawRecord], frozen: FrozenSet, conditions: str) -> dict[str, float]:
    condition_set = condition_set_from_config(compose_config([f"conditions={conditions}"]).conditions)
    return write_results(out, score_all(records, frozen, condition_set), frozen, condition_set, 2)


@pytest.mark.parametrize(("conditions", "label_probs"),
                         [("robustness", False), ("missing_answer", False), ("prism", True)])
def test_every_results_file_is_what_holding_the_records_gave(frozen: FrozenSet, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch, conditions: str,
                                                              label_probs: bool) -> None:
    records = _records(frozen, conditions, label_probs)
    coded = _results(tmp_path / "coded", records, frozen, conditions)
    monkeypatch.setattr(prism.results.summary, "MetricColumns", HeldRecords)
    held = _results(tmp_path / "held", records, frozen, conditions)
    names = sorted(path.name for path in (tmp_path / "held" / "results").iterdir())
    assert names == sorted(path.name for path in (tmp_path / "coded" / "results").iterdir())
    assert {"question_metrics.csv", "condition_metrics.csv", "consistency.csv", "consistency_questions.csv",
            "roles.csv", "scored.jsonl"} <= set(names)
    assert ("likelihood.csv" in names) == label_probs
    for name in names:
        coded_file, held_file = tmp_path / "coded" / "results" / name, tmp_path / "held" / "results" / name
        assert coded_file.read_bytes() == held_file.read_bytes(), name
    assert coded.keys() == held.keys()
    assert all(coded[k] == held[k] or (math.isnan(coded[k]) and math.isnan(held[k])) for k in held)
