"""The dataset spec: every value checked, with the key and the fix named, before any file is read."""

from __future__ import annotations

import pytest

from prism.questions import DataError, dataset_config

BASE = {"name": "custom", "path": "items.csv", "answer_format": "letter",
        "fields": {"question": "stem", "options": ["a", "b"], "answer": "key"}}


@pytest.mark.parametrize(("change", "message"), [
    ({"answer_format": "letters"},
     "dataset.answer_format='letters' is not known; use one of: index, letter, text, none"),
    ({"type": "opinion"}, "dataset.type='opinion' is not known; use one of: objective, subjective"),
    ({"rules": ["arc"]}, "dataset.rules='arc' is not known; use one of: numeric_labels, seeded_option_order"),
    ({"format": "xlsx"}, "dataset.format='xlsx' is not known"),
    ({"options": 11}, r"dataset.options=\[11\] cannot be used: every count must be a whole number from 2 to 10"),
    ({"options": [1, 4]}, "every count must be a whole number from 2 to 10"),
    ({"options": "four"}, "give a whole number from 2 to 10, a list of them"),
    ({"stratify": "subject"}, "dataset.stratify=subject must name the group column, dataset.fields.group"),
    ({"subjects": ["anatomy"]}, "dataset.subjects selects groups, but this dataset has no dataset.fields.group"),
    ({"path": None}, "dataset=custom reads one local file: set dataset.path=FILE"),
    ({"name": "../x"}, "dataset.name='../x' cannot be used"),
    ({"split": "a/b"}, "dataset.split must be a plain name"),
    ({"fields": {"question": "stem", "options": ["a", "b"]}},
     "dataset.answer_format=letter needs dataset.fields.answer"),
    ({"fields": {"question": "stem", "answer": "key"}}, "dataset.fields.options is not set"),
    ({"fields": {"options": ["a", "b"], "answer": "key"}}, "dataset.fields.question is not set"),
])
def test_a_bad_value_is_refused_naming_the_key(change: dict, message: str) -> None:
    with pytest.raises(DataError, match=message):
        dataset_config({**BASE, **change})


def test_option_counts_read_as_a_sorted_tuple() -> None:
    assert dataset_config({**BASE, "options": 4}).option_counts() == (4,)
    assert dataset_config({**BASE, "options": [5, "3", 5]}).option_counts() == (3, 5)
    assert dataset_config(BASE).option_counts() is None


def test_the_mapping_digest_changes_with_source_mapping_and_selection() -> None:
    spec = dataset_config(BASE)
    digests = {
        spec.mapping_digest("file:a.csv"),
        spec.mapping_digest("file:b.csv"),
        dataset_config({**BASE, "answer_format": "index"}).mapping_digest("file:a.csv"),
        dataset_config({**BASE, "options": 2}).mapping_digest("file:a.csv"),
    }
    assert len(digests) == 4 and spec.mapping_digest("file:a.csv") == dataset_config(BASE).mapping_digest(
        "file:a.csv")
