"""What a dataset config says: where the rows are, which column holds what, and which rules apply.

A :class:`DatasetSpec` is built from the ``dataset`` config group (one YAML file per dataset, or
``dataset=custom`` with overrides) and checked as a whole before any file is read, so a misspelled answer
format or an option count outside 2-10 is named at once. Built-in datasets are the YAML files of
``prism/conf/dataset/``; :func:`builtin_spec` reads them for callers that name a dataset in code.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from prism.errors import PrismError
from prism.types import canonical_json, sha256_text

ANSWER_FORMATS = ("index", "letter", "text", "none")
DATASET_TYPES = ("objective", "subjective")
# File formats ``datasets`` reads, by the name ``dataset.format`` takes and by suffix.
FILE_FORMATS = {"jsonl": "json", "json": "json", "csv": "csv", "parquet": "parquet"}
MIN_OPTIONS, MAX_OPTIONS = 2, 10
LETTERS = "ABCDEFGHIJ"  # canonical labels, one per option in frozen order


class DataError(PrismError, ValueError):
    """A dataset could not be loaded or a frozen set could not be trusted; the message says why."""


# Named dataset rules a YAML can select (implemented in prism.questions.rules): name -> what it does.
RULE_NAMES: dict[str, str] = {
    "numeric_labels": "options labelled with numbers (ARC's 1-4) are read by position: number k is letter k",
    "seeded_option_order": "the options are shuffled per question, seeded by the sample seed and the question id, "
                           "for sources that always list the correct answer first (SciQ)",
}


@dataclass(frozen=True)
class FieldMap:
    """Which source column holds each part of a question (``dataset.fields.*``).

    Attributes:
        question: The stem's column.
        options: One column holding a list of option texts or a ``{text, label}`` mapping (ARC's
            ``choices``), or several columns, one option each, in display order.
        answer: The answer's column (read as ``answer_format`` says), or None for items without a key.
        id: The dataset's own id column, or None: a stable id is then made from a hash of the item's text.
        group: A column that groups questions (subject, category, wave), or None.
    """

    question: str
    options: str | tuple[str, ...]
    answer: str | None = None
    id: str | None = None
    group: str | None = None

    def columns(self) -> dict[str, str]:
        """Every mapped column by the key that names it (``fields.options.2`` for the third option column)."""
        named = {key: getattr(self, key) for key in ("id", "question", "answer", "group")}
        found = {f"fields.{key}": column for key, column in named.items() if column is not None}
        if isinstance(self.options, str):
            found["fields.options"] = self.options
        else:
            found.update({f"fields.options.{i}": column for i, column in enumerate(self.options)})
        return found


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset as configured: the source, the field mapping, and the selection and rules on top.

    Attributes:
        name: Dataset name; the frozen records carry it, and a data directory holds ``<name>/<split>.jsonl``.
        fields: The field mapping.
        split: Split name (for a single local file, only a label recorded with each question).
        answer_format: How the answer column reads: ``index`` (0-based), ``letter`` (``A``.. or the
            option's own label), ``text`` (the option's text) or ``none`` (no key).
        type: ``objective`` (there is a correct option) or ``subjective`` (survey items).
        rules: Named dataset rules to apply (see ``prism.questions.rules.RULES``).
        options: Option counts to keep (questions with other counts are dropped and counted), or None for
            any count from 2 to 10.
        subjects: Group values to keep (empty: all).
        stratify: The group column to draw the sample evenly across, or None.
        path: A local file (JSONL, CSV or Parquet), read instead of ``data_dir`` and the Hub.
        format: The file's format when its suffix does not say (``jsonl``, ``csv``, ``parquet``).
        hub: Hugging Face Hub dataset id, read when neither ``path`` nor a data directory is given.
        hub_config: The Hub dataset's configuration name, if it has several.
        data_dir: Directory holding ``<name>/<split>.jsonl`` (else ``PRISM_DATA_DIR``, else the Hub).
        folder: The folder of ``data_dir`` holding ``<split>.jsonl`` when it is not named ``name``.
        ordinal: The options are an ordered scale (Strongly disagree .. Strongly agree): kept in their order
            (a rule that shuffles options is refused), and reports say when a condition reorders them.
        exclude: Ids of items to leave out and count (``dropped.excluded``), e.g. items whose option order
            disagrees with the scale their question states.
    """

    name: str
    fields: FieldMap
    split: str = "test"
    answer_format: str = "index"
    type: str = "objective"
    rules: tuple[str, ...] = ()
    options: tuple[int, ...] | None = None
    subjects: tuple[str, ...] = ()
    stratify: str | None = None
    path: str | None = None
    format: str | None = None
    hub: str | None = None
    hub_config: str | None = None
    data_dir: str | None = None
    folder: str | None = None
    ordinal: bool = False
    exclude: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, cfg: Any) -> DatasetSpec:
        """Build and check a spec from the ``dataset`` config (a mapping or the schema dataclass).

        Raises:
            DataError: Naming the key, the value and what it may be.
        """
        raw: dict[str, Any] = (dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type)
                               else dict(cfg))
        if "fields" not in raw and str(raw.get("name")) in builtin_names():
            # A config logged before datasets had mappings names a built-in dataset only: its YAML says the rest.
            raw = {**_builtin_cfg(str(raw["name"])), **raw}
        fields_cfg = raw.get("fields") or {}
        options_field = fields_cfg.get("options")
        if options_field is None or isinstance(options_field, str):
            options_columns: str | tuple[str, ...] = str(options_field or "")
        else:
            options_columns = tuple(str(column) for column in options_field)
        spec = cls(
            name=str(raw.get("name") or ""),
            fields=FieldMap(
                question=str(fields_cfg.get("question") or ""),
                options=options_columns,
                answer=_optional(fields_cfg.get("answer")),
                id=_optional(fields_cfg.get("id")),
                group=_optional(fields_cfg.get("group")),
            ),
            split=str(raw.get("split") or "test"),
            answer_format=str(raw.get("answer_format") or "index"),
            type=str(raw.get("type") or "objective"),
            rules=tuple(str(rule) for rule in raw.get("rules") or ()),
            options=_counts(raw.get("options")),
            subjects=tuple(str(s) for s in raw.get("subjects") or ()),
            stratify=_optional(raw.get("stratify")),
            path=_optional(raw.get("path")),
            format=_optional(raw.get("format")),
            hub=_optional(raw.get("hub")),
            hub_config=_optional(raw.get("hub_config")),
            data_dir=_optional(raw.get("data_dir")),
            folder=_optional(raw.get("folder")),
            ordinal=bool(raw.get("ordinal") or False),
            exclude=tuple(str(i) for i in raw.get("exclude") or ()),
        )
        spec.check()
        return spec

    def check(self) -> None:
        """Refuse a spec no source could satisfy; every message names the key to set and how.

        Raises:
            DataError: For the first problem found.
        """
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.name):
            raise DataError(f"dataset.name={self.name!r} cannot be used: give a name of letters, digits, '_', "
                            "'.' and '-' (it names the frozen file and the records).")
        if not re.fullmatch(r"\w+", self.split):
            raise DataError(f"dataset.split must be a plain name such as 'test', got {self.split!r}")
        if self.name == "custom" and self.path is None and self.hub is None:
            raise DataError("dataset=custom reads one local file: set dataset.path=FILE (JSONL, CSV or Parquet) and "
                            "map its columns, e.g. dataset.path=items.csv dataset.fields.question=stem "
                            "'dataset.fields.options=[a,b,c,d]' dataset.fields.answer=key dataset.answer_format=letter")
        _one_of("answer_format", self.answer_format, ANSWER_FORMATS)
        _one_of("type", self.type, DATASET_TYPES)
        for rule in self.rules:
            _one_of("rules", rule, tuple(sorted(RULE_NAMES)))
        if self.format is not None:
            _one_of("format", self.format, tuple(FILE_FORMATS))
        if not self.fields.question:
            raise DataError("dataset.fields.question is not set: name the column that holds the question text, "
                            "e.g. dataset.fields.question=question.")
        if not self.fields.options:
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
        for count in self.options or ():
            if not MIN_OPTIONS <= count <= MAX_OPTIONS:
                raise DataError(f"dataset.options={list(self.options or ())} cannot be used: every count must be "
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
        record: dict[str, Any] = {
            "source": source,
            "split": self.split,
            "fields": dataclasses.asdict(self.fields),
            "answer_format": self.answer_format,
            "type": self.type,
            "rules": list(self.rules),
            "options": None if self.options is None else list(self.options),
            "subjects": list(self.subjects),
            "stratify": self.stratify,
        }
        # Added only when set, so the frozen files of every dataset without them keep their names.
        if self.folder is not None:
            record["folder"] = self.folder
        if self.exclude:
            record["exclude"] = list(self.exclude)
        return sha256_text(canonical_json(record))


def _optional(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _counts(value: Any) -> tuple[int, ...] | None:
    """``dataset.options`` as a tuple of counts: a whole number, a list of them, or null."""
    if value is None:
        return None
    values = value if isinstance(value, Sequence) and not isinstance(value, str) else [value]
    counts = []
    for item in values:
        if isinstance(item, bool) or not isinstance(item, int | str) or not str(item).strip().isdigit():
            raise DataError(f"dataset.options={value!r} cannot be used: give a whole number from {MIN_OPTIONS} to "
                            f"{MAX_OPTIONS}, a list of them ('dataset.options=[4,5]'), or null for any count.")
        counts.append(int(item))
    return tuple(sorted(set(counts)))


def _one_of(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise DataError(f"dataset.{key}={value!r} is not known; use one of: {', '.join(allowed)}.")


def builtin_spec(name: str, *, split: str = "test", data_dir: str | None = None) -> DatasetSpec:
    """The spec of a built-in dataset, read from its YAML file in ``prism/conf/dataset/``.

    Raises:
        DataError: ``name`` is not a built-in dataset (the message lists them).
    """
    known = builtin_names()
    if name not in known or name == "custom":
        raise DataError(f"unknown dataset {name!r}; known datasets: {', '.join(n for n in known if n != 'custom')}")
    return DatasetSpec.from_config({**_builtin_cfg(name), "split": split, "data_dir": data_dir})


def _builtin_cfg(name: str) -> dict[str, Any]:
    """A built-in dataset's YAML as a dict, without the values Hydra interpolates (``${seed}``, ``${oc.env:..}``)."""
    import yaml

    text = resources.files("prism.conf").joinpath("dataset", f"{name}.yaml").read_text(encoding="utf-8")
    loaded: dict[str, Any] = yaml.safe_load(text)
    return {k: v for k, v in loaded.items() if not (isinstance(v, str) and "${" in v)}


def builtin_names() -> list[str]:
    """Names of the dataset YAML files shipped in ``prism/conf/dataset/``, sorted."""
    folder = resources.files("prism.conf").joinpath("dataset")
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))
