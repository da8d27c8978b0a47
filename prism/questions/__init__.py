"""Any multiple-choice dataset from configuration alone, frozen into seeded, verified samples.

The flow is ``spec`` (the ``dataset`` config, ``prism.config.DatasetConfig``: source, field mapping, rules) ->
``sources`` (rows through Hugging Face ``datasets``: the Hub, or a local JSONL, CSV or Parquet file) ->
``mapping`` (row -> question parts; bad data is an error naming file, row, field and fix) -> ``rules``
(named dataset rules, ids, drops) -> ``load`` (eligible ``Question``s plus drop counts) -> ``sampling``
(seeded, prefix-stable, optionally stratified) -> ``freezing`` (canonical JSONL in a cache, verified
against a sidecar on every later use). ``datasets`` is imported lazily because it costs about a second
and most callers (tests of the pure core) never load data.
"""

from __future__ import annotations

from prism.questions.freezing import (
    DEFAULT_CACHE_DIR,
    FrozenSet,
    freeze_dataset,
    freeze_question_set,
    frozen_bytes,
    read_frozen,
)
from prism.questions.load import DROP_REASONS, DROP_TEXT, LoadedQuestions, load_questions
from prism.questions.sampling import freeze, freeze_stratified
from prism.questions.sources import resolve_data_dir
from prism.questions.spec import LETTERS, MAX_OPTIONS, MIN_OPTIONS, DataError, builtin_dataset, dataset_config
from prism.types import Question

__all__ = [
    "DEFAULT_CACHE_DIR",
    "DROP_REASONS",
    "DROP_TEXT",
    "LETTERS",
    "MAX_OPTIONS",
    "MIN_OPTIONS",
    "DataError",
    "FrozenSet",
    "LoadedQuestions",
    "Question",
    "builtin_dataset",
    "dataset_config",
    "freeze",
    "freeze_dataset",
    "freeze_question_set",
    "freeze_stratified",
    "frozen_bytes",
    "load_questions",
    "read_frozen",
    "resolve_data_dir",
]
