"""Comparing runs on different datasets end to end: scripted replay runs on ARC items and on survey items.

Three models on 30 ARC-Challenge questions (objective) and two of them on 30 synthetic survey statements
(subjective, no key), all under P0-P4. Every non-baseline answer repeats the baseline's with probability
0.8 on ARC and 0.25 on the survey items (not closer to 1 or 0: a model x condition x dataset cell of 30
responses all consistent, or none, is perfect separation and the model is not fitted): a planted
dataset-type effect that both clustered-model fits must find. The per-run tables hold all five runs;
divergence and differences pair runs only on one question set.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import compose, compose_config, fresh_mlflow, run_overrides

from prism.compare.core import compare
from prism.compare.terminal import format_comparison
from prism.config import CompareConfig, to_schema
from prism.questions import freeze_question_set
from prism.run.pipeline import run

CONDITIONS = ["P0", "P1", "P2", "P3", "P4"]
N = 30
SCALE = ["Strongly disagree", "Disagree", "Agree", "Strongly agree"]
KEEP = {"objective": 0.8, "subjective": 0.25}


def scripted(questions: list[tuple[str, int]], keep: float, seed: int) -> list[dict[str, Any]]:
    """Replay lines: a random baseline answer per question, kept by each other condition with probability ``keep``."""
    rng = np.random.default_rng(seed)
    lines = []
    for qid, labels in questions:
        letters = list("ABCDE"[:labels])
        base = str(rng.choice(letters))
        for condition in CONDITIONS:
            other = str(rng.choice([x for x in letters if x != base]))
            answer = base if condition == "P0" or rng.random() < keep else other
            lines.append({"question_id": qid, "condition": condition, "response": answer})
    return lines


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, data_dir: Path, mlflow_template: Path) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("groups")
    fresh_mlflow(mlflow_template, root)
    arc = [(q.question_id, len(q.labels))
           for q in freeze_question_set("arc_challenge", "test", N, 0, data_dir, root / "frozen").questions]
    items = root / "survey.jsonl"
    items.write_text("".join(json.dumps({"id": f"s{i}", "statement": f"Synthetic statement {i}.", "options": SCALE})
                             + "\n" for i in range(N)), encoding="utf-8")
    survey = ["dataset=custom", f"dataset.path={items}", "dataset.fields.id=id", "dataset.fields.question=statement",
              "dataset.fields.options=options", "dataset.fields.answer=null", "dataset.answer_format=none",
              "dataset.type=subjective", f"dataset.n={N}"]
    ids: dict[str, str] = {}
    lines: dict[str, list[dict[str, Any]]] = {}
    for seed, (model, kind) in enumerate([("alpha", "objective"), ("beta", "objective"), ("gamma", "objective"),
                                          ("alpha", "subjective"), ("beta", "subjective")]):
        questions = arc if kind == "objective" else [(f"s{i}", len(SCALE)) for i in range(N)]
        path = root / f"{model}-{kind}.jsonl"
        lines[f"{model}-{kind}"] = scripted(questions, KEEP[kind], seed)
        path.write_text("".join(json.dumps(line) + "\n" for line in lines[f"{model}-{kind}"]), encoding="utf-8")
        extra = survey if kind == "subjective" else [f"dataset.n={N}"]
        cfg = compose_config([*run_overrides(root, data_dir), "model=replay", f"model.path={path}",
                              f"model.name={model}", *extra])
        ids[f"{model}-{kind}"] = run(cfg, output_dir=root / f"run-{model}-{kind}").run_id
    return {"root": root, "ids": ids, "lines": lines, "uri": f"sqlite:///{root}/mlflow.db"}


def comparison(runs: dict[str, Any], name: str, *overrides: str) -> Any:
    order = ",".join(runs["ids"][k] for k in ("alpha-objective", "beta-objective", "gamma-objective",
                                               "alpha-subjective", "beta-subjective"))
    cfg = to_schema(compose("compare", [f"tracking.uri={runs['uri']}", "bootstrap=50", "permutations=50",
                                        f"runs=[{order}]", *overrides]), CompareConfig)
    return compare(cfg, output_dir=runs["root"] / name)


def pairs_of(result: Any) -> set[tuple[str, str]]:
    return set(zip(result.tables.divergence["model_a"], result.tables.divergence["model_b"], strict=True))


def test_runs_on_two_datasets_are_compared_and_only_runs_on_one_question_set_pair(runs: dict[str, Any]) -> None:
    result = comparison(runs, "reference")
    assert result.mismatches == []  # the question sets and the subjective template suffix differ, nothing else
    labels = ["alpha@arc_challenge", "beta@arc_challenge", "gamma", "alpha@custom", "beta@custom"]
    assert list(dict.fromkeys(result.tables.sensitivity["model"])) == labels
    assert list(dict.fromkeys(result.tables.accuracy["model"])) == labels
    assert set(result.tables.shifts["model"]) == set(labels)
    # pairs=reference within each question set: the first run given there is its reference.
    assert pairs_of(result) == {("alpha@arc_challenge", "beta@arc_challenge"), ("alpha@arc_challenge", "gamma"),
                                ("alpha@custom", "beta@custom")}
    assert set(zip(result.tables.differences["model_a"], result.tables.differences["model_b"],
                   strict=True)) <= pairs_of(result)
    sets = result.tables.question_sets
    assert sets[["dataset", "dataset_type", "n_questions", "pairs"]].values.tolist() == [
        ["arc_challenge", "objective", N, 2], ["custom", "subjective", N, 1]]
    assert list(sets["reference"]) == ["alpha@arc_challenge", "alpha@custom"]
    # Keyless survey runs: no accuracy, their flip rates computed.
    survey = result.tables.sensitivity[result.tables.sensitivity["model"].str.endswith("@custom")]
    assert survey["accuracy"].isna().all() and survey["flip_rate"].notna().all()

    text = format_comparison(result)
    assert "on 2 different frozen question sets" in text
    assert "alpha@arc_challenge, beta@arc_challenge, gamma; 2 pair(s), each run against the reference " \
           "alpha@arc_challenge" in text
    page = (runs["root"] / "reference" / "comparison" / "report.html").read_text(encoding="utf-8")
    coverage = page.split('id="coverage"')[1].split("</div>")[0]
    assert f"custom, subjective, {N} questions): alpha@custom, beta@custom; 1 pair(s)" in coverage
    assert "Each run is compared with the reference run" not in page  # the one-set pairing note is left out


def test_pairs_all_and_a_named_reference_hold_within_each_question_set(runs: dict[str, Any]) -> None:
    every = comparison(runs, "all", "pairs=all")
    assert pairs_of(every) == {("alpha@arc_challenge", "beta@arc_challenge"), ("alpha@arc_challenge", "gamma"),
                               ("beta@arc_challenge", "gamma"), ("alpha@custom", "beta@custom")}
    named = comparison(runs, "named", f"reference={runs['ids']['gamma-objective']}")
    assert pairs_of(named) == {("gamma", "alpha@arc_challenge"), ("gamma", "beta@arc_challenge"),
                               ("alpha@custom", "beta@custom")}
    # The per-run tables do not depend on the pairing.
    pd.testing.assert_frame_equal(every.tables.sensitivity, named.tables.sensitivity)


def test_both_fits_find_the_planted_dataset_type_effect(runs: dict[str, Any]) -> None:
    result = comparison(runs, "fits")
    wald = result.tables.gee_wald
    assert list(dict.fromkeys(wald["fit"])) == ["dataset", "dataset_type"]
    tested = wald[wald["chi2"].notna()].set_index(["fit", "effect"])
    # Treatment coding: the main effect is the type's effect at the reference model and condition (alpha, P1,
    # 30 responses per dataset); these scripted answers give p = 0.0026 (0.75 against 0.35 gave 0.053).
    assert tested.loc[("dataset", "dataset"), "p"] < 0.01
    assert tested.loc[("dataset_type", "dataset_type"), "p"] < 0.01
    # One subjective dataset: the two fits are the same split of the data.
    assert tested.loc[("dataset", "dataset"), "chi2"] == pytest.approx(tested.loc[("dataset_type", "dataset_type"),
                                                                                  "chi2"])
    local = runs["root"] / "fits" / "comparison"
    assert list(pd.read_csv(local / "gee_wald.csv").columns) == ["fit", "effect", "chi2", "df", "p",
                                                                   "detectable_effect", "detectable_method"]
    by_dataset = pd.read_csv(local / "gee_by_dataset.csv")
    assert list(dict.fromkeys(by_dataset["dataset"])) == ["arc_challenge", "custom"]
    assert set(by_dataset.loc[by_dataset["chi2"].notna(), "effect"]) >= {"model", "condition"}

    table = result.tables.consistency_by_type.set_index(["model", "family"])
    assert list(table.columns) == ["objective", "subjective", "difference", "n_objective", "n_subjective"]
    # By hand from the scripts: each question's 4 conditions against its baseline (one family), averaged.
    for kind in ("objective", "subjective"):
        script = runs["lines"][f"alpha-{kind}"]
        base = {line["question_id"]: line["response"] for line in script if line["condition"] == "P0"}
        kept = [line["response"] == base[line["question_id"]] for line in script if line["condition"] != "P0"]
        assert table.loc[("alpha", "all"), kind] == pytest.approx(sum(kept) / len(kept))
        assert table.loc[("alpha", "instruction"), kind] == pytest.approx(sum(kept) / len(kept))
    assert table.loc[("alpha", "all"), "difference"] == pytest.approx(
        table.loc[("alpha", "all"), "subjective"] - table.loc[("alpha", "all"), "objective"])
    assert np.isnan(table.loc[("gamma", "all"), "subjective"])
    assert "consistency_by_type.csv" in format_comparison(result)
