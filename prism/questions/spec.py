"""What a dataset config says, built and checked: the ``dataset`` group is :class:`prism.config.DatasetConfig`.

The config dataclass is the domain object: its ``check()`` refuses a misspelled answer format or an option
count outside 2-10 before any file is read, and the loaders read it directly. This module builds one from a
plain mapping (code and tests that name a dataset without Hydra) and from a built-in dataset's YAML file in
``prism/conf/dataset/`` (:func:`builtin_dataset`).
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from typing import Any

from prism.config import (
    ANSWER_FORMATS,
    DATASET_TYPES,
    FILE_FORMATS,
    MAX_OPTIONS,
    MIN_OPTIONS,
    DatasetConfig,
)
from prism.errors import DataError

__all__ = ["ANSWER_FORMATS", "DATASET_TYPES", "FILE_FORMATS", "LETTERS", "MAX_OPTIONS", "MIN_OPTIONS", "RULE_NAMES",
           "DataError", "builtin_dataset", "builtin_names", "dataset_config"]

LETTERS = "ABCDEFGHIJ"  # canonical labels, one per option in frozen order

# Named dataset rules a YAML can select (implemented in prism.questions.rules): name -> what it does.
RULE_NAMES: dict[str, str] = {
    "numeric_labels": "options labelled with numbers (ARC's 1-4) are read by position: number k is letter k",
    "seeded_option_order": "the options are shuffled per question, seeded by the sample seed and the question id, "
                           "for sources that always list the correct answer first (SciQ)",
}


def dataset_config(values: Mapping[str, Any] | DatasetConfig) -> DatasetConfig:
    """A checked :class:`DatasetConfig` from a mapping of its keys (as a YAML file or a test writes them).

    Keys are typed as Hydra types them; ``sample_seed`` defaults to 0 (Hydra interpolates ``${seed}``). A
    ``fields`` mapping is the whole mapping: a part it does not name is unmapped, not the schema's default
    column, so a mapping written in code says every column it reads.

    Raises:
        DataError: An unknown key, a value of the wrong type, or a value :meth:`DatasetConfig.check` refuses.
    """
    if isinstance(values, DatasetConfig):
        values.check()
        return values
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    raw = {key: value for key, value in values.items() if value is not None or key in _NULLABLE}
    if isinstance(raw.get("fields"), Mapping):
        raw["fields"] = {"id": None, "question": "", "options": "", "answer": None, "group": None, **raw["fields"]}
    try:
        merged = OmegaConf.merge(OmegaConf.structured(DatasetConfig(sample_seed=0)), raw)
        cfg = OmegaConf.to_object(merged)
    except OmegaConfBaseException as exc:
        raise DataError(f"dataset config cannot be used: {exc.msg} (key dataset.{exc.full_key}).") from exc
    assert isinstance(cfg, DatasetConfig)
    cfg.check()
    return cfg


# Keys whose null is a value of their own (not "leave the default").
_NULLABLE = frozenset({"options"})


def builtin_dataset(name: str, *, split: str = "test", data_dir: str | None = None) -> DatasetConfig:
    """The config of a built-in dataset, read from its YAML file in ``prism/conf/dataset/``.

    Raises:
        DataError: ``name`` is not a built-in dataset (the message lists them).
    """
    known = builtin_names()
    if name not in known or name == "custom":
        raise DataError(f"unknown dataset {name!r}; known datasets: {', '.join(n for n in known if n != 'custom')}")
    return dataset_config({**builtin_yaml(name), "split": split, "data_dir": data_dir})


def builtin_yaml(name: str) -> dict[str, Any]:
    """A built-in dataset's YAML as a dict, without the values Hydra interpolates (``${seed}``, ``${oc.env:..}``)."""
    import yaml

    text = resources.files("prism.conf").joinpath("dataset", f"{name}.yaml").read_text(encoding="utf-8")
    loaded: dict[str, Any] = yaml.safe_load(text)
    return {k: v for k, v in loaded.items() if not (isinstance(v, str) and "${" in v) and k != "defaults"}


def builtin_names() -> list[str]:
    """Names of the dataset YAML files shipped in ``prism/conf/dataset/``, sorted."""
    folder = resources.files("prism.conf").joinpath("dataset")
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))

