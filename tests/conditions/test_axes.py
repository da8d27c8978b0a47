"""prism.conditions.axes: every family is an axis with its declared scale; ordered axes step from value to value."""

from __future__ import annotations

import pytest
from conftest import compose_plain

from prism.conditions import ConditionError, condition_set_from_config
from prism.conditions.axes import Axis


def conditions_cfg(name: str, *overrides: str) -> dict:
    return compose_plain([f"conditions={name}", *overrides])["conditions"]


def test_every_family_of_a_sweep_is_a_nominal_axis_starting_from_the_baseline() -> None:
    cs = condition_set_from_config(conditions_cfg("robustness"))
    axes = {axis.name: axis for axis in cs.axes}
    assert list(axes) == ["option_order", "labels", "format", "instruction", "spelling", "lexical", "paraphrase",
                          "logical"]  # in the order the families first appear among the conditions
    assert {axis.scale for axis in cs.axes} == {"nominal"}
    assert axes["option_order"].values == ("P0", "reverse", "rotate", "swap_ends", "shuffle")
    assert axes["option_order"].attributes == {"order"} and axes["spelling"].attributes == {"instruction", "stem"}
    assert axes["labels"].steps() == [("P0", "numbers"), ("P0", "lower"), ("P0", "roman"), ("P0", "symbols")]
    assert cs.levels["roman"] == {**{a: "P0" for a in axes}, "labels": "roman"}
    assert cs.levels["P0"] == {a: "P0" for a in axes}
    assert cs.grid == ()


def test_typo_dose_is_an_ordinal_axis_from_p1_stepping_from_each_level_to_the_next() -> None:
    cs = condition_set_from_config(conditions_cfg("typo_dose"))
    assert cs.names == ["P0", "P1", "typos_1", "typos_2", "typos_4", "typos_8"]
    instruction, dose = cs.axes
    assert (instruction.name, instruction.scale, instruction.steps()) == ("instruction", "nominal", [("P0", "P1")])
    assert (dose.name, dose.scale, dose.ordered) == ("typo_dose", "ordinal", True)
    assert dose.steps() == [("P1", "typos_1"), ("typos_1", "typos_2"), ("typos_2", "typos_4"), ("typos_4", "typos_8")]


def test_a_numeric_axis_is_ordered_and_a_nominal_one_is_not() -> None:
    numeric = Axis("dose", "numeric", ("a", "b", "c"), ("a", "b", "c"), frozenset())
    assert numeric.steps() == [("a", "b"), ("b", "c")]
    assert Axis("dose", "nominal", ("a", "b", "c"), ("a", "b", "c"), frozenset()).steps() == [("a", "b"), ("a", "c")]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["conditions.families.typo_dose.scale=interval"], "scale 'interval' is not one of nominal, ordinal, numeric"),
        (["conditions.families.typo_dose.values=[P1,typos_1,typos_2,typos_4]"], "exactly the family's conditions"),
        (["conditions.families.typo_dose.values=[typos_1,P1,typos_2,typos_4,typos_8]"], "must start with its baseline"),
        (["conditions.families.typo_dose.values=[P9,typos_1,typos_2,typos_4,typos_8]"], "must start with its baseline"),
        (["conditions.families.typo_dose.values=[P1,typos_1,typos_1,typos_4,typos_8]"], "repeat a value"),
    ],
)
def test_a_wrong_family_declaration_is_refused_with_the_reason(overrides: list[str], message: str) -> None:
    with pytest.raises(ConditionError, match=message):
        condition_set_from_config(conditions_cfg("typo_dose", *overrides))


def test_an_unknown_family_key_and_a_family_without_conditions_are_refused() -> None:
    cfg = conditions_cfg("typo_dose")
    cfg["families"]["typo_dose"]["order"] = "up"
    with pytest.raises(ConditionError, match=r"a family has unknown keys \['order'\]"):
        condition_set_from_config(cfg)
    cfg = conditions_cfg("typo_dose")
    cfg["families"]["spelling"] = {"scale": "ordinal"}
    with pytest.raises(ConditionError, match=r"declares \['spelling'\], but no condition of the set is of that family"):
        condition_set_from_config(cfg)
