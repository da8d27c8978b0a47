"""prism.conditions.grid: every combination of the named axes, named by its values, composed end to end and checked."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from conftest import compose_plain

from prism.conditions import ConditionError, condition_set_from_config, render, render_all
from prism.conditions.grid import Part, render_cell
from prism.conditions.perturbations import PerturbationError
from prism.conditions.perturbations.step import permute
from prism.conditions.perturbations.variant import Attribute, Variant
from prism.questions import freeze_question_set

LABELS = ["numbers", "lower", "roman", "symbols"]
ORDERS = ["reverse", "rotate", "swap_ends", "shuffle"]


def grid_cfg(*overrides: str, axes: str = "[labels,option_order]") -> dict:
    return compose_plain(["conditions=grid", f"conditions.axes={axes}", *overrides])["conditions"]


@pytest.fixture(scope="module")
def questions(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list:
    return list(freeze_question_set("arc_challenge", "test", 6, 0, data_dir, tmp_path_factory.mktemp("f")).questions)


def test_every_combination_is_a_condition_named_by_its_non_baseline_values() -> None:
    cs = condition_set_from_config(grid_cfg())
    assert cs.grid == ("labels", "option_order") and len(cs.conditions) == 25 and cs.names[0] == "P0"
    expected = ["P0", *(f"option_order.{o}" for o in ORDERS)]
    for label in LABELS:
        expected += [f"labels.{label}", *(f"labels.{label}__option_order.{o}" for o in ORDERS)]
    assert cs.names == expected
    assert cs.families["labels.numbers__option_order.reverse"] == "labels__option_order"
    assert cs.families["labels.roman"] == "labels" and cs.families["P0"] == "baseline"
    assert cs.levels["labels.numbers__option_order.reverse"] == {"labels": "numbers", "option_order": "reverse"}
    assert cs.levels["option_order.shuffle"] == {"labels": "P0", "option_order": "shuffle"}
    labels, order = cs.axes
    assert labels.values == ("P0", *LABELS) and labels.conditions == ("P0", *(f"labels.{v}" for v in LABELS))
    assert order.steps()[0] == ("P0", "option_order.reverse")


def test_each_cell_shows_its_labels_and_its_order_and_the_key_maps_through_both(questions: list) -> None:
    cs = condition_set_from_config(grid_cfg())
    robustness = condition_set_from_config(compose_plain(["conditions=robustness"])["conditions"])
    sweep = {c.name: c for c in robustness.conditions}
    for q in questions:
        prompts = {c.name: render(q, c, cs) for c in cs.conditions}
        for label in LABELS:
            for order in ORDERS:
                cell = prompts[f"labels.{label}__option_order.{order}"]
                alone_labels = render(q, sweep[label], robustness)
                alone_order = render(q, sweep[order], robustness)
                assert cell.displayed_labels == alone_labels.displayed_labels
                # The same permutation as the option_order condition alone (its seed travels with the step).
                assert (cell.canonical_labels, cell.displayed_options) == (alone_order.canonical_labels,
                                                                           alone_order.displayed_options)
                shown = cell.displayed_labels[cell.canonical_labels.index(q.answer)]
                assert f"{shown}. {q.options[q.labels.index(q.answer)]}" in cell.text
        # A single-axis cell is exactly the sweep's condition.
        assert prompts["option_order.shuffle"].text == render(q, sweep["shuffle"], robustness).text
        assert prompts["labels.roman"].text == render(q, sweep["roman"], robustness).text


def test_three_axes_compose_and_the_grid_is_rendered_for_every_question(questions: list) -> None:
    cs = condition_set_from_config(grid_cfg(axes="[labels,option_order,format]"))
    assert len(cs.conditions) == 5 * 5 * 4
    prompts = render_all(questions[:3], cs)
    assert len(prompts) == 100 * 3
    xml = next(p for p in prompts if p.condition == "labels.lower__option_order.reverse__format.xml_tags")
    assert xml.text.startswith("<question>") and xml.displayed_labels[:2] == ("a", "b")


@pytest.mark.parametrize(
    ("axes", "overrides", "message"),
    [
        ("[labels,colour]", [], r"names \['colour'\], which are not axes of this set"),
        ("[labels,labels]", [], "names an axis twice"),
        ("[spelling,paraphrase]", [], r"both change \['instruction'\]"),
        # Removing the correct option and reordering the options both move the options and their labels.
        ("[missing_answer,option_order]", [], r"axes 'missing_answer' and 'option_order' both change "
                                              r"\['canonical', 'options'\]"),
        ("[labels,option_order]", ["conditions.max_conditions=24"],
         r"has 25 conditions \(5 x 5\), more than conditions.max_conditions=24; .*conditions.max_conditions=25"),
        ("[labels,option_order,format,logical]", [], r"has 300 conditions \(5 x 5 x 4 x 3\)"),
        ("[labels,option_order]", ["conditions.max_conditions=0"], "must be at least 1"),
    ],
)
def test_grids_that_cannot_be_crossed_or_are_too_large_are_refused(axes: str, overrides: list[str],
                                                                     message: str) -> None:
    with pytest.raises(ConditionError, match=message):
        condition_set_from_config(grid_cfg(*overrides, axes=axes))


def test_axes_of_templates_or_not_starting_from_the_baseline_cannot_be_crossed() -> None:
    with pytest.raises(ConditionError, match="made of template conditions"):
        condition_set_from_config(compose_plain(["conditions=prism", "conditions.axes=[instruction]"])["conditions"])
    with pytest.raises(ConditionError, match="starts from 'P1', not the baseline 'P0'"):
        condition_set_from_config(compose_plain(["conditions=typo_dose", "conditions.axes=[typo_dose]"])
                                  ["conditions"])


@dataclass(frozen=True)
class LabelAwareOrder:
    """A broken order step: it reverses under letters but rotates under any other labels."""

    name: str = "label_aware"
    changes: frozenset[Attribute] = frozenset({"order"})

    def apply(self, variant: Variant, seed: int) -> Variant:
        n = len(variant.options)
        order = range(n - 1, -1, -1) if variant.labels[0] == "A" else [(p - 1) % n for p in range(n)]
        return permute(variant, order)

    def verify(self, before: Variant, after: Variant) -> str | None:
        return None


def test_a_step_that_acts_otherwise_in_a_cell_than_alone_is_caught(questions: list) -> None:
    cs = condition_set_from_config(grid_cfg())
    cell = next(c for c in cs.conditions if c.name == "labels.numbers__option_order.reverse")
    broken_part = Part("option_order", "reverse", (LabelAwareOrder(),), (("reverse", 0),), frozenset({"order"}))
    broken = replace(cell, steps=(*cell.parts[0].steps, LabelAwareOrder()), keys=(*cell.parts[0].keys, ("reverse", 0)),
                     parts=(cell.parts[0], broken_part))
    with pytest.raises(PerturbationError,
                       match=r"composition: check failed: axis 'option_order' \(reverse\) shows another canonical"):
        render_cell(questions[0], broken, cs)
    # A part that moves an attribute no axis of the cell declares is caught too.
    sneaky = replace(cell.parts[1], attributes=frozenset({"format"}))
    with pytest.raises(PerturbationError, match=r"changed \['canonical', 'options'\], which none of its axes declares"):
        render_cell(questions[0], replace(cell, parts=(cell.parts[0], sneaky)), cs)
