"""The pipeline on perturbation sets, driven by the replay backend: answers compared as canonical options,
consistency equal to hand-computed values, and a failing step stopping the run before any model is asked."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import compose_config, run_overrides

from prism.conditions import condition_set_from_config, render
from prism.conditions.perturbations import PerturbationError
from prism.config import PrismConfig
from prism.questions import freeze_question_set
from prism.run.pipeline import run

ORDER = ["P0", "reverse", "rotate", "swap_ends", "shuffle"]
FAILED = None


def scenario(data_dir: Path, workdir: Path, cfg: PrismConfig) -> tuple[list[dict], list]:
    """Four questions; each response is written as the label that shows the wanted canonical option."""
    frozen = freeze_question_set("arc_challenge", "test", 4, 0, data_dir, workdir / "frozen")
    cs = condition_set_from_config(cfg.conditions)
    conditions = {c.name: c for c in cs.conditions}
    q1, q2, q3, q4 = frozen.questions

    def shown(q, condition: str, canonical: str) -> str:
        prompt = render(q, conditions[condition], cs)
        return prompt.displayed_labels[prompt.canonical_labels.index(canonical)]

    # Under reverse, canonical C of four options is displayed as B, and displayed A is canonical D.
    assert shown(q1, "reverse", "C") == "B" and shown(q1, "rotate", "C") == "D" and shown(q1, "swap_ends", "C") == "C"
    wanted = {
        # q1: canonical C everywhere, written as different letters: consistent 4 of 4.
        q1: ["C", "B", "The answer is D", "**C**", shown(q1, "shuffle", "C")],
        # q2: P0 says A. Under reverse the model says "A" again, which is canonical D: the same letter, another
        # option, inconsistent. rotate shows A as B: consistent. UNKNOWN under swap_ends: inconsistent. The
        # shuffle's label for A, wrapped: consistent. 2 of 4.
        q2: ["A", "A", "B", "I am not sure.", f"({shown(q2, 'shuffle', 'A')})"],
        # q3: P0 UNKNOWN. reverse answers (inconsistent); rotate and swap_ends are UNKNOWN too (consistent);
        # shuffle failed and is not compared. 2 of 3.
        q3: ["I don't know.", "A", "", "Hmm.", FAILED],
        # q4: the baseline request failed: nothing to compare with.
        q4: [FAILED, "A", "A", "A", "A"],
    }
    lines = []
    for q, responses in wanted.items():
        for condition, response in zip(ORDER, responses, strict=True):
            line = {"question_id": q.question_id, "condition": condition}
            line.update({"error": "connection reset"} if response is FAILED else {"response": response})
            lines.append(line)
    return lines, list(frozen.questions)


EXPECTED = {
    "consistency/option_order": (1 + 2 / 4 + 2 / 3) / 3,  # mean over the three comparable questions
    "consistency/option_order/reverse": 1 / 3,  # q1 yes, q2 no (same letter, other option), q3 no
    "consistency/option_order/rotate": 3 / 3,  # q1, q2, q3 (UNKNOWN both)
    "consistency/option_order/swap_ends": 2 / 3,  # q1, q3 (UNKNOWN both); q2 UNKNOWN vs A
    "consistency/option_order/shuffle": 2 / 2,  # q1, q2; q3 failed
}


@pytest.fixture
def option_order_run(data_dir: Path, workdir: Path):
    base = [*run_overrides(workdir, data_dir), "conditions=option_order", "dataset.n=4"]
    lines, questions = scenario(data_dir, workdir, compose_config(base))
    replay = workdir / "scenario.jsonl"
    replay.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    cfg = compose_config([*base, "model=replay", f"model.path={replay}", "model.name=scripted"])
    return run(cfg, output_dir=workdir / "out"), questions


def test_answers_are_compared_as_canonical_options(option_order_run) -> None:
    result, (q1, q2, _, _) = option_order_run
    scored = {(r["question_id"], r["condition"]): r
              for r in map(json.loads, (result.output_dir / "results" / "scored.jsonl").open())}
    assert (scored[q1.question_id, "reverse"]["displayed"], scored[q1.question_id, "reverse"]["answer"]) == ("B", "C")
    assert scored[q1.question_id, "P0"]["answer"] == "C"
    assert (scored[q2.question_id, "reverse"]["displayed"], scored[q2.question_id, "reverse"]["answer"]) == ("A", "D")
    for q in (q1, q2):
        assert {scored[q.question_id, c]["correct_answer"] for c in ORDER} == {q.answer}
        for c in ORDER:
            assert scored[q.question_id, c]["correct"] == (scored[q.question_id, c]["answer"] == q.answer)


def test_consistency_metrics_and_files_equal_hand_computed_values(option_order_run, workdir: Path) -> None:
    import mlflow

    result, questions = option_order_run
    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    logged = client.get_run(result.run_id).data
    for name, value in EXPECTED.items():
        assert logged.metrics[name] == pytest.approx(value), name
        assert result.metrics[name] == pytest.approx(value), name
    assert logged.params["conditions.name"] == "option_order" and logged.params["conditions.seed"] == "0"
    assert logged.params["conditions.names"] == ",".join(ORDER)
    assert not any(k.startswith("conditions.variants") for k in logged.params)

    summary = pd.read_csv(result.output_dir / "results" / "consistency.csv", keep_default_na=False)
    assert summary["variant"].tolist() == ["", "reverse", "rotate", "swap_ends", "shuffle"]
    assert summary["n_compared"].tolist() == [11, 3, 3, 3, 2]
    assert summary["consistency"].astype(float).tolist() == pytest.approx(
        [EXPECTED["consistency/option_order"], 1 / 3, 1.0, 2 / 3, 1.0])
    per_question = pd.read_csv(result.output_dir / "results" / "consistency_questions.csv")
    assert per_question["question_id"].tolist() == [q.question_id for q in questions]
    assert per_question["n_compared"].tolist() == [4, 4, 3, 0]
    assert per_question["consistency"].tolist()[:3] == pytest.approx([1.0, 0.5, 2 / 3])
    assert per_question["consistency"].isna().tolist() == [False, False, False, True]
    artifacts = {a.path for a in client.list_artifacts(result.run_id, "results")}
    assert {"results/consistency.csv", "results/consistency_questions.csv"} <= artifacts
    prompts = {a.path for a in client.list_artifacts(result.run_id, "prompts")}
    assert prompts == {"prompts/option_order.yaml"}


def test_a_failing_step_stops_the_run_before_any_model_is_asked(data_dir: Path, workdir: Path) -> None:
    empty = workdir / "nothing.jsonl"
    empty.write_text("", encoding="utf-8")
    cfg = compose_config([*run_overrides(workdir, data_dir), "conditions=labels", "dataset.n=2", "model=replay",
                          f"model.path={empty}", 'conditions.label_sets.numbers=["1","1","2","3"]'])
    first = freeze_question_set("arc_challenge", "test", 2, 0, data_dir, workdir / "frozen").questions[0]
    with pytest.raises(PerturbationError) as caught:
        run(cfg, output_dir=workdir / "out")
    message = str(caught.value)
    assert f"question {first.question_id!r}, condition 'numbers', step 1 (relabel(numbers))" in message
    assert "repeat (ignoring case)" in message
    assert not (workdir / "out" / "responses" / "responses.jsonl").exists()
    assert not (workdir / "mlflow.db").exists()  # no MLflow run was even started
