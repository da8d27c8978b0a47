"""Which backend settings are part of the completion key (``prism.inference.keyed_settings``)."""

from __future__ import annotations

import dataclasses

import pytest

from prism.config import (
    MODEL_SCHEMAS,
    LlamaCppModelConfig,
    ModelConfig,
    OllamaModelConfig,
    OpenAIModelConfig,
    ReplayModelConfig,
)
from prism.inference import KEYED_SETTINGS, keyed_settings


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
    for backend, keys in KEYED_SETTINGS.items():
        fields = {f.name for f in dataclasses.fields(MODEL_SCHEMAS[backend])}
        assert set(keys) <= fields, backend
