"""conditions=cloze: lm-eval's own ARC (C0) and MMLU (C1) prompts beside P0-P4, each fixing its continuation."""

from __future__ import annotations

import pytest
from conftest import compose_config

from prism.conditions import ConditionError, condition_set_from_config, render
from prism.types import Question

ARC = Question("arc-1", "Which of these is a renewable resource?", ("coal", "wind", "oil", "gas"),
               ("A", "B", "C", "D"), "B", "arc_challenge", "test")
MMLU = Question("mmlu-1", " What is 2 + 2? ", ("3", "4", "5", "6"), ("A", "B", "C", "D"), "B", "mmlu", "test",
                group="elementary_mathematics")


def test_c0_is_lm_evals_arc_prompt_and_c1_its_mmlu_prompt_with_the_subject_line_where_there_is_one() -> None:
    cloze = condition_set_from_config(compose_config(["conditions=cloze"]).conditions)
    assert cloze.names == ["P0", "P1", "P2", "P3", "P4", "C0", "C1"]
    conditions = {c.name: c for c in cloze.conditions}
    c0 = render(ARC, conditions["C0"], cloze)
    assert c0.text == "Question: Which of these is a renewable resource?\nAnswer:" and c0.cloze_target == "text"
    c1 = render(MMLU, conditions["C1"], cloze)
    assert c1.text == ("The following are multiple choice questions (with answers) about elementary mathematics.\n\n"
                       "What is 2 + 2?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer:")
    assert c1.cloze_target == "label"
    assert render(ARC, conditions["C1"], cloze).text.startswith("Which of these")  # ARC has no subject
    p0 = render(ARC, conditions["P0"], cloze)
    prism = condition_set_from_config(compose_config(["conditions=prism"]).conditions)
    assert p0.text == render(ARC, prism.conditions[0], prism).text and p0.cloze_target is None


def test_a_cloze_condition_with_a_bad_target_or_a_label_target_without_options_is_refused() -> None:
    base = {"name": "x", "template_version": "1", "closing": "Return only the letter.", "baseline": "P0",
            "conditions": [{"name": "P0", "template": "{question}\n\n{options}\n\n{closing}"}]}
    bad = {**base, "conditions": [*base["conditions"], {"name": "C9", "template": "{question}\nAnswer:",
                                                        "cloze_target": "label"}]}
    with pytest.raises(ConditionError, match="label continuation needs the options shown"):
        condition_set_from_config(bad)
    worse = {**base, "conditions": [*base["conditions"], {"name": "C9", "template": "{question}",
                                                          "cloze_target": "word"}]}
    with pytest.raises(ConditionError, match="must be label or text"):
        condition_set_from_config(worse)
