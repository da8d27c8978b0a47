"""The closed choices of the config groups (each a ``Literal``), their members, and the check every group uses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

from prism.errors import ConfigError

# Closed choices. OmegaConf 2.3 cannot validate a ``Literal`` annotation, so at run time each field is
# declared ``str`` (Hydra checks the type) and the group's ``check()`` checks the value against the
# ``Literal``'s members; mypy sees the ``Literal`` and checks every comparison and assignment in the code.
AnswerFormat = Literal["index", "letter", "text", "none"]
DatasetType = Literal["objective", "subjective"]
FileFormat = Literal["jsonl", "json", "csv", "parquet"]
DatasetRule = Literal["numeric_labels", "seeded_option_order"]
FamilyScale = Literal["nominal", "ordinal", "numeric"]
ComparePairs = Literal["reference", "all"]
ClozeTarget = Literal["label", "text"]
PlanEffectKind = Literal["shift", "accuracy", "interaction"]
# The log formats prism-import reads: an lm-evaluation-harness sample log, an inspect_ai eval log.
ImportFormat = Literal["lm_eval", "inspect"]
ExecutionKind = Literal["local", "ray"]
if TYPE_CHECKING:
    AnswerFormatField = AnswerFormat
    DatasetTypeField = DatasetType
    FileFormatField = FileFormat
    DatasetRuleField = DatasetRule
    FamilyScaleField = FamilyScale
    ComparePairsField = ComparePairs
    ClozeTargetField = ClozeTarget
    PlanEffectKindField = PlanEffectKind
    ImportFormatField = ImportFormat
    ExecutionKindField = ExecutionKind
else:
    AnswerFormatField = DatasetTypeField = FileFormatField = DatasetRuleField = str
    FamilyScaleField = ComparePairsField = ClozeTargetField = PlanEffectKindField = str
    ImportFormatField = ExecutionKindField = str

ANSWER_FORMATS: tuple[AnswerFormat, ...] = get_args(AnswerFormat)
DATASET_TYPES: tuple[DatasetType, ...] = get_args(DatasetType)
# File formats ``datasets`` reads, by the name ``dataset.format`` takes and by suffix.
FILE_FORMATS: dict[FileFormat, str] = {"jsonl": "json", "json": "json", "csv": "csv", "parquet": "parquet"}
DATASET_RULES: tuple[DatasetRule, ...] = get_args(DatasetRule)
IMPORT_FORMATS: tuple[ImportFormat, ...] = get_args(ImportFormat)
EXECUTION_KINDS: tuple[ExecutionKind, ...] = get_args(ExecutionKind)
MIN_OPTIONS, MAX_OPTIONS = 2, 10


def one_of(key: str, value: object, allowed: tuple[str, ...], error: type[Exception] = ConfigError) -> None:
    """Refuse a closed choice's value that is not one of its members, naming the key and the members.

    Raises:
        ConfigError: (or ``error``) When ``value`` is not in ``allowed``.
    """
    if value not in allowed:
        raise error(f"{key}={value!r} is not known; use one of: {', '.join(allowed)}.")
