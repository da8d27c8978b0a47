"""Repetitions end to end: generation=sampled, seeds per repetition, a store that grows with them, and compare's
shifts and clustered model on a scripted replay model with five repetitions (numbers computed here by hand).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from compare.test_compare import compose_compare
from conftest import compose_config, run_overrides

from prism.compare.core import compare
from prism.compare.noise import SHIFT_COLUMNS
from prism.compare.terminal import format_comparison
from prism.conditions import condition_set_from_config
from prism.questions import Question, freeze_question_set
from prism.run.pipeline import build_requests, repetition_seed, run
from prism.stats.gee_fits import FIT_COLUMNS

N, R = 8, 5
CONDITIONS = ["P0", "P1", "P2", "P3", "P4"]

# Patterns per condition, one code per repetition; question i takes pattern i mod the number of patterns, so
# questions differ (without that, the cluster-robust covariance of the GEE has nothing to estimate). K the key,
# W a wrong option, U no recoverable answer, T the key as a sentence ("The answer is K": same answer, other words).
SCRIPT = {
    "P0": ("KKKKW",),
    "P1": ("KWKKK", "KKKKK", "KKWKW", "WKKKK"),  # the baseline's answers again, or steadier: no shift
    "P2": ("WWKWW", "WWWWW", "WKWWK"),  # the answer moves to W: a shift
    "P3": ("UUUKU", "UUKKU"),  # the model stops answering: a shift
    "P4": ("TTTTT", "TTWTT", "WTTTW", "TTTWT", "TTTTT"),  # answers like P1's in other words: the texts shift
}
CATEGORY = {"K": "K", "T": "K", "W": "W", "U": "U"}


def codes(condition: str, index: int) -> str:
    return SCRIPT[condition][index % len(SCRIPT[condition])]


def by_definition(condition: str) -> tuple[float, float]:
    """Between and within of the answer measure for P0 -> condition, from the definition, over the questions."""
    betweens, withins = [], []
    for index in range(N):
        a = [CATEGORY[c] for c in codes("P0", index)]
        b = [CATEGORY[c] for c in codes(condition, index)]
        betweens.append(sum(x != y for x in a for y in b) / (len(a) * len(b)))
        withins.append(sum(sum(s[i] != s[j] for i in range(R) for j in range(R) if i != j) / (R * (R - 1))
                           for s in (a, b)) / 2)
    return sum(betweens) / N, sum(withins) / N


def response(q: Question, code: str) -> str:
    wrong = next(label for label in q.labels if label != q.answer)
    return {"K": q.answer, "W": wrong, "U": "I am not sure.", "T": f"The answer is {q.answer}"}[code]


def replay_lines(questions: list[Question], reps: int = R) -> list[dict[str, Any]]:
    return [{"question_id": q.question_id, "condition": c, "repetition": r, "response": response(q, codes(c, i)[r])}
            for c in CONDITIONS for i, q in enumerate(questions) for r in range(reps)]


def test_sampled_generation_derives_a_seed_per_repetition_and_more_repetitions_extend_the_requests(
        data_dir: Path, workdir: Path) -> None:
    cfg = compose_config([*run_overrides(workdir, data_dir), "generation=sampled", "seed=7", "dataset.n=3"])
    generation = cfg.generation
    assert (generation.temperature, generation.repetitions, generation.max_tokens) == (0.7, 5, 64)
    assert (generation.seed, generation.top_p, generation.top_k) == (7, 0.95, 40)
    frozen = freeze_question_set("arc_challenge", "test", 3, 7, data_dir, workdir / "frozen")
    conditions = condition_set_from_config(cfg.conditions)
    requests = build_requests(frozen, conditions, generation)
    assert len(requests) == 5 * 3 * 5
    seeds = {r.repetition: r.params.seed for r in requests}
    assert seeds == {r: repetition_seed(7, r) for r in range(5)} and seeds[0] == 7 and len(set(seeds.values())) == 5
    assert repetition_seed(8, 1) != seeds[1]  # derived from the run seed and the index, not the index alone
    assert {r.params.temperature for r in requests} == {0.7}
    # Three repetitions are a prefix of five: the same cells, keyed by repetition index.
    fewer = build_requests(frozen, conditions, dataclasses.replace(generation, repetitions=3))

    def key(r: Any) -> tuple[str, str, int]:
        return r.prompt.sha256, json.dumps(r.params.canonical(), sort_keys=True), r.repetition

    assert {key(r) for r in fewer} < {key(r) for r in requests}
    assert {key(r) for r in requests} - {key(r) for r in fewer} == {key(r) for r in requests if r.repetition >= 3}


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, Any]:
    """A scripted model answered with three repetitions, then five (the second run extends the store)."""
    root = tmp_path_factory.mktemp("repetitions")
    frozen = freeze_question_set("arc_challenge", "test", N, 0, data_dir, root / "frozen")
    questions = list(frozen.questions)
    replay = root / "scripted.jsonl"
    replay.write_text("".join(json.dumps(line) + "\n" for line in replay_lines(questions)), encoding="utf-8")
    base = [*run_overrides(root, data_dir), "model=replay", f"model.path={replay}", "model.name=scripted",
            f"dataset.n={N}", "generation=sampled"]
    three = run(compose_config([*base, "generation.repetitions=3"]), output_dir=root / "three")
    five = run(compose_config(base), output_dir=root / "five")
    return {"root": root, "questions": questions, "three": three, "five": five,
            "uri": f"sqlite:///{root}/mlflow.db"}


def test_raising_repetitions_extends_the_store(sampled: dict[str, Any]) -> None:
    three, five = sampled["three"], sampled["five"]
    cells = len(CONDITIONS) * N
    assert (three.n_fresh, three.n_cached) == (3 * cells, 0)
    assert (five.n_cached, five.n_fresh) == (3 * cells, 2 * cells)  # only repetitions 3 and 4 are asked
    scored = [json.loads(line) for line in (five.output_dir / "results" / "scored.jsonl").open()]
    assert len(scored) == R * cells
    q = sampled["questions"][0]
    by_cell = {(s["question_id"], s["condition"], s["repetition"]): s for s in scored}
    for condition in CONDITIONS:
        for r in range(R):
            record = by_cell[q.question_id, condition, r]
            assert record["response"] == response(q, codes(condition, 0)[r])
            assert record["generation"]["seed"] == repetition_seed(0, r)
    assert {s["cached"] for s in scored if s["repetition"] < 3} == {True}


@pytest.fixture(scope="module")
def comparison(sampled: dict[str, Any]) -> Any:
    cfg = compose_compare([f"tracking.uri={sampled['uri']}", f"runs=[{sampled['five'].run_id}]", "bootstrap=300",
                           "permutations=400", "measures=[answer,token_jaccard,edit_distance]"])
    return compare(cfg, output_dir=sampled["root"] / "cmp")


def test_shifts_equal_the_hand_computed_values_and_find_the_planted_shifts(comparison: Any) -> None:
    table = comparison.tables.shifts
    assert list(table.columns) == list(SHIFT_COLUMNS)
    assert set(table["axis"]) == {"prism"} and set(table["from_condition"]) == {"P0"}
    assert table["measure"].tolist() == ["answer"] * 4 + ["token_jaccard"] * 4 + ["edit_distance"] * 4
    answer = table[table["measure"] == "answer"].set_index("to_condition")
    for condition in CONDITIONS[1:]:
        between, within = by_definition(condition)
        row = answer.loc[condition]
        assert (row["between"], row["within"], row["excess"]) == pytest.approx((between, within, between - within))
        assert row["excess_ci_low"] <= row["excess"] <= row["excess_ci_high"]
    # P2 and P3 are shifts (no permutation reaches their excess: the smallest attainable p); P1 and P4 are not.
    assert answer["shift"].to_dict() == {"P1": False, "P2": True, "P3": True, "P4": False}
    assert answer.loc["P2", "p"] == pytest.approx(1 / 401) and answer.loc["P2", "p_holm"] <= 4 / 401
    # The texts move under P4 although the answers do not: the text measures see a shift there.
    for measure in ("token_jaccard", "edit_distance"):
        rows = table[table["measure"] == measure].set_index("to_condition")
        assert bool(rows.loc["P4", "shift"]), measure
    assert comparison.metrics["shifts/scripted/answer"] == 2.0


def test_gee_table_and_files_in_the_comparison_run(comparison: Any, sampled: dict[str, Any]) -> None:
    import mlflow

    gee = comparison.tables.gee_wald
    assert list(gee.columns) == list(FIT_COLUMNS) and set(gee["fit"]) == {"dataset"}
    fitted = gee[gee["chi2"].notna()]
    assert fitted["effect"].tolist() == ["condition"] and fitted["df"].tolist() == [3.0]
    # Consistency 0.8, 0.175, 0.3, 0.825 in P1..P4, but only 8 question clusters: referred to F(3, 5), p = 0.004.
    assert fitted["p"].iloc[0] < 0.01
    assert any(e.startswith("dropped: model") for e in gee["effect"])
    local = Path(mlflow.artifacts.download_artifacts(run_id=comparison.run_id, artifact_path="comparison",
                                                     dst_path=str(sampled["root"] / "dl"),
                                                     tracking_uri=sampled["uri"]))
    assert list(pd.read_csv(local / "shifts.csv").columns) == list(SHIFT_COLUMNS)
    assert list(pd.read_csv(local / "gee_wald.csv").columns) == list(FIT_COLUMNS)
    params = mlflow.tracking.MlflowClient(sampled["uri"]).get_run(comparison.run_id).data.params
    assert (params["measures"], params["permutations"]) == ("answer,token_jaccard,edit_distance", "400")
    text = format_comparison(comparison)
    assert "Shifts against P0" in text and "SHIFT" in text and "The measures agree on 3 of 4 steps" in text
    assert "Clustered model" in text and "dropped: dataset" in text


def test_one_repetition_reports_between_with_its_interval_and_no_p(sampled: dict[str, Any]) -> None:
    cfg = compose_compare([f"tracking.uri={sampled['uri']}", f"runs=[{sampled['three'].run_id}]", "bootstrap=50",
                           "permutations=20"])
    three = compare(cfg, output_dir=sampled["root"] / "cmp3").tables.shifts
    assert three["within"].notna().all()  # three repetitions still have a within
    from prism.compare.noise import shifts_table
    from prism.compare.tables import ModelCells

    # One repetition: q1 A -> B, q2 A -> A, q3 B -> A.
    pairs = (("q1", "A", "B"), ("q2", "A", "A"), ("q3", "B", "A"))
    first = pd.DataFrame([{"question_id": q, "condition": c, "repetition": 0, "category": a, "response": a}
                          for q, *answers in pairs for c, a in zip(("P0", "P1"), answers, strict=True)])
    table = shifts_table([ModelCells("m", "r", ("P0", "P1"), first)], "P0", ["answer"], n_boot=100,
                         n_permutations=10, seed=0)
    row = table.iloc[0]
    assert row["between"] == pytest.approx(2 / 3)
    assert pd.isna(row["within"]) and pd.isna(row["excess"]) and pd.isna(row["p"]) and pd.isna(row["p_holm"])
    assert row["excess_ci_low"] <= row["between"] <= row["excess_ci_high"] and not row["shift"]


def test_unknown_measure_is_refused(sampled: dict[str, Any]) -> None:
    from prism.compare.select import CompareError

    cfg = compose_compare([f"tracking.uri={sampled['uri']}", f"runs=[{sampled['five'].run_id}]",
                           "measures=[answer,cosine]"])
    with pytest.raises(CompareError, match="unknown shift measure"):
        compare(cfg, output_dir=sampled["root"] / "bad")


def test_conditions_without_a_recorded_family_fall_back_to_their_condition_set() -> None:
    from prism.compare.noise import consistency_responses
    from prism.compare.tables import ModelCells

    cells = pd.DataFrame({"question_id": ["q1"] * 3, "condition": ["P0", "reverse", "rotate"], "repetition": 0,
                          "category": ["A", "B", "A"], "response": ["A", "B", "A"]})
    known = ModelCells("m", "r", ("P0", "reverse", "rotate"), cells, model="m", axis="option_order", dataset="arc",
                       families={"P0": "baseline", "reverse": "option_order", "rotate": "option_order"})
    unknown = ModelCells("m", "r", ("P0", "reverse", "rotate"), cells, axis="option_order")
    for model in (known, unknown):
        frame = consistency_responses([model], "P0")
        assert frame["family"].tolist() == ["baseline", "option_order", "option_order"]
    assert consistency_responses([unknown], "P0")["dataset"].tolist() == ["?"] * 3
