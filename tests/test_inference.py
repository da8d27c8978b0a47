"""Which backend settings are part of the completion key (``prism.inference.keyed_settings``)."""

from __future__ import annotations

import pytest

from prism.config import ModelConfig
from prism.inference import KEYED_SETTINGS, keyed_settings


@pytest.mark.parametrize(("model", "keyed"), [
    ({"backend": "llamacpp", "n_ctx": 2048}, {}),
    ({"backend": "llamacpp", "n_ctx": None}, {}),
    ({"backend": "llamacpp", "n_ctx": 0}, {}),  # llama.cpp reads 0 as its default too
    ({"backend": "llamacpp"}, {}),
    ({"backend": "llamacpp", "n_ctx": 4096}, {"n_ctx": 4096}),
    ({"backend": "ollama", "num_ctx": None}, {}),
    ({"backend": "ollama", "num_ctx": 8192}, {"num_ctx": 8192}),
    ({"backend": "ollama", "n_ctx": 4096}, {}),  # another backend's setting changes nothing here
    ({"backend": "openai", "n_ctx": 4096, "num_ctx": 8192}, {}),  # its extra_body is in the digest instead
    ({"backend": "replay", "n_ctx": 4096}, {}),
])
def test_only_settings_that_differ_from_their_defaults_are_keyed(model: dict, keyed: dict) -> None:
    assert keyed_settings(model) == keyed


def test_the_keyed_defaults_are_the_schemas() -> None:
    for defaults in KEYED_SETTINGS.values():
        for key, default in defaults.items():
            assert getattr(ModelConfig, key) == default, key
