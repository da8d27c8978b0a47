"""Scripted scenarios through the replay backend: roles come from the keys, and each reading is what was planted.

One grid of the causal axis ``missing_answer`` (the correct option removed, "None of the other options" added)
and the invariant axis ``labels`` (numbers only), asked of three scripted models and compared together:

- ``follower`` answers the key everywhere: under the missing answer, the added option;
- ``ignorer`` answers the same wrong option everywhere (it is never the removed one): it keeps its old answer;
- ``spurious`` answers the key, follows the missing answer, but answers a wrong option under numbers labels.

Every response carries a little noise (another wrong option), the same in every condition, so each model
has its own repetition noise. A response names the displayed label of the canonical option it means.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from compare.test_compare import compose_compare
from conftest import compose_config, run_overrides

from prism.compare.core import compare
from prism.compare.role_tables import ROLE_COLUMNS
from prism.compare.terminal import format_comparison
from prism.conditions import condition_set_from_config, render_keyed
from prism.publish.site import run_page
from prism.questions import Question, freeze_question_set
from prism.results.summary import format_summary
from prism.run.pipeline import run

N, R = 16, 4
GRID = ["conditions=grid", "conditions.axes=[missing_answer,labels]", "~conditions.variants.lower",
        "~conditions.variants.roman", "~conditions.variants.symbols"]
MISSING, NUMBERS, BOTH = "missing_answer.missing", "labels.numbers", "missing_answer.missing__labels.numbers"


def _intended(model: str, q: Question, condition: str, key: str, rng: np.random.Generator) -> str:
    """The canonical option a scripted model means; ``key`` is the condition's own (E under a missing answer)."""
    wrong = [label for label in q.labels if label != q.answer]
    if rng.random() < 0.1:  # the same noise everywhere: another wrong option, never the removed one
        return wrong[1]
    if model == "ignorer" or (model == "spurious" and condition == NUMBERS):
        return wrong[0]
    return key


def _run(root: Path, data_dir: Path, model: str) -> Any:
    cfg = compose_config([*run_overrides(root, data_dir), *GRID, f"dataset.n={N}", "generation=sampled",
                          f"generation.repetitions={R}", "model=replay", f"model.path={root}/{model}.jsonl",
                          f"model.name={model}"])
    cs = condition_set_from_config(cfg.conditions)
    questions = freeze_question_set("arc_challenge", "test", N, 0, data_dir, root / "frozen").questions
    rng = np.random.default_rng(len(model))
    lines = []
    for condition in cs.conditions:
        for q in questions:
            prompt, key = render_keyed(q, condition, cs)
            assert key is not None
            for r in range(R):
                canonical = _intended(model, q, condition.name, key, rng)
                label = prompt.displayed_labels[prompt.canonical_labels.index(canonical)]
                lines.append({"question_id": q.question_id, "condition": condition.name, "repetition": r,
                              "response": label})
    (root / f"{model}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return run(cfg, output_dir=root / model)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Any:
    root = tmp_path_factory.mktemp("roles")
    results = {model: _run(root, data_dir, model) for model in ("follower", "ignorer", "spurious")}
    ids = ",".join(result.run_id for result in results.values())
    cfg = compose_compare([f"tracking.uri=sqlite:///{root}/mlflow.db", f"runs=[{ids}]", "bootstrap=100",
                           "permutations=400"])
    return root, compare(cfg, output_dir=root / "cmp"), results


def _readings(comparison: Any) -> dict[tuple[str, str], str]:
    roles = comparison.tables.roles
    answer = roles[roles["measure"] == "answer"]
    return {(m, c): r for m, c, r in zip(answer["model"], answer["to_condition"], answer["reading"], strict=True)}


def test_roles_come_from_the_keys_and_each_reading_is_the_planted_one(scenario: Any) -> None:
    _, comparison, _ = scenario
    roles = comparison.tables.roles
    assert list(roles.columns) == list(ROLE_COLUMNS)
    role = dict(zip(roles["to_condition"], roles["role"], strict=False))
    assert role == {NUMBERS: "invariant", MISSING: "causal", BOTH: "causal"}
    assert set(roles.loc[roles["role"] == "causal", "moved_questions"]) == {N}
    assert _readings(comparison) == {
        ("follower", NUMBERS): "stable", ("follower", MISSING): "expected", ("follower", BOTH): "expected",
        ("ignorer", NUMBERS): "stable", ("ignorer", MISSING): "missed", ("ignorer", BOTH): "missed",
        ("spurious", NUMBERS): "spurious", ("spurious", MISSING): "expected", ("spurious", BOTH): "expected",
    }
    axes = roles.drop_duplicates("to_condition").set_index("to_condition")["axis"].to_dict()
    assert axes == {NUMBERS: "labels", MISSING: "missing_answer", BOTH: "missing_answer__labels"}


def test_followed_is_the_share_of_answers_that_moved_to_the_new_key(scenario: Any) -> None:
    _, comparison, _ = scenario
    roles = comparison.tables.roles
    causal = roles[(roles["role"] == "causal") & (roles["measure"] == "answer")].set_index(["model", "to_condition"])
    assert (causal["followed_n"] == N * R).all()
    assert (causal.xs("ignorer")["followed"] == 0.0).all()
    follower = causal.xs("follower")["followed"]
    assert ((follower > 0.75) & (follower < 1.0)).all()  # the key, but for the planted noise
    assert roles.loc[roles["role"] == "invariant", "followed"].isna().all()


def test_a_causal_condition_is_scored_against_its_moved_key_and_left_out_of_question_metrics(scenario: Any) -> None:
    root, _, _ = scenario
    results = root / "follower" / "results"
    scored = pd.read_json(results / "scored.jsonl", lines=True)
    keys = scored.groupby("condition")["correct_answer"].agg(lambda v: set(v) == {"E"})
    assert keys.to_dict() == {"P0": False, NUMBERS: False, MISSING: True, BOTH: True}
    conditions = pd.read_csv(results / "condition_metrics.csv").set_index("condition")
    assert conditions.loc[MISSING, "accuracy"] == pytest.approx(
        float(scored.loc[scored["condition"] == MISSING, "correct"].mean()))
    assert conditions.loc[MISSING, "accuracy"] > 0.75  # it answered the added option
    roles = pd.read_csv(results / "roles.csv")
    assert roles.to_dict("list") == {"condition": ["P0", NUMBERS, MISSING, BOTH],
                                     "role": ["invariant", "invariant", "causal", "causal"],
                                     "moved_questions": [0, 0, N, N]}
    questions = pd.read_csv(results / "question_metrics.csv")
    # Agreement compares answers across the invariant conditions only: the key, but for the noise.
    assert len(questions) == N * R and questions["correct_answer"].notna().all()
    assert (questions["n_observed"] == 2).all()


def test_the_terminal_says_which_conditions_are_causal_and_what_the_question_metrics_cover(scenario: Any) -> None:
    _, comparison, results = scenario
    text = format_comparison(comparison)
    assert "Roles (comparison/roles.csv)" in text and "missed" in text and "spurious" in text
    page = (comparison.output_dir / "comparison" / "report.html").read_text(encoding="utf-8")
    assert "Roles: does the answer move where the correct answer moves?" in page
    assert "invariant conditions only" in page
    assert (comparison.output_dir / "comparison" / "roles.csv").is_file()
    metrics = results["follower"].metrics
    assert metrics[f"causal/{MISSING}"] == metrics[f"causal/{BOTH}"] == float(N)
    assert metrics[f"accuracy/{MISSING}"] > 0.75
    summary = format_summary(metrics, ["P0", NUMBERS, MISSING, BOTH])
    assert f"causal conditions (a step moved the correct answer): {MISSING}, {BOTH}" in summary
    assert f"over the invariant conditions only: P0, {NUMBERS}" in summary


def test_the_published_run_page_names_each_condition_role(scenario: Any) -> None:
    root, _, results = scenario
    out = root / "site"
    done = subprocess.run([sys.executable, "-m", "prism.publish", f"tracking.uri=sqlite:///{root}/mlflow.db",
                           f"publish.out={out}", "bootstrap=50", f"hydra.run.dir={root / 'hydra'}"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    text = (out / run_page(results["follower"].run_id)).read_text(encoding="utf-8")
    rows = re.findall(r'<tr><th scope="row">([^<]+)</th><td>[^<]*</td><td>(causal|invariant)</td>', text)
    assert dict(rows) == {"P0": "invariant", NUMBERS: "invariant", MISSING: "causal", BOTH: "causal"}
    assert "question-level numbers above are over the invariant conditions only" in text
