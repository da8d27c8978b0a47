"""prism.conditions.perturbations.shots and conditions=fewshot: demonstrations from the question's draw, and nothing
else, change."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml
from conftest import CONF_DIR, compose_plain

from conditions.perturbations.helpers import base, question
from prism.conditions import condition_set_from_config, render
from prism.conditions.fewshot import demonstrations_needed, label_balance
from prism.conditions.perturbations import PerturbationError
from prism.conditions.perturbations.build import build_prompt
from prism.conditions.perturbations.checks import check_prompt, check_variant
from prism.conditions.perturbations.ops import Library, make_step
from prism.conditions.perturbations.shots import ReverseShots, Shots, ShotsAsTurns, ShuffleShots
from prism.conditions.perturbations.text import Instruct
from prism.conditions.perturbations.variant import SpecError, body_text, to_prompt
from prism.config import StepSpec
from prism.types import Question, Turn

DIRECT = "Answer the following question by selecting the correct option."
LETTER = "Return only the letter of the correct option."


def demonstration(i: int, answer: str = "C") -> Question:
    return Question(f"d{i}", f"Which planet is number {i} in this list?", (f"a{i}", f"b{i}", f"c{i}", f"d{i}"),
                    ("A", "B", "C", "D"), answer, "arc_challenge", "train")


def drawn(n: int = 12) -> Question:
    return replace(question(), demonstrations=tuple(demonstration(i, "ABCD"[i % 4]) for i in range(n)))


def instructed(q: Question | None = None):
    return Instruct("direct", DIRECT).apply(base(q or drawn()), 0)


def test_shots_take_the_first_k_of_the_draw_so_the_levels_nest_and_change_only_the_demonstrations() -> None:
    before = instructed()
    shown = {k: Shots(k).apply(before, 0) for k in (1, 2, 4, 8)}
    for k, after in shown.items():
        assert before.changed_fields(after) == {"demonstrations"} and Shots(k).changes == {"shots"}
        assert [d.question_id for d in after.demonstrations] == [f"d{i}" for i in range(k)]
        assert Shots(k).verify(before, after) is None
    assert shown[4].demonstrations[:2] == shown[2].demonstrations  # shots_4 keeps shots_2's and adds two
    other = Shots(4, "second", 4).apply(before, 0)
    assert [d.question_id for d in other.demonstrations] == ["d4", "d5", "d6", "d7"]
    assert "too few" in Shots(4, "third", 10).verify(before, Shots(4, "third", 10).apply(before, 0))
    assert "already shows demonstrations" in Shots(2).verify(shown[4], Shots(2).apply(shown[4], 0))


def test_inline_demonstrations_are_shown_like_the_question_and_answered_with_their_label() -> None:
    q = drawn()
    after = Shots(2).apply(instructed(q), 0)
    prompt = to_prompt(after, "shots_2", "1")
    first = ("Which planet is number 0 in this list?\n\nA. a0\nB. b0\nC. c0\nD. d0\n\n" + LETTER + "\nA")
    second = ("Which planet is number 1 in this list?\n\nA. a1\nB. b1\nC. c1\nD. d1\n\n" + LETTER + "\nB")
    assert prompt.text == f"{DIRECT}\n\n{first}\n\n{second}\n\n{body_text(after)}"
    assert prompt.earlier_turns == () and prompt.text.endswith(LETTER)
    assert (prompt.displayed_labels, prompt.canonical_labels, prompt.displayed_options) == (
        q.labels, q.labels, q.options)  # the question, its options, labels and key are P1's
    assert check_prompt(after, prompt, q) is None


def test_demonstrations_in_turns_put_the_question_alone_in_the_last_user_turn() -> None:
    q = drawn()
    inline = Shots(4).apply(instructed(q), 0)
    step = ShotsAsTurns()
    after = step.apply(inline, 0)
    assert inline.changed_fields(after) == {"shot_turns"} and step.changes == {"shot_turn"}
    assert step.verify(inline, after) is None
    prompt = to_prompt(after, "shots_4_multiturn", "1")
    assert prompt.text == body_text(after)  # the raw record's prompt: the question alone
    roles = [t.role for t in prompt.turns]
    assert roles == ["user", "assistant"] * 4 + ["user"]
    assert prompt.turns[0].content.startswith(f"{DIRECT}\n\nWhich planet is number 0")
    assert [t.content for t in prompt.turns[1:8:2]] == ["A", "B", "C", "D"]
    assert check_prompt(after, prompt, q) is None
    assert "no demonstrations to move" in step.verify(instructed(q), step.apply(instructed(q), 0))
    # A rendering whose turns are not the variant's is caught.
    swapped = replace(prompt, earlier_turns=(prompt.earlier_turns[0], Turn("assistant", "D"),
                                             *prompt.earlier_turns[2:]))
    assert check_prompt(after, swapped, q) is not None


def test_reordering_shows_the_same_demonstrations_in_another_order() -> None:
    shown = Shots(4).apply(instructed(), 0)
    reversed_ = ReverseShots().apply(shown, 0)
    assert reversed_.demonstrations == shown.demonstrations[::-1] and ReverseShots().verify(shown, reversed_) is None
    for seed in range(30):
        shuffled = ShuffleShots().apply(shown, seed)
        assert ShuffleShots().verify(shown, shuffled) is None
        assert shuffled.demonstrations not in (shown.demonstrations, shown.demonstrations[::-1])
        assert sorted(d.question_id for d in shuffled.demonstrations) == ["d0", "d1", "d2", "d3"]
    one = Shots(1).apply(instructed(), 0)
    assert "at least two" in ReverseShots().verify(one, ReverseShots().apply(one, 0))


def test_a_demonstration_outside_the_draw_or_the_question_itself_fails_the_check() -> None:
    q = drawn()
    variant = Shots(2).apply(instructed(q), 0)
    stranger = replace(variant, demonstrations=(demonstration(99), variant.demonstrations[1]))
    assert "not one of the question's frozen draw" in check_variant(q, stranger, "Return only the {kind} of the "
                                                                       "correct option.")
    itself = replace(q, demonstrations=(replace(q, question_id="copy", split="train"),))
    shown = Shots(1).apply(instructed(itself), 0)
    assert "the question itself" in check_variant(itself, shown, "Return only the {kind} of the correct option.")
    twice = replace(variant, demonstrations=(variant.demonstrations[0],) * 2)
    assert "shown twice" in check_variant(q, twice, "Return only the {kind} of the correct option.")
    with pytest.raises(PerturbationError, match="too few"):
        build_prompt(question(), "shots_1", [Instruct("direct", DIRECT), Shots(1)], base().format,
                     "Return only the {kind} of the correct option.", 0, "1")


def test_the_shots_op_reads_its_count_and_draw_from_the_set() -> None:
    library = Library(closing="c", draws={"second": 4})
    assert make_step(StepSpec(op="shots", count=4, to="second"), library) == Shots(4, "second", 4)
    assert make_step(StepSpec(op="shots", count=2), library) == Shots(2)
    with pytest.raises(SpecError, match="needs 'count:'"):
        make_step(StepSpec(op="shots"), library)
    with pytest.raises(SpecError, match="names no entry of draws"):
        make_step(StepSpec(op="shots", count=1, to="nowhere"), library)
    with pytest.raises(SpecError, match="whole number"):
        make_step(StepSpec(op="shots", count=1, to="bad"), Library(closing="c", draws={"bad": -1}))


def fewshot():
    return condition_set_from_config(compose_plain(["conditions=fewshot"])["conditions"])


def test_conditions_fewshot_is_p1_and_four_few_shot_families() -> None:
    cs = fewshot()
    assert cs.baseline == "P1" and cs.names == ["P1", "shots_1", "shots_2", "shots_4", "shots_8", "shots_4_reversed",
                                                "shots_4_shuffled", "shots_4_draw2", "shots_4_draw3",
                                                "shots_4_multiturn"]
    axes = {a.name: a for a in cs.axes}
    assert (axes["shots"].scale, axes["shots"].values) == ("ordinal",
                                                           ("P1", "shots_1", "shots_2", "shots_4", "shots_8"))
    for family, values in (("shot_order", ("shots_4", "shots_4_reversed", "shots_4_shuffled")),
                           ("shot_draw", ("shots_4", "shots_4_draw2", "shots_4_draw3")),
                           ("shot_turns", ("shots_4", "shots_4_multiturn"))):
        assert (axes[family].scale, axes[family].values) == ("nominal", values)
    assert axes["shots"].attributes == {"instruction", "shots"}
    assert axes["shot_turns"].attributes == {"instruction", "shots", "shot_turn"}
    assert demonstrations_needed(cs) == 12  # shots_8, and draw3's four from the 9th


def test_every_fewshot_condition_keeps_p1s_question_and_shows_only_its_own_demonstrations() -> None:
    cs = fewshot()
    q = drawn()
    by_name = {c.name: render(q, c, cs) for c in cs.conditions}
    p1 = by_name["P1"]
    for name, prompt in by_name.items():
        assert (prompt.displayed_labels, prompt.canonical_labels, prompt.displayed_options) == (
            p1.displayed_labels, p1.canonical_labels, p1.displayed_options), name
        assert prompt.text.endswith(p1.text.removeprefix(f"{DIRECT}\n\n")), name
    for k in (1, 2, 4, 8):
        text = by_name[f"shots_{k}"].text
        assert all(f"number {i} in" in text for i in range(k)) and f"number {k} in" not in text
    assert "number 4 in" in by_name["shots_4_draw2"].text and "number 0 in" not in by_name["shots_4_draw2"].text
    assert "number 8 in" in by_name["shots_4_draw3"].text and "number 7 in" not in by_name["shots_4_draw3"].text
    assert by_name["shots_4_multiturn"].text == p1.text.removeprefix(f"{DIRECT}\n\n")
    rows = {row["condition"]: row for row in label_balance([q], cs)}
    assert set(rows) == set(cs.names) - {"P1"}
    assert rows["shots_4"]["answer_A"] == rows["shots_4"]["answer_D"] == 0.25 and rows["shots_4"]["majority_share"] == 0
    assert rows["shots_1"]["majority_share"] == 1.0 and rows["shots_1"]["majority_is_key"] == 0.0  # A; the key is B


def test_the_fewshot_set_repeats_p0s_closing_and_layout_exactly() -> None:
    shared = yaml.safe_load((CONF_DIR / "conditions" / "shared" / "p0.yaml").read_text())
    cfg = compose_plain(["conditions=fewshot"])["conditions"]
    assert cfg["closing"] == shared["closing"] and cfg["base_format"] == shared["base_format"]


def test_shots_crosses_labels_in_a_grid_and_the_demonstrations_wear_the_cells_labels() -> None:
    cs = condition_set_from_config(compose_plain(["conditions=fewshot_grid",
                                                  "conditions.axes=[shots,labels]"])["conditions"])
    assert len(cs.conditions) == 5 * 5
    shots_axis = next(a for a in cs.axes if a.name == "shots")
    assert shots_axis.values == ("P0", "shots_1", "shots_2", "shots_4", "shots_8") and shots_axis.ordered
    q = drawn()
    cell = render(q, next(c for c in cs.conditions if c.name == "shots.shots_2__labels.numbers"), cs)
    assert "\n1. a0\n2. b0\n" in cell.text and "Return only the number of the correct option.\n1\n\n" in cell.text
    assert "Return only the number of the correct option.\n2\n\n" in cell.text  # d1's key B shown as 2
    assert cell.displayed_labels == ("1", "2", "3", "4")
    with pytest.raises(Exception, match=r"shots_4"):  # shot_order starts from shots_4, no grid axis
        condition_set_from_config(compose_plain(["conditions=fewshot_grid", "conditions.axes=[shot_order,labels]"])
                                  ["conditions"])
