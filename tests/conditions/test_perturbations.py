"""The perturbation condition sets as configured: names, the shared baseline, and properties over many
real and generated questions and seeds."""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import CONF_DIR, REPO_ROOT, compose_config, compose_plain
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.conditions import ConditionError, condition_set_from_config, render
from prism.conditions.fewshot import demonstrations_needed
from prism.parsing import parse_response
from prism.questions import load_questions
from prism.types import Question

FAMILY_SETS = {
    "option_order": {"option_order": ["reverse", "rotate", "swap_ends", "shuffle"]},
    "labels": {"labels": ["numbers", "lower", "roman", "symbols"]},
    "format": {"format": ["paren_labels", "fields_upper", "xml_tags"]},
    "spelling": {"instruction": ["P1"], "spelling": ["typos_light", "typos_heavy"]},
    "lexical": {"instruction": ["P1"], "lexical": ["synonyms_one", "synonyms_all"]},
    "paraphrase": {"instruction": ["P1"], "paraphrase": ["paraphrase_pick", "paraphrase_find"]},
    "logical": {"instruction": ["P1"], "logical": ["not_incorrect", "conditional"]},
}
CLOSINGS = {
    ("A", "B", "C", "D"): "Return only the letter of the correct option.",
    ("a", "b", "c", "d"): "Return only the letter of the correct option.",
    ("1", "2", "3", "4"): "Return only the number of the correct option.",
    ("i", "ii", "iii", "iv"): "Return only the Roman numeral of the correct option.",
    ("@", "#", "&", "%"): "Return only the symbol of the correct option.",
}
FINGERPRINTS = REPO_ROOT / "tests" / "data" / "condition_fingerprints.json"


def conditions_cfg(name: str, *overrides: str) -> dict:
    return compose_plain([f"conditions={name}", *overrides])["conditions"]


@pytest.fixture(scope="module")
def robustness() -> dict:
    return conditions_cfg("robustness")


@pytest.fixture(scope="module")
def real_questions(data_dir: Path) -> list[Question]:
    """Every eligible ARC-Challenge and SciQ test question."""
    found: list[Question] = []
    for dataset in ("arc_challenge", "sciq"):
        found += load_questions(dataset, "test", data_dir=data_dir).questions
    return found


def sample_question(qid: str = "q1") -> Question:
    return Question(qid, "A ball rolls 20 meters in 5 seconds. Which quantity describes how fast the ball moves?",
                    ("mass", "speed", "weight", "volume"), ("A", "B", "C", "D"), "B", "arc_challenge", "test")


@pytest.mark.parametrize("name", sorted(FAMILY_SETS))
def test_each_family_set_is_p0_plus_its_named_variants(name: str) -> None:
    cs = condition_set_from_config(conditions_cfg(name))
    expected = {"baseline": ["P0"], **FAMILY_SETS[name]}
    assert cs.name == name and cs.baseline == "P0" and cs.template_version
    assert cs.names == [n for names in expected.values() for n in names]
    assert {f: [n for n, fam in cs.families.items() if fam == f] for f in expected} == expected


def test_robustness_is_every_family_together() -> None:
    cs = condition_set_from_config(conditions_cfg("robustness"))
    expected = {"baseline": ["P0"]}
    for families in FAMILY_SETS.values():
        for family, names in families.items():
            expected.setdefault(family, [])
            expected[family] += [n for n in names if n not in expected[family]]
    assert {f: [n for n, fam in cs.families.items() if fam == f] for f in expected} == expected
    assert len(cs.names) == 21 and cs.name == "robustness"


@pytest.mark.parametrize("name", [*sorted(FAMILY_SETS), "robustness"])
def test_p0_and_p1_render_exactly_as_in_the_prism_set(name: str, real_questions: list[Question]) -> None:
    prism = condition_set_from_config(conditions_cfg("prism"))
    cs = condition_set_from_config(conditions_cfg(name))
    mine = {c.name: c for c in cs.conditions}
    theirs = {c.name: c for c in prism.conditions}
    for q in real_questions[::400]:
        for shared in {"P0", "P1"} & set(mine):
            assert render(q, mine[shared], cs).text == render(q, theirs[shared], prism).text


def test_the_set_seed_is_the_run_seed_and_moves_only_seeded_steps() -> None:
    assert conditions_cfg("robustness", "seed=5")["seed"] == 5
    zero = condition_set_from_config(conditions_cfg("robustness"))
    five = condition_set_from_config(conditions_cfg("robustness", "seed=5"))
    questions = [sample_question(f"q{i}") for i in range(12)]
    differs = set()
    for c0, c5 in zip(zero.conditions, five.conditions, strict=True):
        texts0 = [render(q, c0, zero).text for q in questions]
        assert texts0 == [render(q, c0, zero).text for q in questions]  # same seed, same prompts
        if texts0 != [render(q, c5, five).text for q in questions]:
            differs.add(c0.name)
    assert differs == {"shuffle", "typos_light", "typos_heavy", "synonyms_one", "synonyms_all"}


def test_misspelled_keys_fail_in_yaml_overrides_and_added_keys() -> None:
    from hydra.errors import ConfigCompositionException
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError

    from prism.config import ConditionsConfig

    with pytest.raises(ConfigKeyError):
        OmegaConf.merge(OmegaConf.structured(ConditionsConfig), {"variants": {"x": {"family": "f", "step": []}}})
    with pytest.raises(ConfigKeyError):
        OmegaConf.merge(OmegaConf.structured(ConditionsConfig), {"label_set": {}})
    with pytest.raises(ConfigCompositionException):
        compose_config(["conditions=option_order", "conditions.variants.reverse.famly=x"])
    added = conditions_cfg("option_order", "+conditions.variants.reverse.steps.0.too=x")
    with pytest.raises(ConditionError, match=r"a step has unknown keys \['too'\]"):
        condition_set_from_config(added)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("conditions.variants.numbers.steps.0.to=digits", "names no entry of label_sets"),
        ("conditions.variants.numbers.steps.0.op=relabell", "unknown step op 'relabell'"),
        ("conditions.variants.numbers.family=two/parts", "family 'two/parts' may use only"),
    ],
)
def test_a_wrong_step_spec_is_refused_when_the_set_is_built(override: str, message: str) -> None:
    with pytest.raises(ConditionError, match=message):
        condition_set_from_config(conditions_cfg("labels", override))


def check_prompts(q: Question, cs) -> None:
    """Every condition of ``cs`` on ``q``: what must hold from the outside, whatever the steps do."""
    families = cs.families
    correct = q.options[q.labels.index(q.answer)]
    for condition in cs.conditions:
        prompt = render(q, condition, cs)
        assert prompt == render(q, condition, cs)
        assert Counter(prompt.displayed_options) == Counter(q.options)
        assert sorted(prompt.canonical_labels) == sorted(q.labels)
        position = prompt.canonical_labels.index(q.answer)
        shown = prompt.displayed_labels[position]
        assert prompt.displayed_options[position] == correct
        assert prompt.canonical_for(shown) == q.answer
        assert parse_response(shown, prompt.displayed_labels, prompt.displayed_options).displayed == shown
        assert prompt.text.endswith(CLOSINGS[prompt.displayed_labels])
        for text in q.options:
            assert text in prompt.text
        family = families[condition.name]
        if family != "option_order":
            assert prompt.canonical_labels == q.labels
        if family != "labels":
            assert prompt.displayed_labels == q.labels
        if family != "spelling":
            assert q.question.strip() in prompt.text


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), seed=st.integers(0, 2**32))
def test_properties_hold_on_real_questions_and_seeds(data, seed: int, real_questions, robustness) -> None:
    q = data.draw(st.sampled_from(real_questions))
    check_prompts(q, condition_set_from_config({**robustness, "seed": seed}))


_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)


@st.composite
def generated_questions(draw) -> Question:
    stem = draw(st.one_of(_TEXT, st.sampled_from(["Heat 20 grams of water by 5 degrees. Which TERM fits {x}?",
                                                   "${seed} {question} {options} {closing} {kind} {label} {text}"])))
    options = draw(st.lists(st.text(min_size=1, max_size=30).map(str.strip).filter(bool), min_size=4, max_size=4,
                            unique=True))
    return Question("gen", stem if stem.strip() else "?", tuple(options), ("A", "B", "C", "D"),
                    draw(st.sampled_from("ABCD")), "arc_challenge", "test")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=generated_questions(), seed=st.integers(0, 2**32))
def test_properties_hold_on_generated_questions(q: Question, seed: int, robustness) -> None:
    check_prompts(q, condition_set_from_config({**robustness, "seed": seed}))


def _with_demonstrations(q: Question, need: int) -> Question:
    """``q`` with a draw of ``need`` fixed demonstrations (for the sets that show them, conditions=fewshot)."""
    shots = tuple(replace(sample_question(f"d{i}"), question=f"Which of these is demonstration number {i}?",
                          answer="ABCD"[i % 4], split="train") for i in range(need))
    return replace(q, demonstrations=shots)


def _fingerprint(name: str) -> dict[str, str]:
    cs = condition_set_from_config(conditions_cfg(name))
    need = demonstrations_needed(cs)
    questions = [_with_demonstrations(sample_question(f"q{i}"), need) for i in range(3)]
    prompts = [render(q, c, cs) for c in cs.conditions for q in questions]
    # A prompt of several turns counts every turn (a changed system prompt is a changed prompt); a one-turn
    # prompt its text, as before prompts had turns, so the recorded fingerprints of those sets still hold.
    texts = [json.dumps(p.messages()) if p.earlier_turns else p.text for p in prompts]
    return {"template_version": cs.template_version, "sha256": hashlib.sha256("\0".join(texts).encode()).hexdigest()}


def test_a_set_whose_prompts_change_bumps_its_template_version() -> None:
    names = sorted(p.stem for p in (CONF_DIR / "conditions").glob("*.yaml"))
    current = {name: _fingerprint(name) for name in names}
    if os.environ.get("PRISM_UPDATE_FINGERPRINTS"):
        FINGERPRINTS.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    recorded = json.loads(FINGERPRINTS.read_text(encoding="utf-8"))
    for name in names:
        now, then = current[name], recorded.get(name)
        assert then is not None, f"no fingerprint for conditions={name}: run with PRISM_UPDATE_FINGERPRINTS=1"
        if now["template_version"] == then["template_version"]:
            assert now["sha256"] == then["sha256"], (
                f"conditions={name} renders different prompts but its template_version is still "
                f"{now['template_version']!r}: bump it (a set that includes changed files changes too), then "
                "rerun this test with PRISM_UPDATE_FINGERPRINTS=1")
        else:
            assert now["sha256"] != then["sha256"] or now == then, f"{name}: version bumped without a change"
            pytest.fail(f"conditions={name} has a new template_version: rerun with PRISM_UPDATE_FINGERPRINTS=1")
