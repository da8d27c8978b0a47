"""``load_questions``: a dataset spec -> its eligible questions in source order, with drop counts per reason.

Per row: the mapping reads it (bad data is an error, ``prism.questions.mapping``); rows with an option
count the spec does not select, more than ten options or a repeated option are left out and counted; the
dataset's rules run; the answer is placed; the id is the dataset's own or a hash of the text; an exact
duplicate of an earlier row is left out and counted, and any other repeated id is an error.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from prism.config import DatasetConfig
from prism.questions.mapping import Item, answer_index, check_columns, read_item, too_many
from prism.questions.rules import numeric_labels, repeated_options, seeded_option_order, text_id
from prism.questions.sources import Rows, read_rows
from prism.questions.spec import LETTERS, DataError, builtin_dataset
from prism.types import Question

log = logging.getLogger(__name__)

# Why a well-formed row is left out of the pool, in the order the checks run (``prism.dropped.<reason>``).
DROP_REASONS = ("option_count", "too_many_options", "repeated_options", "duplicate", "reordered_duplicate")
DROP_TEXT = {
    "option_count": "with an option count dataset.options does not select",
    "too_many_options": "with more than ten options",
    "repeated_options": "with repeated options",
    "duplicate": "that repeat an earlier question exactly (same question and options)",
    "reordered_duplicate": "that repeat an earlier question with its options in another order (same answer)",
    "excluded": "listed in dataset.exclude",
}


@dataclass(frozen=True)
class LoadedQuestions:
    """The eligible questions of one split, in source order.

    Attributes:
        questions: Questions that passed every eligibility rule.
        dropped: Number of source questions dropped, per reason in ``DROP_REASONS``.
        dataset_version: ``sha256:<hex>`` of a local source file, or ``<hub repo>@<revision>``.
        source: The file path or Hub repository the rows came from.
        source_id: What identifies the source in the frozen file's name.
        dataset: The dataset's name, as each question carries it.
        split: The split the questions were read from.
    """

    questions: tuple[Question, ...]
    dropped: dict[str, int]
    dataset_version: str
    source: str
    source_id: str = ""
    dataset: str = ""
    split: str = ""


def load_questions(
    dataset: str | DatasetConfig, split: str = "test", *, seed: int = 0,
    data_dir: str | os.PathLike[str] | None = None,
) -> LoadedQuestions:
    """Load one split and keep the questions the PRISM protocol can use.

    Args:
        dataset: A built-in dataset's name (``prism/conf/dataset/<name>.yaml``) or a spec.
        split: Split name when ``dataset`` is a name (a spec carries its own).
        seed: Sample seed; rules that shuffle (``seeded_option_order``) are seeded from it.
        data_dir: Directory holding ``<dataset>/<split>.jsonl`` when ``dataset`` is a name; None falls back
            to ``PRISM_DATA_DIR``, then to the Hub.

    Returns:
        The eligible questions in source order, drop counts per reason and the source's version.

    Raises:
        DataError: Unknown dataset, missing file or column, bad data in a row, a repeated id, or no way to
            reach the data.
    """
    if isinstance(dataset, DatasetConfig):
        spec = dataset
    else:
        if not isinstance(split, str) or not split.replace("_", "").isalnum():
            raise DataError(f"split must be a plain name such as 'test', got {split!r}")
        spec = builtin_dataset(dataset, split=split, data_dir=None if data_dir is None else os.fspath(data_dir))
    rows = read_rows(spec)
    check_columns(spec, rows.columns, rows.source)
    return _eligible(spec, rows, seed)


def _eligible(spec: DatasetConfig, rows: Rows, seed: int) -> LoadedQuestions:
    dropped = dict.fromkeys(DROP_REASONS, 0)
    if spec.exclude:
        dropped["excluded"] = 0  # only when asked for, so other datasets' counts (and sidecars) are unchanged
    first_seen: dict[str, tuple[int, Question]] = {}
    questions: list[Question] = []
    groups: set[str] = set()
    for index, row in enumerate(rows.rows):
        where = rows.where(index)
        item = read_item(spec, row, where)
        if item.group is not None:
            groups.add(item.group)
        if spec.subjects and item.group not in spec.subjects:
            continue  # a selection, not a drop: the pool is the chosen groups
        reason = _left_out(spec, item)
        if reason is not None:
            dropped[reason] += 1
            continue
        question = _question(spec, item, where, seed, rows)
        if question.question_id in first_seen:
            first_index, first = first_seen[question.question_id]
            if spec.fields.id is None and _correct(first) == _correct(question):
                dropped["duplicate" if first == question else "reordered_duplicate"] += 1
                continue
            raise DataError(_repeated_id(spec, question.question_id, where, rows.where(first_index)))
        first_seen[question.question_id] = (index, question)
        questions.append(question)
    unknown = [s for s in spec.subjects if s not in groups]
    if unknown:
        raise DataError(f"dataset.subjects names {unknown}, which no row of {rows.source} has in "
                        f"dataset.fields.group ({spec.fields.group!r}); the groups there are: "
                        f"{', '.join(sorted(groups))}.")
    if dropped["duplicate"] or dropped["reordered_duplicate"]:
        log.info("%s/%s: %d repeated question(s) kept once (%d exact, %d with the options in another order)",
                 rows.dataset, rows.split, dropped["duplicate"] + dropped["reordered_duplicate"], dropped["duplicate"],
                 dropped["reordered_duplicate"])
    return LoadedQuestions(tuple(questions), dropped, rows.version, rows.source, rows.source_id, rows.dataset,
                           rows.split)


def _correct(question: Question) -> str | None:
    """The text of the correct option (same id here means same stem, group and option set); None without a key."""
    return None if question.answer is None else question.options[question.labels.index(question.answer)]


def _left_out(spec: DatasetConfig, item: Item) -> str | None:
    """The reason a well-formed item is dropped, or None when it stays."""
    if item.own_id is not None and item.own_id in spec.exclude:
        return "excluded"
    if too_many(item):
        return "too_many_options"
    if (counts := spec.option_counts()) is not None and len(item.options) not in counts:
        return "option_count"
    if repeated_options(item.options):
        return "repeated_options"  # e.g. ARC's "R, rr, Rr, RR": a case-insensitive reader sees three
    return None


def _question(spec: DatasetConfig, item: Item, where: str, seed: int, rows: Rows) -> Question:
    if "numeric_labels" in spec.rules:
        item = numeric_labels(item)
    answer = answer_index(spec, item, where)
    qid = item.own_id or text_id(rows.dataset, item.question, item.options, item.group)
    options = item.options
    if "seeded_option_order" in spec.rules and answer is not None:
        options, answer = seeded_option_order(options, answer, seed, qid)
    labels = tuple(LETTERS[: len(options)])
    key = None if answer is None else labels[answer]
    return Question(qid, item.question, options, labels, key, rows.dataset, rows.split, item.group)


def _repeated_id(spec: DatasetConfig, qid: str, where: str, first: str) -> str:
    if spec.fields.id is not None:
        return (f"duplicate question id {qid!r} at {where} (first at {first}): ids in dataset.fields.id "
                f"({spec.fields.id!r}) must be unique. Give one of the rows another id or remove it.")
    return (f"duplicate question id {qid!r} at {where} (first at {first}): the two rows have the same question "
            "and the same set of options but different correct answers, so neither can be dropped as a repeat. "
            "Fix or remove one of them, or map dataset.fields.id to a column of unique ids.")
