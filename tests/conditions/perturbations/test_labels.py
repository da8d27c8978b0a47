from __future__ import annotations

import pytest

from conditions.perturbations.helpers import CLOSING, base
from prism.conditions.perturbations.labels import Relabel, closing_for, label_kind
from prism.conditions.perturbations.variant import render_text, to_prompt


@pytest.mark.parametrize(
    ("labels", "kind"),
    [
        ("ABCD", "letter"),
        ("abcd", "letter"),
        (("1", "2", "3", "4"), "number"),
        (("i", "ii", "iii", "iv"), "Roman numeral"),
        (("I", "II", "III", "IV"), "Roman numeral"),
        (("@", "#", "&", "%"), "symbol"),
        (("C", "D", "I", "V"), "letter"),  # single Roman letters read as letters
        (("A", "2", "@", "iv"), None),
        (("A", ""), None),
        ((), None),
    ],
)
def test_label_kind(labels, kind) -> None:
    assert label_kind(tuple(labels)) == kind


def test_closing_names_the_kind_and_the_letter_closing_is_prisms() -> None:
    assert closing_for(CLOSING, "ABCD") == "Return only the letter of the correct option."
    assert closing_for(CLOSING, ("1", "2", "3", "4")) == "Return only the number of the correct option."
    assert closing_for(CLOSING, ("i", "ii", "iii", "iv")) == "Return only the Roman numeral of the correct option."
    assert closing_for(CLOSING, ("@", "#", "&", "%")) == "Return only the symbol of the correct option."
    assert closing_for("Return only the letter.", ("1", "2")) == "Return only the letter."  # no {kind}: as is


def test_relabel_changes_labels_and_closing_only() -> None:
    start = base()
    after = Relabel("roman", ("i", "ii", "iii", "iv"), CLOSING).apply(start, 0)
    assert start.changed_fields(after) == {"labels", "closing"}
    text = render_text(after)
    assert "i. mass\nii. speed\niii. weight\niv. volume" in text
    assert text.endswith("Return only the Roman numeral of the correct option.")
    prompt = to_prompt(after, "roman", "1")
    assert prompt.canonical_for("ii") == "B"  # the same option, another label


def test_relabel_verify_refuses_labels_of_mixed_kinds() -> None:
    step = Relabel("mixed", ("A", "2", "@", "iv"), CLOSING)
    assert "not all letters" in step.verify(base(), step.apply(base(), 0))
