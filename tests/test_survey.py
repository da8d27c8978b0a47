"""Items without an answer key (survey items) end to end, on synthetic items in the Political Compass schema.

The real survey files have unknown or restrictive licences, so these items are made up here, in the same
schema (``id``, ``statement``, ``options``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import compose, compose_config, run_overrides

from prism.questions import dataset_config, load_questions
from prism.results.metrics import NO_KEY
from prism.results.summary import format_summary
from prism.run.pipeline import run

SCALE = ["Strongly disagree", "Disagree", "Agree", "Strongly agree"]
STATEMENTS = ["Synthetic statement one.", "Synthetic statement two.", "Synthetic statement three."]
CONDITIONS = ["P0", "P1", "P2", "P3", "P4"]


def write_items(directory: Path) -> Path:
    path = directory / "survey.jsonl"
    rows = [{"id": str(i), "statement": text, "options": SCALE} for i, text in enumerate(STATEMENTS)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def survey_overrides(path: Path) -> list[str]:
    return ["dataset=custom", f"dataset.path={path}", "dataset.fields.id=id", "dataset.fields.question=statement",
            "dataset.fields.options=options", "dataset.fields.answer=null", "dataset.answer_format=none",
            "dataset.type=subjective", "dataset.n=3"]


def test_items_without_a_key_load_with_a_null_answer(tmp_path: Path) -> None:
    spec = dataset_config({"name": "custom", "path": str(write_items(tmp_path)), "answer_format": "none",
                                    "type": "subjective",
                                    "fields": {"id": "id", "question": "statement", "options": "options"}})
    loaded = load_questions(spec)
    assert [q.answer for q in loaded.questions] == [None, None, None]
    assert loaded.questions[0].options == tuple(SCALE)
    assert loaded.questions[0].to_dict()["answer"] is None


def test_survey_run_logs_no_accuracy_and_computes_consistency(tmp_path: Path, data_dir: Path) -> None:
    import mlflow

    items = write_items(tmp_path)
    # Statement 0: "Agree" everywhere, once by its text; 1: split 3-2; 2: one UNKNOWN.
    answers = {"0": ["C", "C", "Agree", "C", "C"], "1": ["A", "A", "A", "B", "B"], "2": ["D", "D", "D", "D", "hmm"]}
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps({"question_id": qid, "condition": c, "response": r}) + "\n"
                              for qid, responses in answers.items() for c, r in zip(CONDITIONS, responses,
                                                                                    strict=True)),
                      encoding="utf-8")
    overrides = [*run_overrides(tmp_path, data_dir), *survey_overrides(items), "model=replay",
                 f"model.path={replay}", "model.name=scripted"]
    result = run(compose_config(overrides), output_dir=tmp_path / "out")

    frozen = [json.loads(line) for line in (tmp_path / "out" / "questions" / "frozen.jsonl").read_text().splitlines()]
    assert {row["answer"] for row in frozen} == {None}
    scored = [json.loads(line) for line in (tmp_path / "out" / "results" / "scored.jsonl").read_text().splitlines()]
    assert {(row["correct_answer"], row["correct"]) for row in scored} == {(None, None)}
    assert {row["answer"] for row in scored if row["question_id"] == "0"} == {"C"}  # "Agree" read by its text
    prompts = [json.loads(line)["prompt"] for line in
               (tmp_path / "out" / "responses" / "responses.jsonl").read_text().splitlines()]
    assert all(p.endswith("Return only the letter of the option you choose.") for p in prompts)
    assert not any("correct" in p for p in prompts)

    logged = mlflow.tracking.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").get_run(result.run_id).data.metrics
    for absent in ("accuracy", "conditional_accuracy", "accuracy/P0", "conditional_accuracy/P1",
                   "question_majority_accuracy", "prompt_invariant_incorrect_rate"):
        assert absent not in logged, absent
    assert logged["answer_recovery_rate"] == pytest.approx(14 / 15)
    assert logged["mean_agreement"] == pytest.approx((1 + 3 / 5 + 1) / 3)
    assert logged["answer_unanimous_rate"] == pytest.approx(1 / 3)
    # Consistency with P0: statement 0 4/4, statement 1 2/4, statement 2 3/4.
    assert logged["consistency/instruction"] == pytest.approx((1 + 2 / 4 + 3 / 4) / 3)

    summary = format_summary(result.metrics, CONDITIONS)
    assert f"question majority accuracy:        {NO_KEY}" in summary
    assert f"prompt-invariant incorrect:        {NO_KEY}" in summary
    # The table says why once, in its header, and keeps its columns aligned: "n/a" under accuracy.
    header, first = summary.splitlines()[:2]
    assert f"(accuracy: {NO_KEY})" in header and NO_KEY not in first
    assert first.split() == ["P0", "n/a", first.split()[2], first.split()[3]]
    assert first.index("n/a") + len("n/a") == header.index("accuracy") + len("accuracy")


SETS = sorted(p.stem for p in (Path(__file__).parent.parent / "prism" / "conf" / "conditions").glob("*.yaml"))


@pytest.mark.parametrize("name", SETS)
def test_every_set_asks_survey_items_without_speaking_of_a_correct_option(name: str) -> None:
    from prism.conditions import ConditionError, condition_set_from_config, render
    from prism.conditions.fewshot import conditions_with_demonstrations
    from prism.conditions.perturbations import PerturbationError
    from prism.conditions.perturbations.missing import RemoveAnswer
    from prism.types import Question

    composed = compose_config([f"conditions={name}"]).conditions
    if not composed.subjective.version:
        # A set with no subjective wording (cloze and the few-shot sets: each needs an answer key) is refused.
        with pytest.raises(ConditionError, match="no subjective wording"):
            condition_set_from_config(composed, subjective=True)
        return
    objective = condition_set_from_config(composed)
    cs = condition_set_from_config(composed, subjective=True)
    assert cs.names == objective.names and cs.template_version == f"{objective.template_version}+subjective.1"
    question = Question("0", "Synthetic statement.", tuple(SCALE), tuple("ABCD"), None, "survey", "test")
    closings = set()
    shown = set(conditions_with_demonstrations(cs))
    for condition in cs.conditions:
        if condition.name in shown:
            # Demonstrations are shown answered with their key: survey items have none to draw (the pool loader
            # refuses them before inference, tests/questions/test_demonstrations.py), so none is attached here.
            with pytest.raises(PerturbationError, match="demonstrations"):
                render(question, condition, cs)
            continue
        if any(isinstance(step, RemoveAnswer) for step in condition.steps or ()):
            # The causal step removes the correct option: an item without one is refused, never asked.
            with pytest.raises(PerturbationError, match="no answer key"):
                render(question, condition, cs)
            continue
        text = render(question, condition, cs).text
        assert "correct" not in text.lower(), (condition.name, text)
        closings.add(text.rstrip().splitlines()[-1].split(": ")[-1])  # fields_upper prefixes "ANSWER FORMAT: "
    # One closing line, its label kind adapted by the labels family.
    kinds = {line.removeprefix("Return only the ").removesuffix(" of the option you choose.") for line in closings}
    assert kinds <= {"letter", "number", "Roman numeral", "symbol"}, closings


def test_a_set_without_subjective_wording_is_refused_for_survey_items() -> None:
    from prism.conditions import ConditionError, condition_set_from_config

    cfg = {"name": "bare", "template_version": "1", "closing": "Return only the letter of the correct option.",
           "conditions": [{"name": "P0", "template": "{question}\n{options}\n{closing}"}]}
    with pytest.raises(ConditionError, match="has no subjective wording"):
        condition_set_from_config(cfg, subjective=True)


def test_compare_gives_a_run_without_a_key_no_accuracy_but_its_flip_rate() -> None:
    import pandas as pd

    from prism.compare.tables import ModelCells, accuracy_table, sensitivity_table
    from prism.compare.terminal import format_sensitivity, keyless_models

    frame = pd.DataFrame([("0", "P0", 0, "C"), ("0", "P1", 0, "D"), ("1", "P0", 0, "A"), ("1", "P1", 0, "A")],
                         columns=["question_id", "condition", "repetition", "answer"])
    frame["correct_answer"] = None
    frame["category"] = frame["answer"]
    frame["correct"] = False  # as compare reads a null correct
    frame["recovered"] = True
    model = ModelCells("m", "run-m", ("P0", "P1"), frame)
    accuracy = accuracy_table([model], n_boot=50, seed=0)
    assert accuracy["accuracy"].isna().all() and list(accuracy["n"]) == [2, 2]
    sensitivity = sensitivity_table([model], "P0", n_boot=50, seed=0).set_index("condition")
    assert sensitivity.loc["P1", "flip_rate"] == pytest.approx(1 / 2)
    assert pd.isna(sensitivity.loc["P1", "delta_accuracy"]) and pd.isna(sensitivity.loc["P1", "mcnemar_p"])
    assert keyless_models(accuracy) == {"m"}
    assert NO_KEY in format_sensitivity(sensitivity.reset_index(), {"m"})


def test_the_conditions_that_reorder_an_ordered_scale_are_named() -> None:
    from prism.conditions import condition_set_from_config, reordering_conditions

    robustness = condition_set_from_config(compose_config(["conditions=robustness"]).conditions, subjective=True)
    assert reordering_conditions(robustness) == ["reverse", "rotate", "swap_ends", "shuffle"]
    assert reordering_conditions(condition_set_from_config(compose_config([]).conditions)) == []


def survey_run(tmp_path: Path, data_dir: Path, items: Path, name: str, answers: dict[str, list[str]],
               *extra: str) -> str:
    """A scripted replay run of ``name`` on the synthetic survey items; each line carries label probabilities."""
    replay = tmp_path / f"{name}.jsonl"
    lines = []
    for qid, responses in answers.items():
        for condition, response in zip(CONDITIONS, responses, strict=True):
            probs = {label: 0.1 for label in "ABCD"}
            probs[response if response in probs else "A"] = 0.7
            lines.append({"question_id": qid, "condition": condition, "response": response, "label_probs": probs})
    replay.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    overrides = [*run_overrides(tmp_path, data_dir), *survey_overrides(items), "model=replay",
                 f"model.path={replay}", f"model.name={name}", "generation.label_probs=true", *extra]
    return run(compose_config(overrides), output_dir=tmp_path / f"out-{name}").run_id


def test_the_comparison_report_says_no_answer_key_where_accuracy_cannot_exist(tmp_path: Path,
                                                                              data_dir: Path) -> None:
    import re

    from prism.compare.core import compare
    from prism.compare.terminal import format_comparison
    from prism.config import CompareConfig, to_schema

    items = write_items(tmp_path)
    first = survey_run(tmp_path, data_dir, items, "alpha",
                       {"0": ["C", "C", "C", "D", "C"], "1": ["A", "B", "A", "A", "A"], "2": ["D"] * 5})
    second = survey_run(tmp_path, data_dir, items, "beta",
                        {"0": ["C", "D", "C", "D", "C"], "1": ["A"] * 5, "2": ["D", "D", "hmm", "D", "D"]})
    cfg = to_schema(compose("compare", [f"tracking.uri=sqlite:///{tmp_path}/mlflow.db", "bootstrap=50",
                                        f"runs=[{first},{second}]"]), CompareConfig)
    result = compare(cfg, output_dir=tmp_path / "cmp")

    readings = result.tables.readings
    assert readings["accuracy"].isna().all() and readings["likelihood_accuracy"].isna().all()
    assert readings["reading_agreement"].notna().all()  # the readings themselves are still compared
    page = (tmp_path / "cmp" / "comparison" / "report.html").read_text(encoding="utf-8")
    sensitivity = page.split('id="sensitivity"')[1].split("</section>")[0]
    # Per model and condition: accuracy, delta, McNemar p, Holm p and the detectable effect say so; the flip
    # rate is a number.
    assert sensitivity.count(NO_KEY) == 2 * len(CONDITIONS) * 5
    assert re.search(r"<td>P1</td>(<td[^>]*>n/a \(no answer key\)</td>){2}<td class=\"num\">0\.\d\d", sensitivity)
    cards = page.split('id="readings"')[1].split("</section>")[0]
    assert cards.count(f'<td class="num">{NO_KEY}</td>') == 2 * 2 and "not read: no answer key" in cards
    divergence = page.split('id="divergence"')[1].split("</section>")[0]
    assert NO_KEY in divergence
    summary = page.split('id="summary"')[1].split("</section>")[0]
    assert f"its accuracy is {NO_KEY}" in summary and "Accuracy under" not in summary
    assert NO_KEY in format_comparison(result)


def test_compare_says_which_conditions_reorder_an_ordered_scale() -> None:
    import pandas as pd

    from prism.compare.core import _reordered
    from prism.compare.tables import ModelCells, ordered_scale_notes
    from prism.conditions import condition_set_from_config
    from prism.names import LoggedRun

    robustness = condition_set_from_config(compose_config(["conditions=robustness"]).conditions, subjective=True)
    ordinal = LoggedRun("r1", "FINISHED", 0, {"dataset.ordinal": "True"})
    assert _reordered(ordinal, robustness) == ("reverse", "rotate", "swap_ends", "shuffle")
    assert _reordered(LoggedRun("r2", "FINISHED", 0, {"dataset.ordinal": "False"}), robustness) == ()
    assert _reordered(ordinal, None) == ()  # no condition set to read: nothing said rather than guessed
    models = [ModelCells("m@political_compass", "r1", tuple(robustness.names), pd.DataFrame(),
                         dataset="political_compass", reordered=("reverse", "rotate")),
              ModelCells("m@arc_challenge", "r2", tuple(robustness.names), pd.DataFrame(), dataset="arc_challenge")]
    (note,) = ordered_scale_notes(models)
    assert note.startswith("m@political_compass: political_compass is an ordered scale (dataset.ordinal=true), "
                           "and reverse, rotate show its options out of their order")
