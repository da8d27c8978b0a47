"""Every condition set and perturbation family on questions with 2 to 10 options.

Label sets cover a count by their first labels; one too short for the frozen questions (the four symbols) is
refused before anything is rendered, naming the condition, its family and the count.
"""

from __future__ import annotations

import copy
import functools
import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import CONF_DIR, compose_config, compose_plain

from prism.conditions import ConditionError, check_option_counts, condition_set_from_config, render, render_keyed
from prism.conditions.fewshot import demonstrations_needed
from prism.conditions.perturbations.labels import label_kind
from prism.types import Question

SETS = sorted(p.stem for p in (CONF_DIR / "conditions").glob("*.yaml"))
WITH_SYMBOLS = {"grid", "fewshot_grid", "labels", "robustness"}


def question(count: int, answer: int) -> Question:
    labels = tuple("ABCDEFGHIJ"[:count])
    options = tuple(f"option number {i + 1} text" for i in range(count))
    return Question(f"q{count}", "A ball rolls 20 meters in 5 seconds. Which choice fits?", options, labels,
                    labels[answer], "synthetic", "test")


@functools.cache
def _composed(name: str) -> dict:
    return compose_plain([f"conditions={name}"])["conditions"]


def conditions(name: str, drop_symbols: bool = False) -> dict:
    cfg = copy.deepcopy(_composed(name))
    if drop_symbols:
        cfg["variants"] = {k: v for k, v in cfg["variants"].items() if k != "symbols"}
    return cfg


@pytest.mark.parametrize("name", SETS)
@pytest.mark.parametrize("count", range(2, 11))
def test_every_condition_renders_any_count_from_2_to_10(name: str, count: int) -> None:
    cs = condition_set_from_config(conditions(name, drop_symbols=name in WITH_SYMBOLS))
    need = demonstrations_needed(cs)
    for answer in {0, count // 2, count - 1}:
        q = question(count, answer)
        # A few-shot set's demonstrations: other questions with the same option count, their keys spread.
        demos = tuple(replace(question(count, (answer + k) % count), question_id=f"d{k}", question=f"Demo {k}?")
                      for k in range(need))
        q = replace(q, demonstrations=demos)
        check_option_counts(cs, [q])
        correct = q.options[answer]
        for condition in cs.conditions:
            prompt, key = render_keyed(q, condition, cs)
            assert len(prompt.displayed_labels) == count == len(set(prompt.displayed_labels))
            if key != q.answer:  # a causal step: the correct option replaced by one added last, the new key
                assert Counter(prompt.displayed_options) - Counter(q.options) == Counter([prompt.displayed_options[-1]])
                assert correct not in prompt.displayed_options and prompt.canonical_labels[-1] == key
                assert key == "ABCDEFGHIJK"[count] and key not in q.labels
            else:
                assert Counter(prompt.displayed_options) == Counter(q.options)
                assert sorted(prompt.canonical_labels) == sorted(q.labels)
                position = prompt.canonical_labels.index(q.answer)
                assert prompt.displayed_options[position] == correct
            kind = label_kind(prompt.displayed_labels)
            if condition.cloze_target is None:  # lm-eval's own forms (conditions=cloze) close with "Answer:"
                assert kind is not None and kind in prompt.text.rsplit("\n", 1)[-1]


@pytest.mark.parametrize("name", sorted(WITH_SYMBOLS))
def test_the_symbol_set_refuses_more_than_four_options_naming_family_and_count(name: str) -> None:
    cs = condition_set_from_config(conditions(name))
    check_option_counts(cs, [question(c, 0) for c in (2, 3, 4)])
    with pytest.raises(ConditionError, match=r"condition 'symbols' \(family 'labels'\): label set 'symbols' has 4 "
                                             r"labels, but the frozen questions include 5-option questions "
                                             r"\(counts \[4, 5, 10\]\)\. No model was asked anything"):
        check_option_counts(cs, [question(c, 0) for c in (4, 5, 10)])


def test_ten_options_show_the_first_ten_labels_of_each_set() -> None:
    cs = condition_set_from_config(conditions("labels", drop_symbols=True))
    shown = {c.name: render(question(10, 9), c, cs).displayed_labels for c in cs.conditions}
    assert shown["P0"] == tuple("ABCDEFGHIJ")
    assert shown["numbers"] == tuple(str(i) for i in range(1, 11))
    assert shown["lower"] == tuple("abcdefghij")
    assert shown["roman"] == ("i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix", "x")


def test_a_run_whose_label_set_cannot_cover_its_questions_stops_before_the_model_is_asked(tmp_path: Path) -> None:
    from conftest import REPO_ROOT, run_overrides

    from prism.run.pipeline import run

    fixtures = REPO_ROOT / "tests" / "data"
    replay = tmp_path / "replay.jsonl"  # a valid model that is never asked
    replay.write_text(json.dumps({"question_id": "x", "condition": "P0", "response": "A"}) + "\n", encoding="utf-8")
    cfg = compose_config([*run_overrides(tmp_path, fixtures), "dataset=commonsense_qa", "dataset.n=3",
                          "conditions=labels", "model=replay", f"model.path={replay}"])
    with pytest.raises(ConditionError, match=r"'symbols' \(family 'labels'\).*5-option questions"):
        run(cfg, output_dir=tmp_path / "out")
    assert not (tmp_path / "out" / "responses").exists()
