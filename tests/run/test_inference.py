"""Which backend settings are part of the completion key, and asking for cells (``prism.run.inference``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from conftest import compose_config

from prism.backends.llamacpp import LlamaCppModelConfig
from prism.backends.ollama import OllamaModelConfig
from prism.backends.openai_compat import OpenAIModelConfig
from prism.backends.registry import backend_entries, keyed_settings
from prism.backends.replay import ReplayModelConfig
from prism.config import ModelConfig
from prism.records import RawRecord
from prism.run.inference import ask_each, collect, make_cells
from prism.run.store import CompletionStore, ResponseLog
from prism.types import Completion, ModelIdentity


@pytest.mark.parametrize(("model", "keyed"), [
    (LlamaCppModelConfig(name="m"), {}),
    (LlamaCppModelConfig(name="m", n_ctx=2048), {}),
    (LlamaCppModelConfig(name="m", n_ctx=4096), {"n_ctx": 4096}),
    (OllamaModelConfig(name="m"), {}),
    (OllamaModelConfig(name="m", num_ctx=8192), {"num_ctx": 8192}),
    (OpenAIModelConfig(name="m", extra_body={"n_ctx": 4096}), {}),  # extra_body is in its digest instead
    (ReplayModelConfig(name="m"), {}),
])
def test_only_settings_that_differ_from_their_defaults_are_keyed(model: ModelConfig, keyed: dict) -> None:
    assert keyed_settings(model) == keyed


def test_every_keyed_setting_is_a_field_of_its_backends_schema() -> None:
    entries = backend_entries()
    assert {name: entry.keyed_settings for name, entry in entries.items() if entry.keyed_settings} == {
        "llamacpp": ("n_ctx", "chat"), "ollama": ("num_ctx", "chat"), "openai": ("chat",)}
    for name, entry in entries.items():
        fields = {f.name for f in dataclasses.fields(entry.schema)}
        assert set(entry.keyed_settings) <= fields, name


class Echo:
    """A backend that answers every request with its own prompt's first 8 hex digits."""

    concurrency = 2

    def generate(self, request) -> Completion:
        return Completion(text=request.prompt.sha256[:8], latency_s=0.0)


def test_collect_is_ask_each_kept_in_a_list_each_record_durable_before_on_record(data_dir: Path,
                                                                                 tmp_path: Path) -> None:
    from prism.conditions import condition_set_from_config
    from prism.questions import freeze_question_set
    from prism.run.pipeline import build_requests

    cfg = compose_config([f"dataset.data_dir={data_dir}", f"dataset.cache_dir={tmp_path / 'frozen'}"])
    frozen = freeze_question_set("arc_challenge", "test", 2, 0, data_dir, tmp_path / "frozen")
    requests = build_requests(frozen, condition_set_from_config(cfg.conditions), cfg.generation)
    identity = ModelIdentity("echo", "replay", "e" * 64, {})
    cells = make_cells(requests, identity, "arc_challenge", "test")
    results = {}
    for name, ask in (("collect", collect), ("ask_each", lambda *a, **k: list(ask_each(*a, **k)))):
        store, log = CompletionStore(tmp_path / f"{name}.sqlite"), ResponseLog(tmp_path / f"{name}.jsonl")
        seen: list[tuple[RawRecord, int]] = []

        def durable(record: RawRecord, log_path: Path = tmp_path / f"{name}.jsonl", s: list = seen) -> None:
            s.append((record, len(log_path.read_text(encoding="utf-8").splitlines())))

        records = ask(Echo(), identity, cells, log, store, "run1", durable)
        log.close()
        assert [r for r, _ in seen] == records  # each record reached on_record once, in arrival order
        assert [n for _, n in seen] == list(range(1, len(cells) + 1))  # ... after its line was in the log
        assert store.get_many([c.key for c in cells]).keys() == {c.key for c in cells}
        store.close()
        lines = [json.loads(x) for x in (tmp_path / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
        assert [line["response"] for line in lines] == [r.response for r in records]
        results[name] = sorted((r.question_id, r.condition, r.response) for r in records)
    assert results["collect"] == results["ask_each"] and len(results["collect"]) == len(cells)
