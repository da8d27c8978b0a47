"""prism.compare on real MLflow runs of scripted replay models: every number is recomputed here by hand.

One module-scoped tracking store holds, oldest first: a run of another question set (gamma), the two
scripted models (alpha, beta) as one sweep, a RUNNING run (a killed run never ends), then the comparison
the fixture makes. Sharing the store keeps the module fast: creating an MLflow SQLite store costs seconds.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import CONF_DIR, compose, compose_config, run_overrides

from prism.compare.core import compare
from prism.compare.select import CompareError, Selection, choose_runs, find_mismatches
from prism.compare.tables import DIVERGENCE_COLUMNS, SENSITIVITY_COLUMNS
from prism.config import CompareConfig, to_schema
from prism.names import LoggedRun
from prism.questions import Question, freeze_question_set
from prism.run.pipeline import run

CONDITIONS = ["P0", "P1", "P2", "P3", "P4"]
N = 10
B = 300

# Scripted answers, one string per condition, one letter per question: K the key, W a wrong option,
# X another wrong option, U an unrecoverable response (UNKNOWN), - a failed request (not observed).
ALPHA = {
    "P0": "KKKKKKKKWW",
    "P1": "KKKKKKKKWW",  # identical to the baseline: no flip, p = 1
    "P2": "WWWWWWKKWW",  # six right answers lost: McNemar 6 vs 0
    "P3": "UUKKKKKKKW",  # two right -> UNKNOWN, one wrong -> right
    "P4": "KKKKKKKKKK",  # two wrong -> right
}
BETA = {
    "P0": "KKKKWWWWUX",
    "P1": "KKKKWWWWKX",  # UNKNOWN -> right
    "P2": "KKKKKKKKUX",  # four wrong -> right
    "P3": "KKKKWWWWUU",  # a wrong answer becomes UNKNOWN: a flip, but no discordant pair
    "P4": "WKKKWWWWU-",  # one right -> wrong, and a failed request
}


def category(q: Question, code: str) -> str | None:
    """The canonical answer a script code stands for (None: not observed)."""
    wrong = [label for label in q.labels if label != q.answer]
    return {"K": q.answer, "W": wrong[0], "X": wrong[1], "U": "UNKNOWN", "-": None}[code]


def replay_lines(questions: list[Question], script: dict[str, str]) -> list[dict[str, Any]]:
    lines = []
    for condition, codes in script.items():
        for q, code in zip(questions, codes, strict=True):
            line: dict[str, Any] = {"question_id": q.question_id, "condition": condition}
            answer = category(q, code)
            if answer is None:
                line["error"] = "scripted timeout"
            else:
                line["response"] = "I am not sure." if answer == "UNKNOWN" else answer
            lines.append(line)
    return lines


def answers(questions: list[Question], script: dict[str, str]) -> dict[tuple[str, str], str]:
    """(question_id, condition) -> answer category, observed cells only."""
    table = {}
    for condition, codes in script.items():
        for q, code in zip(questions, codes, strict=True):
            if (answer := category(q, code)) is not None:
                table[q.question_id, condition] = answer
    return table


def compose_compare(overrides: list[str]) -> CompareConfig:
    """Compose ``prism/conf/compare.yaml`` as ``python -m prism.compare`` would."""
    return to_schema(compose("compare", overrides), CompareConfig)


class Store:
    """The module's tracking store and what was put in it."""

    def __init__(self, root: Path, data_dir: Path) -> None:
        self.root = root
        self.data_dir = data_dir
        self.uri = f"sqlite:///{root}/mlflow.db"
        self.ids: dict[str, str] = {}
        # The multirun sweep directory alpha and beta were tagged with (the callback writes under it).
        self.sweep = str(root / "multirun" / "sweep")
        self.questions: list[Question] = []

    def client(self) -> Any:
        import mlflow

        return mlflow.tracking.MlflowClient(self.uri)

    def compare(self, *overrides: str, name: str = "cmp") -> Any:
        cfg = compose_compare([f"tracking.uri={self.uri}", f"bootstrap={B}", *overrides])
        return compare(cfg, output_dir=self.root / name)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Store:
    import mlflow
    from mlflow.entities import Param

    root = tmp_path_factory.mktemp("compare")
    st = Store(root, data_dir)
    frozen = freeze_question_set("arc_challenge", "test", N, 0, data_dir, root / "frozen")
    st.questions = list(frozen.questions)
    assert all(len(q.labels) >= 3 for q in st.questions), "the script needs two wrong options per question"
    other = freeze_question_set("arc_challenge", "test", N, 1, data_dir, root / "frozen")
    assert other.sha256 != frozen.sha256

    def make(name: str, lines: list[dict[str, Any]], *extra: str, sweep: str | None = None) -> str:
        path = root / f"{name}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        cfg = compose_config([*run_overrides(root, data_dir), "model=replay", f"model.path={path}",
                              f"model.name={name}", f"dataset.n={N}", *extra])
        return run(cfg, output_dir=root / f"run-{name}", sweep_dir=sweep).run_id

    st.ids["gamma"] = make("gamma", replay_lines(list(other.questions), {c: "K" * N for c in CONDITIONS}),
                           "dataset.sample_seed=1")
    st.ids["alpha"] = make("alpha", replay_lines(st.questions, ALPHA), sweep=st.sweep)
    st.ids["beta"] = make("beta", replay_lines(st.questions, BETA), sweep=st.sweep)

    # A run killed by SIGKILL stays RUNNING: newest, same question set, model beta. It must never be read.
    client = st.client()
    beta = client.get_run(st.ids["beta"])
    killed = client.create_run(beta.info.experiment_id, tags={**beta.data.tags, "mlflow.runName": "killed"})
    client.log_batch(killed.info.run_id, params=[Param(k, v) for k, v in beta.data.params.items()])
    st.ids["running"] = killed.info.run_id
    assert client.get_run(st.ids["running"]).info.status == "RUNNING"

    result = st.compare(name="first")
    st.ids["comparison"] = result.run_id
    st.first = result  # type: ignore[attr-defined]
    mlflow.set_tracking_uri(st.uri)
    return st


# ------------------------------------------------------------------------------------- by-hand values


def by_hand_sensitivity(questions: list[Question], script: dict[str, str]) -> dict[str, dict[str, float]]:
    table = answers(questions, script)
    keys = {q.question_id: q.answer for q in questions}
    out = {}
    for c in CONDITIONS:
        pairs = [(table[q, "P0"], table[q, c], keys[q]) for q in keys if (q, "P0") in table and (q, c) in table]
        only_base = sum(b == k and a != k for b, a, k in pairs)
        only_other = sum(b != k and a == k for b, a, k in pairs)
        observed = [table[q, c] == keys[q] for q in keys if (q, c) in table]
        n = only_base + only_other
        p = 1.0 if n == 0 else min(1.0, 2 * sum(math.comb(n, i) for i in range(min(only_base, only_other) + 1)) / 2**n)
        out[c] = {
            "accuracy": sum(observed) / len(observed),
            "delta_accuracy": (only_other - only_base) / len(pairs),
            "flip_rate": sum(b != a for b, a, _ in pairs) / len(pairs),
            "mcnemar_p": p,
        }
    return out


def hand_holm(p: dict[str, float]) -> dict[str, float]:
    ordered = sorted(p, key=lambda c: p[c])
    adjusted, running = {}, 0.0
    for i, c in enumerate(ordered):
        running = max(running, min(1.0, (len(ordered) - i) * p[c]))
        adjusted[c] = running
    return adjusted


def hand_kappa(a: list[str], b: list[str]) -> float:
    n = len(a)
    po = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[k] * cb[k] for k in ca) / n**2
    return (po - pe) / (1 - pe)


def test_sensitivity_equals_hand_computed_values(store: Store) -> None:
    table = store.first.tables.sensitivity  # type: ignore[attr-defined]
    assert list(table.columns) == list(SENSITIVITY_COLUMNS)
    for model, script in (("alpha", ALPHA), ("beta", BETA)):
        expected = by_hand_sensitivity(store.questions, script)
        rows = table[table["model"] == model].set_index("condition")
        holm = hand_holm({c: expected[c]["mcnemar_p"] for c in CONDITIONS[1:]})
        for c in CONDITIONS:
            for column in ("accuracy", "delta_accuracy", "flip_rate"):
                assert rows.loc[c, column] == pytest.approx(expected[c][column]), (model, c, column)
            if c == "P0":
                assert math.isnan(rows.loc[c, "mcnemar_p"]) and math.isnan(rows.loc[c, "mcnemar_p_holm"])
                assert rows.loc[c, ["delta_ci_low", "delta_ci_high", "flip_ci_low", "flip_ci_high"]].tolist() == [0] * 4
                continue
            assert rows.loc[c, "mcnemar_p"] == pytest.approx(expected[c]["mcnemar_p"]), (model, c)
            assert rows.loc[c, "mcnemar_p_holm"] == pytest.approx(holm[c]), (model, c)
            for low, value, high in (("delta_ci_low", "delta_accuracy", "delta_ci_high"),
                                     ("flip_ci_low", "flip_rate", "flip_ci_high")):
                assert rows.loc[c, low] <= rows.loc[c, value] + 1e-12 <= rows.loc[c, high] + 2e-12
        # Ranked by effect: the baseline first, then |delta accuracy| descending.
        ranked = list(rows.index)
        assert ranked[0] == "P0"
        effects = [abs(expected[c]["delta_accuracy"]) for c in ranked[1:]]
        assert effects == sorted(effects, reverse=True)
    # The scripted effects, stated plainly.
    alpha = table[table["model"] == "alpha"].set_index("condition")
    assert alpha.loc["P2", "mcnemar_p"] == pytest.approx(2 / 2**6)
    assert alpha.loc["P2", "mcnemar_p_holm"] == pytest.approx(4 * 2 / 2**6)
    assert alpha.loc["P1", ["delta_ci_low", "delta_ci_high"]].tolist() == [0.0, 0.0]  # degenerate: [x, x]
    beta = table[table["model"] == "beta"].set_index("condition")
    assert beta.loc["P3", "mcnemar_p"] == 1.0 and beta.loc["P3", "flip_rate"] == pytest.approx(0.1)
    assert beta.loc["P4", "flip_rate"] == pytest.approx(1 / 9)  # the failed request leaves nine pairs


def test_divergence_equals_hand_computed_values(store: Store) -> None:
    table = store.first.tables.divergence  # type: ignore[attr-defined]
    assert list(table.columns) == list(DIVERGENCE_COLUMNS)
    assert list(table["condition"]) == [*CONDITIONS, "all"]
    a, b = answers(store.questions, ALPHA), answers(store.questions, BETA)
    keys = {q.question_id: q.answer for q in store.questions}
    ids = list(keys)

    def within(t: dict[tuple[str, str], str], q: str) -> tuple[int, int]:
        observed = [t[q, c] for c in CONDITIONS if (q, c) in t]
        pairs = list(combinations(observed, 2))
        return sum(x != y for x, y in pairs), len(pairs)

    for condition in [*CONDITIONS, "all"]:
        conds = CONDITIONS if condition == "all" else [condition]
        cells = [(q, c) for q in ids for c in conds if (q, c) in a and (q, c) in b]
        xa, xb = [a[cell] for cell in cells], [b[cell] for cell in cells]
        differ = [x != y for x, y in zip(xa, xb, strict=True)]
        answered = [d for d, x, y in zip(differ, xa, xb, strict=True) if "UNKNOWN" not in (x, y)]
        right_a = [a[cell] == keys[cell[0]] for cell in cells]
        right_b = [b[cell] == keys[cell[0]] for cell in cells]
        # The within parts are pooled over the same questions as the between part: those with a paired cell.
        paired_questions = list(dict.fromkeys(q for q, _ in cells))
        wa = [within(a, q) for q in paired_questions]
        wb = [within(b, q) for q in paired_questions]
        excess = (sum(differ) / len(cells)
                  - (sum(d for d, _ in wa) / sum(n for _, n in wa) + sum(d for d, _ in wb) / sum(n for _, n in wb)) / 2)
        row = table[table["condition"] == condition].iloc[0]
        assert row["disagreement"] == pytest.approx(sum(differ) / len(cells)), condition
        assert row["disagreement_answered"] == pytest.approx(sum(answered) / len(answered)), condition
        assert row["kappa"] == pytest.approx(hand_kappa(xa, xb)), condition
        counts = [sum(x and y for x, y in zip(right_a, right_b, strict=True)),
                  sum(x and not y for x, y in zip(right_a, right_b, strict=True)),
                  sum(y and not x for x, y in zip(right_a, right_b, strict=True)),
                  sum(not x and not y for x, y in zip(right_a, right_b, strict=True))]
        assert row[["both_correct", "only_a", "only_b", "both_wrong"]].tolist() == counts, condition
        assert row["excess"] == pytest.approx(excess), condition
        assert row["disagreement_ci_low"] <= row["disagreement"] <= row["disagreement_ci_high"]
        assert row["excess_ci_low"] <= row["excess"] <= row["excess_ci_high"]
    p0 = table[table["condition"] == "P0"].iloc[0]
    assert (p0["disagreement"], p0["disagreement_answered"]) == (pytest.approx(0.6), pytest.approx(5 / 9))
    assert p0[["both_correct", "only_a", "only_b", "both_wrong"]].tolist() == [4, 4, 0, 2]


def test_differences_list_the_evidence_where_models_differ_most(store: Store) -> None:
    first = store.first  # type: ignore[attr-defined]
    diff = pd.read_csv(first.output_dir / "comparison" / "differences.csv")  # the whole table: the file
    a, b = answers(store.questions, ALPHA), answers(store.questions, BETA)
    differing = {cell for cell in a if cell in b and a[cell] != b[cell]}
    assert {(r.question_id, r.condition) for r in diff.itertuples()} == differing
    assert diff["question_disagreement"].is_monotonic_decreasing
    top = diff.iloc[0]
    assert (top["run_a"], top["run_b"]) == (store.ids["alpha"], store.ids["beta"])
    stems = {q.question_id: q.question for q in store.questions}
    assert stems[top["question_id"]] in top["prompt"] and len(top["prompt_sha256"]) == 64
    unknown = diff[(diff["answer_a"] == "UNKNOWN") | (diff["answer_b"] == "UNKNOWN")]
    assert not unknown.empty and set(unknown[unknown["answer_a"] == "UNKNOWN"]["response_a"]) == {"I am not sure."}


def test_comparison_run_records_params_tags_tables_plots_and_metrics(store: Store) -> None:
    client = store.client()
    run_ = client.get_run(store.ids["comparison"])
    assert run_.info.status == "FINISHED"
    assert run_.data.tags["prism.kind"] == "comparison"
    assert run_.data.params["compared_run_ids"] == f"{store.ids['alpha']},{store.ids['beta']}"
    assert run_.data.tags["prism.allow_mismatch"] == "false" and "prism.mismatches" not in run_.data.tags
    artifacts = {a.path for a in client.list_artifacts(store.ids["comparison"], "comparison")}
    for name in ("sensitivity.csv", "divergence.csv", "differences.csv", "accuracy.csv",
                 "accuracy_heatmap.png", "flip_rate_heatmap.png", "divergence_matrix.png"):
        assert f"comparison/{name}" in artifacts, name
    import mlflow.artifacts

    local = mlflow.artifacts.download_artifacts(run_id=store.ids["comparison"], artifact_path="comparison",
                                                dst_path=str(store.root / "dl"), tracking_uri=store.uri)
    assert list(pd.read_csv(Path(local) / "sensitivity.csv").columns) == list(SENSITIVITY_COLUMNS)
    divergence = pd.read_csv(Path(local) / "divergence.csv")
    assert list(divergence.columns) == list(DIVERGENCE_COLUMNS)
    assert (Path(local) / "divergence_matrix.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    metrics = run_.data.metrics
    assert metrics["divergence/alpha_vs_beta/disagreement"] == pytest.approx(divergence.iloc[-1]["disagreement"])
    assert metrics["sensitivity/alpha/significant_conditions"] == 0.0  # Holm: 0.125 for P2
    assert metrics["n_runs"] == 2 and metrics["n_questions"] == N


def test_default_selection_skips_running_comparison_and_older_question_sets(store: Store) -> None:
    result = store.compare(name="again")
    assert [r.run_id for r in result.runs] == [store.ids["alpha"], store.ids["beta"]]


def test_filters_select_models_and_sweeps(store: Store) -> None:
    only_beta = store.compare("filters.models=[beta]", name="beta-only")
    assert [r.run_id for r in only_beta.runs] == [store.ids["beta"]]
    # One run: no cross-model table; sensitivity, accuracy, and its shifts, profiles, roles and clustered models,
    # and the read-outs of one model (no divergence beyond noise); rank_robustness is always written, empty here.
    assert {name for name, _ in only_beta.tables.items()} == {
        "sensitivity", "accuracy", "shifts", "profile", "roles", "gee_wald", "scorecard", "sensitivity_axes",
        "measure_agreement", "gee_by_dataset", "consistency_by_type", "rank_robustness"}
    assert only_beta.tables.rank_robustness.empty
    assert store.compare(f"filters.sweep={store.sweep}", name="sweep").runs[1].run_id == store.ids["beta"]
    with pytest.raises(CompareError, match="no FINISHED run of model delta"):
        store.compare("filters.models=[beta,delta]", name="missing")
    with pytest.raises(CompareError, match="no FINISHED run of kind 'run' matching"):
        store.compare("filters.dataset=sciq", name="none")


def test_explicit_runs_must_be_finished_runs(store: Store) -> None:
    with pytest.raises(CompareError, match=f"run {store.ids['running']} is RUNNING"):
        store.compare(f"runs=[{store.ids['alpha']},{store.ids['running']}]", name="x1")
    with pytest.raises(CompareError, match="of kind 'comparison'"):
        store.compare(f"runs=[{store.ids['comparison']}]", name="x2")
    with pytest.raises(CompareError, match="not in this tracking store"):
        store.compare("runs=[0123456789abcdef0123456789abcdef]", name="x3")


def test_runs_on_different_question_sets_are_compared_without_pairing_their_cells(store: Store) -> None:
    runs = f"runs=[{store.ids['gamma']},{store.ids['alpha']}]"
    result = store.compare(runs, name="two-sets")
    assert result.mismatches == []
    data = store.client().get_run(result.run_id).data
    assert data.tags["prism.allow_mismatch"] == "false" and data.tags["prism.question_set_sha256"] == "mixed"
    # Each run is in the per-run tables; no cell pairs across question sets.
    assert list(dict.fromkeys(result.tables.sensitivity["model"])) == ["gamma", "alpha"]
    assert not {"divergence", "differences", "difference_counts"} & {name for name, _ in result.tables.items()}
    sets = result.tables.question_sets
    assert list(sets["runs"]) == ["gamma", "alpha"] and list(sets["pairs"]) == [0, 0]
    page = (store.root / "two-sets" / "comparison" / "report.html").read_text(encoding="utf-8")
    assert 'id="coverage"' in page and "no cells pair" in page



def test_across_question_sets_only_the_question_set_and_the_subjective_suffix_may_differ() -> None:
    def summary(run_id: str, question_set: str, **params: str) -> LoggedRun:
        base = {"model.name": "m", "conditions.template_version": "3", "parser_version": "2",
                "generation.temperature": "0.0", "generation.max_tokens": "64", "generation.seed": "0"}
        return LoggedRun(run_id, "FINISHED", 0, {**base, **params}, {"prism.question_set_sha256": question_set})

    arc, survey = summary("a", "s1"), summary("b", "s2", **{"conditions.template_version": "3+subjective.1"})
    assert find_mismatches([arc, survey], across_question_sets=True) == []
    assert [line.split(" (")[0] for line in find_mismatches([arc, survey])] == ["frozen question set sha256",
                                                                              "condition template version"]
    # On one question set the whole version must agree; across sets its base must.
    other_wording = summary("c", "s2", **{"conditions.template_version": "3+subjective.2"})
    assert [line.split(" (")[0] for line in find_mismatches([arc, survey, other_wording], across_question_sets=True)] \
        == ["condition template version"]
    newer = summary("d", "s2", **{"conditions.template_version": "4+subjective.1", "parser_version": "3"})
    lines = find_mismatches([arc, newer], across_question_sets=True)
    assert [line.split(" (")[0] for line in lines] == ["condition template version", "parser version"]


def test_mismatch_check_names_each_key_and_compares_numbers_as_numbers() -> None:
    def summary(run_id: str, **params: str) -> LoggedRun:
        base = {"model.name": run_id, "conditions.template_version": "1", "parser_version": "1",
                "generation.temperature": "0.0", "generation.max_tokens": "64", "generation.seed": "0",
                "generation.top_p": "null", "generation.top_k": "null"}
        return LoggedRun(run_id, "FINISHED", 0, {**base, **params}, {"prism.question_set_sha256": "abc"})

    assert find_mismatches([summary("a"), summary("b", **{"generation.temperature": "0"})]) == []
    lines = find_mismatches([summary("a"), summary("b", parser_version="2", **{"generation.top_k": "40",
                                                                               "conditions.template_version": "2"})])
    assert [line.split(" (")[0] for line in lines] == ["condition template version", "parser version",
                                                       "generation.top_k"]
    assert "'2' in run b (b)" in lines[1] and "'1' in run a (a)" in lines[1]


def test_choose_runs_takes_the_latest_finished_run_per_model_of_the_newest_question_set() -> None:
    def r(run_id: str, model: str, t: int, qs: str = "new", status: str = "FINISHED", kind: str = "run") -> LoggedRun:
        return LoggedRun(run_id, status, t, {"model.name": model, "dataset.name": "arc"},
                          {"prism.kind": kind, "prism.question_set_sha256": qs})

    candidates = [r("a1", "a", 1), r("a2", "a", 5), r("b1", "b", 2), r("b-old", "b", 3, qs="old"),
                  r("b-run", "b", 9, status="RUNNING"), r("b-fail", "b", 8, status="FAILED"),
                  r("cmp", "b", 10, kind="comparison"), r("c-old", "c", 0, qs="old")]
    assert [x.run_id for x in choose_runs(candidates, Selection())] == ["a2", "b1"]
    assert [x.run_id for x in choose_runs(candidates, Selection(models=("b", "a")))] == ["b1", "a2"]
    assert choose_runs(candidates, Selection(dataset="sciq")) == []


def test_runs_and_filters_together_are_refused(store: Store) -> None:
    with pytest.raises(CompareError, match="drop the filters"):
        store.compare(f"runs=[{store.ids['alpha']}]", "filters.models=[alpha]", name="both")


def test_sweep_callback_compares_the_sweeps_runs(store: Store) -> None:
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from prism.conf import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["hydra/callbacks=compare", f"tracking.uri={store.uri}"],
                      return_hydra_config=True)
    callback = instantiate(cfg.hydra.callbacks.compare, bootstrap=B)
    sweep_cfg = OmegaConf.create({"hydra": {"sweep": {"dir": store.sweep}},
                                  "tracking": {"uri": store.uri, "experiment": "prism"}})
    callback.on_multirun_end(sweep_cfg)
    out = Path(store.sweep) / "compare"
    assert (out / "comparison" / "sensitivity.csv").is_file()
    client = store.client()
    experiment = client.get_run(store.ids["alpha"]).info.experiment_id
    (made,) = [r for r in client.search_runs([experiment], "tags.`prism.kind` = 'comparison'")
               if r.data.tags.get("prism.output_dir") == str(out.resolve())]
    assert made.data.tags["prism.sweep"] == store.sweep
    assert made.data.params["compared_run_ids"] == f"{store.ids['alpha']},{store.ids['beta']}"


def test_import_is_light_and_help_works() -> None:
    code = ("import sys, prism.compare, prism.compare.__main__; "
            "print(sorted(m for m in ('mlflow', 'scipy', 'statsmodels', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    help_text = subprocess.run([sys.executable, "-m", "prism.compare", "--help"], capture_output=True, text=True,
                               check=True).stdout
    assert "runs=[ID1,ID2]" in help_text and "allow_mismatch" in help_text


def cells(rows: list[tuple[str, str, int, str | None, str]]) -> pd.DataFrame:
    """Observed cells from (question, condition, repetition, answer or None for UNKNOWN, key)."""
    frame = pd.DataFrame(rows, columns=["question_id", "condition", "repetition", "answer", "correct_answer"])
    frame["category"] = frame["answer"].where(frame["answer"].notna(), "UNKNOWN")
    frame["correct"] = frame["answer"] == frame["correct_answer"]
    frame["recovered"] = frame["answer"].notna()
    frame["response"] = frame["category"]
    frame["prompt_sha256"] = frame["question_id"] + frame["condition"]
    return frame


def test_repetitions_pair_by_index_and_a_missing_baseline_is_refused() -> None:
    from prism.compare.build import build_tables
    from prism.compare.comparison_plan import ComparisonPlan
    from prism.compare.tables import ModelCells

    rows = [
        ("q1", "P0", 0, "A", "A"), ("q1", "P1", 0, "B", "A"),   # rep 0: right -> wrong (a flip)
        ("q1", "P0", 1, "B", "A"), ("q1", "P1", 1, "B", "A"),   # rep 1: same wrong answer
        ("q2", "P0", 0, None, "C"), ("q2", "P1", 0, None, "C"),  # UNKNOWN twice: no flip
        ("q2", "P0", 1, "C", "C"),                               # rep 1 of P1 failed: no pair
    ]
    model = ModelCells("m", "run-m", ("P0", "P1"), cells(rows))
    tables = build_tables([model], ComparisonPlan(baseline="P0", n_boot=200, seed=0))
    row = tables.sensitivity.set_index("condition").loc["P1"]
    # Three pairs (q1 r0, q1 r1, q2 r0): one flip, one discordant pair (baseline right only).
    assert row["flip_rate"] == pytest.approx(1 / 3)
    assert row["delta_accuracy"] == pytest.approx(-1 / 3)
    assert row["mcnemar_p"] == 1.0  # binomial(1, 1/2): a single discordant pair proves nothing
    assert row["accuracy"] == 0.0
    with pytest.raises(CompareError, match="baseline condition 'P9' is not among m's conditions"):
        build_tables([model], ComparisonPlan(baseline="P9", n_boot=10, seed=0))


def test_question_rows_is_the_groupby_of_the_questions_and_takes_no_rows() -> None:
    import pandas as pd

    from prism.compare.noise import question_rows

    ids = pd.Series(["q2", "q1", "q2", "q3", "q1"], dtype="str")
    found = [(q, rows.tolist()) for q, rows in question_rows(ids)]
    expected = [(str(q), list(group.index)) for q, group in ids.groupby(ids, sort=False)]
    assert found == expected == [("q2", [0, 2]), ("q1", [1, 4]), ("q3", [3])]
    assert question_rows(pd.Series([], dtype="str")) == []  # a run without the cells of a measure
