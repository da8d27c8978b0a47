"""``prism-import`` (``conf/import.yaml``) and ``prism-export`` (``conf/export.yaml``): which log, which run, where."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from prism.config.choices import IMPORT_FORMATS, ImportFormatField, one_of
from prism.config.experiment import TrackingConfig
from prism.errors import ConfigError


@dataclass
class ImportModel:
    """The model that answered, as PRISM names it."""

    # null: what the log says (lm-eval's results file, inspect's model), else "<tool>-model".
    name: str | None = None


@dataclass
class ImportDataset:
    """What the frozen questions are called (their ``dataset`` and ``split`` fields, the run's params)."""

    # null: the mapping's name (lm_eval), inspect's dataset name (inspect).
    name: str | None = None
    # The split the questions came from (recorded; the log does not say it).
    split: str = "test"


@dataclass
class ImportConfig:
    """One source log made into one PRISM run."""

    defaults: list[Any] = field(default_factory=list)
    tracking: TrackingConfig = MISSING
    # lm_eval: an lm-evaluation-harness sample log (samples_<task>_<time>.jsonl, --log_samples);
    # inspect: an inspect_ai eval log (.eval or .json), read with inspect_ai's reader (the [inspect] extra).
    # One of lm_eval, inspect (IMPORT_FORMATS: a str to OmegaConf, which refuses Literal; check() checks it).
    format: ImportFormatField = MISSING
    # The log file.
    path: str = MISSING
    model: ImportModel = field(default_factory=ImportModel)
    # lm_eval: a shipped mapping (arc_challenge, arc_easy, mmlu, sciq, openbookqa, commonsense_qa) or a YAML
    # file; null: by the task's name, else recognised from the doc's fields.
    mapping: str | None = None
    # lm_eval: the task's name when the file's name does not say it (null: from samples_<task>_<time>.jsonl).
    task: str | None = None
    # lm_eval: which of the task's filters gives lm-eval's extracted answer (null: the first in the file).
    filter: str | None = None
    # inspect: which scorer's extracted answer is the source's (null: the first).
    scorer: str | None = None
    dataset: ImportDataset = field(default_factory=ImportDataset)
    # Where the run's files go before upload; null: Hydra's output directory of the job.
    output_dir: str | None = None

    def check(self) -> None:
        """Refuse a setting that cannot be imported.

        Raises:
            ConfigError: Naming the setting and the fix.
        """
        one_of("format", self.format, IMPORT_FORMATS)
        if not self.path:
            raise ConfigError("path= must name the log file to import, e.g. path=samples_arc_challenge.jsonl.")


@dataclass
class ExportConfig:
    """One finished run, or a comparison's runs, written as a Hugging Face dataset on disk."""

    defaults: list[Any] = field(default_factory=list)
    tracking: TrackingConfig = MISSING
    # The MLflow run id of a run, or of a comparison (each compared run becomes a split).
    run: str = MISSING
    # The folder the dataset is written to (save_to_disk: Arrow files, plus data/*.parquet and README.md).
    out: str = "export"
    # Push the dataset to the Hugging Face Hub as this repo id, a dataset repo (needs a token: HF_TOKEN or
    # huggingface-cli login; the Hub's address is HF_ENDPOINT's, default https://huggingface.co).
    push: str | None = None
    # Overwrite a non-empty out folder.
    overwrite: bool = False

    def check(self) -> None:
        """Refuse a setting that cannot be exported.

        Raises:
            ConfigError: Naming the setting and the fix.
        """
        if not self.run:
            raise ConfigError("run= must name the MLflow run id of a finished run or comparison to export.")
        if not self.out:
            raise ConfigError("out= must name the folder the dataset is written to.")
