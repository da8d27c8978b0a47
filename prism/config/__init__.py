"""Typed schemas for every Hydra config group, registered in Hydra's ConfigStore; the domain objects the code reads.

``prism/conf/config.yaml`` lists ``prism_schema`` first in its defaults, so each group's YAML is merged onto
these dataclasses: a misspelled key or a value of the wrong type fails with Hydra's own error instead
of being silently ignored. One module per group (``model``, ``dataset``, ``conditions``, ``generation``), one
for the experiment and its small groups, one per other command (``compare``, ``plan``, ``reproduce``); the
closed choices in ``choices`` and :func:`to_schema` in ``schema``. Import from ``prism.config``.
"""

from prism.config.choices import (
    ANSWER_FORMATS,
    DATASET_RULES,
    DATASET_TYPES,
    EXECUTION_KINDS,
    FILE_FORMATS,
    IMPORT_FORMATS,
    MAX_OPTIONS,
    MIN_OPTIONS,
    AnswerFormat,
    AnswerFormatField,
    ClozeTarget,
    ClozeTargetField,
    ComparePairs,
    ComparePairsField,
    DatasetRule,
    DatasetRuleField,
    DatasetType,
    DatasetTypeField,
    ExecutionKind,
    ExecutionKindField,
    FamilyScale,
    FamilyScaleField,
    FileFormat,
    FileFormatField,
    ImportFormat,
    ImportFormatField,
    PlanEffectKind,
    PlanEffectKindField,
    one_of,
)
from prism.config.compare import (
    CompareConfig,
    CompareDifferences,
    CompareEmbedding,
    CompareFilters,
)
from prism.config.conditions import (
    ConditionsConfig,
    ConditionSpec,
    FamilySpec,
    FormatSpec,
    StepSpec,
    SubjectiveWording,
    VariantSpec,
)
from prism.config.dataset import (
    DatasetConfig,
    DatasetFields,
    DemonstrationsConfig,
)
from prism.config.execution import (
    ExecutionConfig,
)
from prism.config.experiment import (
    BudgetConfig,
    PrismConfig,
    StoreConfig,
    TrackingConfig,
)
from prism.config.generation import (
    GenerationConfig,
)
from prism.config.importer import (
    ExportConfig,
    ImportConfig,
    ImportDataset,
    ImportModel,
)
from prism.config.model import (
    ModelConfig,
    PricingConfig,
    check_model_name,
)
from prism.config.plan import (
    PlanConfig,
    PlanEffect,
    PlanRates,
)
from prism.config.reproduce import (
    ReproduceConfig,
)
from prism.config.schema import (
    Checked,
    to_schema,
)

__all__ = [
    "ANSWER_FORMATS",
    "DATASET_RULES",
    "DATASET_TYPES",
    "EXECUTION_KINDS",
    "FILE_FORMATS",
    "IMPORT_FORMATS",
    "MAX_OPTIONS",
    "MIN_OPTIONS",
    "AnswerFormat",
    "AnswerFormatField",
    "BudgetConfig",
    "Checked",
    "ClozeTarget",
    "ClozeTargetField",
    "CompareConfig",
    "CompareDifferences",
    "CompareEmbedding",
    "CompareFilters",
    "ComparePairs",
    "ComparePairsField",
    "ConditionSpec",
    "ConditionsConfig",
    "DatasetConfig",
    "DatasetFields",
    "DatasetRule",
    "DatasetRuleField",
    "DatasetType",
    "DatasetTypeField",
    "DemonstrationsConfig",
    "ExecutionConfig",
    "ExecutionKind",
    "ExecutionKindField",
    "ExportConfig",
    "FamilyScale",
    "FamilyScaleField",
    "FamilySpec",
    "FileFormat",
    "FileFormatField",
    "FormatSpec",
    "GenerationConfig",
    "ImportConfig",
    "ImportDataset",
    "ImportFormat",
    "ImportFormatField",
    "ImportModel",
    "ModelConfig",
    "PlanConfig",
    "PlanEffect",
    "PlanEffectKind",
    "PlanEffectKindField",
    "PlanRates",
    "PricingConfig",
    "PrismConfig",
    "ReproduceConfig",
    "StepSpec",
    "StoreConfig",
    "SubjectiveWording",
    "TrackingConfig",
    "VariantSpec",
    "check_model_name",
    "one_of",
    "to_schema",
]
