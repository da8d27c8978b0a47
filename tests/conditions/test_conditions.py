from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from prism.conditions import ConditionError, condition_set_from_config, fill, render, render_all
from prism.types import Question

CONF = Path(__file__).resolve().parents[2] / "prism" / "conf" / "conditions" / "prism.yaml"
CLOSING = "Return only the letter of the correct option."


def load_prism() -> dict:
    return yaml.safe_load(CONF.read_text(encoding="utf-8"))


def question(stem: str = "Which gas do plants absorb?", options=("oxygen", "carbon dioxide", "helium", "neon")):
    return Question("q1", stem, tuple(options), ("A", "B", "C", "D"), "B", "arc_challenge", "test")


def test_prism_set_has_five_conditions_and_the_closing_line() -> None:
    cs = condition_set_from_config(load_prism())
    assert cs.names == ["P0", "P1", "P2", "P3", "P4"]
    assert cs.baseline == "P0"
    assert cs.closing == CLOSING
    assert cs.template_version


def test_every_rendering_ends_with_the_identical_closing_line_and_shows_a_dot_lines() -> None:
    cs = condition_set_from_config(load_prism())
    for c in cs.conditions:
        text = render(question(), c, cs).text
        assert text.splitlines()[-1] == CLOSING
        assert "A. oxygen\nB. carbon dioxide\nC. helium\nD. neon" in text
        assert "Which gas do plants absorb?" in text


def test_renderings_differ_only_outside_the_question_and_options_block() -> None:
    cs = condition_set_from_config(load_prism())
    q1 = question()
    q2 = question("What is the boiling point of water at sea level?", ("50 C", "100 C", "150 C", "200 C"))

    def skeleton(q: Question, text: str) -> str:
        block = "\n".join(f"{lab}. {opt}" for lab, opt in zip(q.labels, q.options, strict=True))
        assert text.count(q.question) == 1 and text.count(block) == 1
        return text.replace(q.question, "<QUESTION>").replace(block, "<OPTIONS>")

    skeletons = []
    for c in cs.conditions:
        s1 = skeleton(q1, render(q1, c, cs).text)
        # The same condition applied to another question changes nothing outside the block ...
        assert s1 == skeleton(q2, render(q2, c, cs).text)
        skeletons.append(s1)
    # ... and the five conditions differ from each other only there.
    assert len(set(skeletons)) == 5
    assert "P0" not in skeletons[0]


def test_p0_has_no_instruction_beyond_the_output_requirement() -> None:
    cs = condition_set_from_config(load_prism())
    p0 = render(question(), cs.conditions[0], cs).text
    assert p0 == f"Which gas do plants absorb?\n\nA. oxygen\nB. carbon dioxide\nC. helium\nD. neon\n\n{CLOSING}"


def test_render_all_is_condition_major_and_prompts_map_back_to_canonical_labels() -> None:
    cs = condition_set_from_config(load_prism())
    qs = [question(), Question("q2", "Stem?", ("w", "x", "y", "z"), ("A", "B", "C", "D"), "A", "sciq", "test")]
    prompts = render_all(qs, cs)
    assert [(p.condition, p.question_id) for p in prompts[:3]] == [("P0", "q1"), ("P0", "q2"), ("P1", "q1")]
    assert prompts[0].canonical_for("C") == "C"
    assert prompts[0].sha256 != prompts[2].sha256


@given(st.text())
def test_dataset_text_is_rendered_literally_never_interpreted(stem: str) -> None:
    cs = condition_set_from_config(load_prism())
    tricky = ("{question}", "${seed}", "{{ x }}", "{% if %}\x00\x1b")
    q = question(stem or "?", tricky)
    text = render(q, cs.conditions[2], cs).text
    assert (stem or "?").strip() in text
    for option in tricky:
        assert f". {option}" in text
    assert text.endswith(CLOSING)


def test_fill_does_not_rescan_substituted_values() -> None:
    assert fill("{question}|{options}", {"question": "{options}", "options": "x", "closing": ""}) == "{options}|x"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["conditions"][1].update(template="{question}\n{options}"), "must contain {closing}"),
        (lambda c: c["conditions"][1].update(template="{closing}\n{question}\n{options}"), "must end with {closing}"),
        (lambda c: c["conditions"][1].update(name="P0"), "repeats condition names"),
        (lambda c: c.update(baseline="P9"), "baseline 'P9'"),
        (lambda c: c.update(conditions=[]), "has no conditions"),
    ],
)
def test_broken_condition_sets_are_refused_with_the_reason(change, message) -> None:
    cfg = load_prism()
    change(cfg)
    with pytest.raises(ConditionError, match=message.replace("{", r"\{").replace("}", r"\}")):
        condition_set_from_config(cfg)


@pytest.mark.parametrize("name", ["..", ".", "a/b", "../P0"])
@pytest.mark.parametrize("field", ["name", "family"])
def test_a_condition_name_or_family_that_cannot_be_a_file_name_is_refused(name: str, field: str) -> None:
    cfg = load_prism()
    cfg["conditions"][1][field] = name
    with pytest.raises(ConditionError, match=r"may use only letters, digits, '_', '.' and '-', and may not be"):
        condition_set_from_config(cfg)
