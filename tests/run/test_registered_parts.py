"""A backend and a perturbation op from outside PRISM run end to end: each is one module's code plus its YAML.

This module is the "one module": it defines a backend (answers every prompt with one configured label) and a
perturbation op (the first two options trade places), registers both, and a lab config directory holds the
model file and the condition set that name them. Nothing in prism/ is edited for either.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import yaml
from conftest import compose_config, run_overrides

from prism.backends import registry
from prism.backends.base import Request
from prism.conditions.perturbations import ops
from prism.conditions.perturbations.variant import Attribute, Variant
from prism.config import ModelConfig
from prism.run.pipeline import run
from prism.types import Completion, ModelIdentity, Prompt


@dataclass
class OneLabelModelConfig(ModelConfig):
    """The schema of the ``one_label`` backend: which label it answers with."""

    backend: str = "one_label"
    label: str = "A"


class OneLabelBackend:
    """Answers every prompt with ``The answer is <label>.``."""

    concurrency = 1

    def __init__(self, model: OneLabelModelConfig) -> None:
        self._model = model
        self.asked: list[Request] = []

    def identity(self) -> ModelIdentity:
        digest = hashlib.sha256(f"one_label:{self._model.label}".encode()).hexdigest()
        return ModelIdentity(name=self._model.name, backend="one_label", digest=digest)

    def generate(self, request: Request) -> Completion:
        return Completion(text=f"The answer is {self._model.label}.", latency_s=0.0)

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class SwapFirstTwo:
    """The first two options trade places, each keeping its canonical label (attribute ``order``)."""

    @property
    def name(self) -> str:
        return "swap_first_two"

    @property
    def changes(self) -> frozenset[Attribute]:
        return frozenset({"order"})

    def apply(self, variant: Variant, seed: int) -> Variant:
        order = [1, 0, *range(2, len(variant.options))]
        return replace(variant, options=tuple(variant.options[i] for i in order),
                       canonical=tuple(variant.canonical[i] for i in order))

    def verify(self, before: Variant, after: Variant) -> str | None:
        return None if after.canonical[:2] == before.canonical[1::-1] else "the first two options did not trade"


ENTRY = registry.BackendEntry("one_label", OneLabelModelConfig, OneLabelBackend)
OP = ops.Op("swap_first_two", lambda spec, library: SwapFirstTwo(), SwapFirstTwo)


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The backend and the op in their registries for one test (the built-in entries found first)."""
    registry.backend_entries()
    ops.ops()
    monkeypatch.setitem(registry._ENTRIES, ENTRY.name, ENTRY)
    monkeypatch.setitem(ops._OPS, OP.name, OP)


def lab_config(directory: Path) -> Path:
    """The data half: a model file naming the backend's schema and a condition set using the op."""
    (directory / "model").mkdir(parents=True)
    (directory / "conditions").mkdir()
    (directory / "model" / "says_b.yaml").write_text(yaml.safe_dump(
        {"defaults": ["/schema/model/one_label@_here_", "_self_"], "name": "says-b", "label": "B"}))
    (directory / "conditions" / "swapped.yaml").write_text(yaml.safe_dump({
        "defaults": ["shared/p0@_here_", "_self_"],
        "name": "swapped",
        "template_version": "1",
        "families": {"swap": {"scale": "nominal"}},
        "variants": {"swap_first_two": {"family": "swap", "description": "The first two options trade places.",
                                        "steps": [{"op": "swap_first_two"}]}},
    }))
    return directory


def test_a_registered_backend_and_op_run_end_to_end(registered: None, tmp_path: Path, data_dir: Path) -> None:
    lab = lab_config(tmp_path / "lab")
    cfg = compose_config([*run_overrides(tmp_path, data_dir), f"hydra.searchpath=[file://{lab}]", "model=says_b",
                          "conditions=swapped", "dataset.n=3"])
    assert isinstance(cfg.model, OneLabelModelConfig) and cfg.model.label == "B"
    run(cfg, output_dir=tmp_path / "out")

    lines = (tmp_path / "out" / "results" / "scored.jsonl").read_text().splitlines()
    scored = [json.loads(line) for line in lines]
    assert {(r["condition"], r["backend"]) for r in scored} == {("P0", "one_label"), ("swap_first_two", "one_label")}
    assert len(scored) == 6
    # Displayed B is canonical B unperturbed, and canonical A once the first two options have traded places.
    assert {r["condition"]: r["answer"] for r in scored} == {"P0": "B", "swap_first_two": "A"}
    raw = [json.loads(line) for line in (tmp_path / "out" / "responses" / "responses.jsonl").read_text().splitlines()]
    prompts = {(r["question_id"], r["condition"]): r["prompt"] for r in raw}
    for question_id in {r["question_id"] for r in raw}:
        unperturbed, swapped = prompts[question_id, "P0"], prompts[question_id, "swap_first_two"]
        first, second = (line for line in unperturbed.splitlines() if line[:2] in ("A.", "B."))
        assert f"A. {second[3:]}" in swapped and f"B. {first[3:]}" in swapped


def test_a_backend_name_taken_twice_is_refused(registered: None) -> None:
    other = registry.BackendEntry("one_label", OneLabelModelConfig, OneLabelBackend, keyed_settings=("label",))
    with pytest.raises(registry.BackendError, match="registered already"):
        registry.register_backend(other)
    registry.register_backend(ENTRY)  # the same entry again is harmless


def test_an_entry_that_cannot_work_is_refused_when_declared() -> None:
    with pytest.raises(registry.BackendError, match="not a field"):
        registry.BackendEntry("bad", OneLabelModelConfig, OneLabelBackend, keyed_settings=("n_ctx",))
    with pytest.raises(registry.BackendError, match="check_label_probs"):
        registry.BackendEntry("bad", OneLabelModelConfig, OneLabelBackend, capabilities=frozenset({"label_probs"}))
    for capability, method in (("context_window", "context_window()"), ("prompt_tokens", "prompt_tokens(prompt)")):
        with pytest.raises(registry.BackendError, match=rf"declares {capability} but its factory has no "
                                                        rf"{method.replace('(', '[(]').replace(')', '[)]')}"):
            registry.BackendEntry("bad", OneLabelModelConfig, OneLabelBackend, capabilities=frozenset({capability}))


class SizedBackend(OneLabelBackend):
    """The one-label backend with a context of 64 tokens, counted one token a character."""

    def context_window(self) -> int | None:
        return 64

    def prompt_tokens(self, prompt: Prompt) -> int:
        return len(prompt.text)


def test_the_context_is_read_only_where_the_entry_declares_it(registered: None,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    backend = OneLabelBackend(OneLabelModelConfig())
    assert registry.context_window(backend, "one_label") is None  # it says no context
    assert registry.prompt_token_counter(backend, "one_label") is None
    sized = registry.BackendEntry("sized", OneLabelModelConfig, SizedBackend,
                                  capabilities=frozenset({"context_window", "prompt_tokens"}))
    monkeypatch.setitem(registry._ENTRIES, sized.name, sized)
    made = SizedBackend(OneLabelModelConfig())
    assert registry.context_window(made, "sized") == 64
    counter = registry.prompt_token_counter(made, "sized")
    assert counter is not None and counter(Prompt("q", "P0", "abc", ("A",), ("A",), ("x",), "A")) == 3
    # Declared by the entry, yet an instance its factory did not build (a pool of endpoints) says nothing.
    assert registry.context_window(backend, "sized") is None
    assert registry.context_window(made, "one_label") is None  # one_label's entry does not declare it


def test_an_op_name_taken_twice_is_refused(registered: None) -> None:
    with pytest.raises(ops.SpecError, match="registered already"):
        ops.register_op(ops.Op("swap_first_two", lambda spec, library: SwapFirstTwo(), SwapFirstTwo, takes="formats"))
