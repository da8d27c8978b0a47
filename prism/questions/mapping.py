"""From one source row to the parts of a question, through the field mapping; bad data is named here.

Every problem a row can have is an error naming the row's place (file and line or row), the field and the
fix, raised while the data is loaded, so no model is asked anything about a dataset that is wrong. The
rules that leave a well-formed row out on purpose (an option count not selected, a repeated option) are
not errors: ``prism.questions.load`` counts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prism.config import DatasetConfig
from prism.questions.spec import LETTERS, MAX_OPTIONS, MIN_OPTIONS, DataError


@dataclass(frozen=True)
class Item:
    """One row as the mapping reads it, before any rule.

    Attributes:
        own_id: The dataset's own id, or None when it has none.
        question: The stem.
        options: The option texts in source order.
        labels: The source's own labels for the options (ARC's ``choices.label``), or None when it has none.
        answer: The answer as written (an index, a label or a text), or None without a key.
        group: The group value, or None.
    """

    own_id: str | None
    question: str
    options: tuple[str, ...]
    labels: tuple[str, ...] | None
    answer: Any
    group: str | None


def _bad(where: str, problem: str) -> DataError:
    """The error for one row: its place first, so every message starts the same way."""
    return DataError(f"malformed row at {where}: {problem}")


def check_columns(spec: DatasetConfig, columns: Sequence[str], source: str) -> None:
    """Every column the mapping names must exist in the source.

    Raises:
        DataError: Naming the mapping key, the missing column and the columns there are.
    """
    for key, column in spec.fields.columns().items():
        if column not in columns:
            raise DataError(f"dataset.{key} names the column {column!r}, which {source} does not have; its "
                            f"columns are {list(columns)}. Set dataset.{key} to one of them.")


def _text(value: Any) -> str | None:
    """A cell as text: strings as they are, whole numbers written out; anything else is not text."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _options(spec: DatasetConfig, row: dict[str, Any], where: str) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """The option texts (and the source's labels, if it has them) of one row."""
    fields = spec.fields
    option_columns = fields.option_columns
    labels: tuple[str, ...] | None = None
    if isinstance(option_columns, str):
        value = row[option_columns]
        shape = (f"field {fields.options!r} (dataset.fields.options) must be a list of option texts or "
                 "{'text': [...], 'label': [...]}")
        if isinstance(value, dict):
            if not isinstance(value.get("text"), list):
                raise _bad(where, f"{shape}; it has no 'text' list.")
            raw_labels = value.get("label")
            if raw_labels is not None:
                if not isinstance(raw_labels, list) or len(raw_labels) != len(value["text"]):
                    raise _bad(where, f"'{fields.options}.text' and '{fields.options}.label' differ in "
                                    "length; give one label per option.")
                labels = tuple(str(label).strip() for label in raw_labels)
            value = value["text"]
        if not isinstance(value, list):
            raise _bad(where, f"{shape}, not {type(value).__name__}.")
        texts = [_text(v) for v in value]
        columns = [f"{option_columns}[{i}]" for i in range(len(texts))]
    else:
        texts = [_text(row[column]) for column in option_columns]
        columns = list(option_columns)
        # One column per option: trailing empty cells mean "fewer options", as in a spreadsheet with
        # columns a-e where some questions have four.
        while texts and texts[-1] is not None and not texts[-1].strip():
            texts.pop()
            columns.pop()
    for text, column in zip(texts, columns, strict=True):
        if text is None:
            raise _bad(where, f"option {column!r} is not text; every option must be a string.")
        if not text.strip():
            raise _bad(where, f"option {column!r} is empty. Fill it in, or remove it (and, if it is the "
                            "answer, fix the answer).")
    found = tuple(t for t in texts if t is not None)
    if len(found) < MIN_OPTIONS:
        raise _bad(where, f"{len(found)} option(s) in {columns or option_columns!r}; a question needs at "
                        f"least {MIN_OPTIONS}. Add options or remove the row.")
    return found, labels


def read_item(spec: DatasetConfig, row: dict[str, Any], where: str) -> Item:
    """Read one row through the mapping.

    Raises:
        DataError: A mapped field missing in this row, not text, or empty; an empty option; fewer than two
            options. The message names the row's place, the field and the fix.
    """
    fields = spec.fields
    named = {"id": fields.id, "question": fields.question, "answer": fields.answer, "group": fields.group}
    for key, column in named.items():
        if column is None:
            continue
        value = row.get(column)
        text = _text(value)
        if value is None:
            problem = "is missing"
        elif key != "answer" and (text is None or not text.strip()):
            problem = "is empty or not text"  # the answer format decides what an answer may be
        else:
            continue
        raise _bad(where, f"field {column!r} {problem} (dataset.fields.{key}). Fill it in, or map "
                        f"dataset.fields.{key} to another column.")
    options, labels = _options(spec, row, where)
    return Item(
        own_id=None if fields.id is None else str(_text(row[fields.id])),
        question=str(row[fields.question]),
        options=options,
        labels=labels,
        answer=None if fields.answer is None else row[fields.answer],
        group=None if fields.group is None else str(_text(row[fields.group])),
    )


def answer_index(spec: DatasetConfig, item: Item, where: str) -> int | None:
    """Where the answer is among the item's options (0-based), read as ``dataset.answer_format`` says.

    Raises:
        DataError: The answer is outside the options, ambiguous, or a letter on a numbered question; the
            message names the row, the field and the fix.
    """
    column, value, n = spec.fields.answer, item.answer, len(item.options)
    if spec.answer_format == "none":
        return None
    field = f"field {column!r} (dataset.fields.answer)"
    if spec.answer_format == "index":
        text = _text(value)
        if text is not None and text.strip().isdigit() and int(text) < n:
            return int(text)
        raise _bad(where, f"{field} is {value!r}, outside the {n} options: answer_format=index counts "
                        f"from 0, so it must be 0 to {n - 1}. Fix the answer, or set dataset.answer_format=letter "
                        "or text if the column holds letters or option texts.")
    if spec.answer_format == "letter":
        text = (_text(value) or "").strip()
        labels = item.labels if item.labels is not None else tuple(LETTERS[:n])
        if all(label.isdigit() for label in labels):
            raise _bad(where, f"{field} is {value!r}, but answer_format=letter and the question's options are "
                              f"labelled with numbers {list(labels)}. Select the rule "
                              "'dataset.rules=[numeric_labels]' to read numbered labels by position.")
        if text.isdigit():
            raise _bad(where, f"{field} is {value!r}, a number, but answer_format=letter reads the letters "
                              f"{list(labels)}. Set dataset.answer_format=index if the numbers count the options "
                              "from 0, or write the answers as letters.")
        if text in labels:
            return labels.index(text)
        raise _bad(where, f"{field} is {value!r}, which is not one of the option labels {list(labels)}. "
                        "Fix the answer, or set dataset.answer_format to index or text if that is what it holds.")
    text = _text(value) or ""
    exact = [i for i, option in enumerate(item.options) if option == text]
    loose = [i for i, option in enumerate(item.options) if option.strip().casefold() == text.strip().casefold()]
    for matches in (exact, loose):
        if len(matches) == 1:
            return matches[0]
    raise _bad(where, f"{field} is {value!r}, which matches {'no option' if not loose else 'several options'}"
                    f" of {list(item.options)} (answer_format=text compares texts). Fix the answer text, or set "
                    "dataset.answer_format to index or letter if that is what it holds.")


def too_many(item: Item) -> bool:
    """Whether the item has more options than any label set covers (it is dropped and counted)."""
    return len(item.options) > MAX_OPTIONS
