"""Dataset rules that are not a mapping: named, tested, and selected by a dataset's YAML (``dataset.rules``).

Two are selectable: ``numeric_labels`` (ARC labels some questions 1-4 instead of A-D) and
``seeded_option_order`` (SciQ always lists the correct answer first). The rest hold for every dataset:
a stable id from the item's text when the dataset has none, and the two rules that leave a row out and
count it (a repeated option, an exact duplicate).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import replace

from prism.questions.mapping import Item
from prism.questions.spec import LETTERS, RULE_NAMES
from prism.types import canonical_json, sha256_text

# The registry of names lives beside the spec that checks them, so checking a spec imports no rule code.
RULES = RULE_NAMES


def numeric_labels(item: Item) -> Item:
    """Relabel an item whose own labels are all numbers with letters by position, its answer with them.

    A label answer (``answerKey`` ``2``) becomes the letter at that label's position (``B``); an answer that is
    not one of the labels is left as it is, for the answer check to name.
    """
    if item.labels is None or not all(label.isdigit() for label in item.labels):
        return item
    letters = tuple(LETTERS[: len(item.labels)])
    answer = str(item.answer).strip() if item.answer is not None else None
    new_answer = letters[item.labels.index(answer)] if answer in item.labels else item.answer
    return replace(item, labels=letters, answer=new_answer)


def _int_seed(text: str) -> int:
    # str hashing is randomized per process, so integer seeds come from sha256 instead.
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def seeded_option_order(options: tuple[str, ...], answer: int, seed: int,
                        question_id: str) -> tuple[tuple[str, ...], int]:
    """Shuffle the options with ``random.Random`` seeded by ``seed`` and the id; return them and the answer's place.

    The shuffle depends on the seed and the question alone, never on the pool or the source order.
    """
    order = list(range(len(options)))
    random.Random(_int_seed(f"{seed}:{question_id}")).shuffle(order)
    return tuple(options[i] for i in order), order.index(answer)


def text_id(dataset: str, question: str, options: tuple[str, ...], group: str | None) -> str:
    """A stable id for an item without one: a hash of its stem and its options as a set (and its group).

    The options are sorted, so no shuffle or re-release changes the id; the group is hashed only when the
    dataset has one, so ids of datasets without groups (SciQ's) are what they were before groups existed.
    """
    record: dict[str, object] = {"options": sorted(options), "question": question}
    if group is not None:
        record["group"] = group
    return f"{dataset}-{sha256_text(canonical_json(record))[:16]}"


def repeated_options(options: tuple[str, ...]) -> bool:
    """Whether two options read the same to a case-insensitive reader (ARC's ``R, rr, Rr, RR``)."""
    return len({o.strip().casefold() for o in options}) != len(options)
