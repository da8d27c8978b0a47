"""The ``dataset`` group: which questions are frozen, from which source, read how; and the few-shot pool."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from omegaconf import II, MISSING

from prism.config.choices import (
    ANSWER_FORMATS,
    DATASET_RULES,
    DATASET_TYPES,
    FILE_FORMATS,
    MAX_OPTIONS,
    MIN_OPTIONS,
    AnswerFormatField,
    DatasetRuleField,
    DatasetTypeField,
    FileFormatField,
    one_of,
)
from prism.errors import DataError
from prism.types import canonical_json, sha256_text


@dataclass
class DatasetFields:
    """Which source column holds each part of a question (``dataset.fields.*``).

    ``options`` is one column holding a list of option texts or a ``{text, label}`` mapping (ARC's
    ``choices``), or several columns, one option each, in display order; ``answer`` is read as
    ``dataset.answer_format`` says (None: items without a key); ``id`` is the dataset's own id column (None:
    a stable id is made from a hash of the item's text); ``group`` groups questions (subject, wave).
    """

    id: str | None = None
    question: str = "question"
    # One column holding a list of options (or ARC-style {text, label}), or a list of columns, one per option.
    options: Any = "choices"
    answer: str | None = "answer"
    group: str | None = None

    def __post_init__(self) -> None:
        # An empty column name (``dataset.fields.answer=''``) means no column, as null does.
        self.id, self.answer, self.group = (value or None for value in (self.id, self.answer, self.group))

    @property
    def option_columns(self) -> str | tuple[str, ...]:
        """``options`` as one column name or a tuple of them (a YAML list arrives as a list)."""
        if self.options is None or isinstance(self.options, str):
            return str(self.options or "")
        return tuple(str(column) for column in self.options)

    def columns(self) -> dict[str, str]:
        """Every mapped column by the key that names it (``fields.options.2`` for the third option column)."""
        named = {"id": self.id, "question": self.question, "answer": self.answer, "group": self.group}
        found = {f"fields.{key}": column for key, column in named.items() if column is not None}
        options = self.option_columns
        if isinstance(options, str):
            found["fields.options"] = options
        else:
            found.update({f"fields.options.{i}": column for i, column in enumerate(options)})
        return found

    def canonical(self) -> dict[str, Any]:
        """The mapping as the frozen file's name digests it (options as a string or a list)."""
        options = self.option_columns
        return {"question": self.question, "options": options if isinstance(options, str) else list(options),
                "answer": self.answer, "id": self.id, "group": self.group}


@dataclass
class DemonstrationsConfig:
    """The pool few-shot demonstrations are drawn from (``conditions=fewshot``, ``prism.questions.demonstrations``).

    The pool is other splits of the dataset's own source (``data_dir/<name>/<split>.jsonl``, or the Hub), or one
    local file (``path``), read with the dataset's field mapping unless ``fields`` gives another; the built-in
    datasets' YAMLs set it, so a few-shot set needs no override.
    """

    # Splits of the dataset's source, in order of preference: each question's draw takes a seeded order of the
    # first split's items, then the next's (MMLU: [dev, validation]). Empty: no pool (a few-shot set is refused).
    splits: list[str] = field(default_factory=list)
    # One local file (JSONL, CSV or Parquet) instead of the splits; null: the splits.
    path: str | None = None
    # The pool's own field mapping; null: the dataset's (dataset.fields).
    fields: DatasetFields | None = None
    # Draw each question's demonstrations from its own group only (MMLU: the same subject).
    same_group: bool = False


@dataclass
class DatasetConfig:
    """Which questions are frozen: the sample is fixed by (name, split, n, sample_seed) and the mapping.

    The source is ``path`` (one JSONL, CSV or Parquet file), else ``data_dir/<name>/<split>.jsonl``, else
    the Hub (``hub``, ``hub_config``, ``split``); ``fields`` maps its columns (``prism.questions``).
    :meth:`check` refuses a config no source could satisfy before any file is read.
    """

    name: str = MISSING
    split: str = "test"
    n: int = 100
    sample_seed: int = II("seed")
    data_dir: str | None = None
    cache_dir: str = ".prism/frozen"
    path: str | None = None
    # jsonl, csv or parquet; null: from the suffix of path.
    format: FileFormatField | None = None
    hub: str | None = None
    hub_config: str | None = None
    fields: DatasetFields = field(default_factory=DatasetFields)
    # index (0-based), letter (A.. or the option's own label), text (the option's text) or none (no key).
    answer_format: AnswerFormatField = "index"
    # objective (there is a correct option) or subjective (survey items).
    type: DatasetTypeField = "objective"
    # Named dataset rules (prism.questions.rules.RULES), e.g. [numeric_labels].
    rules: list[DatasetRuleField] = field(default_factory=list)
    # Option counts to keep (a whole number or a list); null: any count from 2 to 10.
    options: Any = None
    # Group values to keep (dataset.fields.group); empty: all.
    subjects: list[str] = field(default_factory=list)
    # The group column to draw dataset.n evenly across, or null.
    stratify: str | None = None
    # The folder of data_dir holding <split>.jsonl when it is not named after the dataset; null: name.
    folder: str | None = None
    # The options are an ordered scale (kept in order; reports say when a condition reorders it).
    ordinal: bool = False
    # Item ids to leave out and count (dropped.excluded).
    exclude: list[str] = field(default_factory=list)
    # Where few-shot demonstrations come from (conditions=fewshot).
    demonstrations: DemonstrationsConfig = field(default_factory=DemonstrationsConfig)

    @property
    def subjective(self) -> bool:
        """Survey items (``type=subjective``): asked in the condition set's subjective wording, with no key."""
        return self.type == "subjective"

    @property
    def keyless(self) -> bool:
        """Items without an answer key (``answer_format=none``, or survey items)."""
        return self.answer_format == "none" or self.subjective

    def option_counts(self) -> tuple[int, ...] | None:
        """``options`` as the sorted option counts to keep, or None for any count from 2 to 10.

        Raises:
            DataError: When it is not a whole number, a list of them, or null.
        """
        value = self.options
        if value is None:
            return None
        values = value if isinstance(value, Sequence) and not isinstance(value, str) else [value]
        counts = []
        for item in values:
            if isinstance(item, bool) or not isinstance(item, int | str) or not str(item).strip().isdigit():
                raise DataError(f"dataset.options={value!r} cannot be used: give a whole number from {MIN_OPTIONS} "
                                f"to {MAX_OPTIONS}, a list of them ('dataset.options=[4,5]'), or null for any count.")
            counts.append(int(item))
        return tuple(sorted(set(counts)))

    def check(self) -> None:
        """Refuse a dataset config no source could satisfy; every message names the key to set and how.

        Raises:
            DataError: For the first problem found.
        """
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(self.name)):
            raise DataError(f"dataset.name={self.name!r} cannot be used: give a name of letters, digits, '_', "
                            "'.' and '-' (it names the frozen file and the records).")
        if not re.fullmatch(r"\w+", str(self.split)):
            raise DataError(f"dataset.split must be a plain name such as 'test', got {self.split!r}")
        if self.name == "custom" and self.path is None and self.hub is None:
            raise DataError("dataset=custom reads one local file: set dataset.path=FILE (JSONL, CSV or Parquet) and "
                            "map its columns, e.g. dataset.path=items.csv dataset.fields.question=stem "
                            "'dataset.fields.options=[a,b,c,d]' dataset.fields.answer=key dataset.answer_format=letter")
        one_of("dataset.answer_format", self.answer_format, ANSWER_FORMATS, DataError)
        one_of("dataset.type", self.type, DATASET_TYPES, DataError)
        for rule in self.rules:
            one_of("dataset.rules", rule, DATASET_RULES, DataError)
        if self.format is not None:
            one_of("dataset.format", self.format, tuple(FILE_FORMATS), DataError)
        if not self.fields.question:
            raise DataError("dataset.fields.question is not set: name the column that holds the question text, "
                            "e.g. dataset.fields.question=question.")
        if not self.fields.option_columns:
            raise DataError("dataset.fields.options is not set: name one column holding a list of options (or "
                            "ARC-style {text, label}), or list one column per option: "
                            "'dataset.fields.options=[a,b,c,d]'.")
        if self.answer_format != "none" and self.fields.answer is None:
            raise DataError(f"dataset.answer_format={self.answer_format} needs dataset.fields.answer, the column "
                            "holding the answer (or set dataset.answer_format=none for items without a key).")
        if self.ordinal and "seeded_option_order" in self.rules:
            raise DataError("dataset.ordinal=true keeps an ordered scale in its order, but the seeded_option_order "
                            "rule shuffles the options: drop one of the two.")
        if self.exclude and self.fields.id is None:
            raise DataError("dataset.exclude lists item ids, but this dataset has no dataset.fields.id; map the id "
                            "column or drop dataset.exclude.")
        counts = self.option_counts()
        for count in counts or ():
            if not MIN_OPTIONS <= count <= MAX_OPTIONS:
                raise DataError(f"dataset.options={list(counts or ())} cannot be used: every count must be "
                                f"a whole number from {MIN_OPTIONS} to {MAX_OPTIONS}.")
        if self.stratify is not None and self.stratify != self.fields.group:
            raise DataError(f"dataset.stratify={self.stratify} must name the group column, dataset.fields.group "
                            f"(now {self.fields.group}); set dataset.fields.group={self.stratify} or drop stratify.")
        if self.subjects and self.fields.group is None:
            raise DataError("dataset.subjects selects groups, but this dataset has no dataset.fields.group; set "
                            "the column that holds the subject or drop dataset.subjects.")

    def file_format(self) -> str:
        """The ``datasets`` loader of ``path``: ``dataset.format``, else the file's suffix.

        Raises:
            DataError: When neither says.
        """
        if self.format is not None:
            return FILE_FORMATS[self.format]
        suffix = (self.path or "").rsplit(".", 1)[-1].lower()
        if suffix not in FILE_FORMATS:
            raise DataError(f"cannot tell the format of dataset.path={self.path}: its suffix is not one of "
                            f"{sorted('.' + s for s in FILE_FORMATS)}. Set dataset.format=jsonl, csv or parquet.")
        return FILE_FORMATS[suffix]

    def mapping_digest(self, source: str) -> str:
        """Hex digest of the source and everything that decides which questions it yields and how.

        It is part of the frozen file's name, so two datasets (two custom files, or one file mapped two
        ways) with the same ``n`` and seed never share a cache file.
        """
        counts = self.option_counts()
        record: dict[str, Any] = {
            "source": source,
            "split": self.split,
            "fields": self.fields.canonical(),
            "answer_format": self.answer_format,
            "type": self.type,
            "rules": [str(rule) for rule in self.rules],
            "options": None if counts is None else list(counts),
            "subjects": [str(s) for s in self.subjects],
            "stratify": self.stratify,
        }
        # Added only when set, so the frozen files of every dataset without them keep their names.
        if self.folder is not None:
            record["folder"] = self.folder
        if self.exclude:
            record["exclude"] = [str(i) for i in self.exclude]
        return sha256_text(canonical_json(record))
