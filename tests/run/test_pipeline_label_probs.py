"""generation.label_probs through the whole pipeline, on replay files whose lines carry probabilities."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest
from conftest import compose_config, run_overrides

from prism.backends import registry
from prism.backends.base import BackendError
from prism.backends.replay import ReplayModelConfig
from prism.conditions import condition_set_from_config, render
from prism.label_probs import LABEL_FIELDS, LIKELIHOOD_FIELDS
from prism.questions import freeze_question_set
from prism.run.pipeline import run
from prism.run.store import read_jsonl


def scenario(data_dir: Path, workdir: Path, conditions: str = "option_order", with_probs: bool = True):
    """A replay file for 4 questions: random label probabilities, the parsed answer the most likely label."""
    cfg = compose_config([*run_overrides(workdir, data_dir), f"conditions={conditions}", "dataset.n=4"])
    condition_set = condition_set_from_config(cfg.conditions)
    frozen = freeze_question_set("arc_challenge", "test", 4, 0, data_dir, workdir / "frozen")
    rng = random.Random(5)
    lines, prompts = [], {}
    for question in frozen.questions:
        for condition in condition_set.conditions:
            prompt = render(question, condition, condition_set)
            prompts[(question.question_id, condition.name)] = prompt
            weights = [rng.random() for _ in prompt.displayed_labels]
            probs = {label: w / sum(weights) for label, w in zip(prompt.displayed_labels, weights, strict=True)}
            line = {"question_id": question.question_id, "condition": condition.name,
                    "response": rng.choice(prompt.displayed_labels)}
            if with_probs:
                line.update(label_probs=probs, label_mass=round(rng.random(), 6))
            lines.append(line)
    path = workdir / "scenario.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    overrides = [*run_overrides(workdir, data_dir), "model=replay", f"model.path={path}", "model.name=scripted",
                 "dataset.n=4", f"conditions={conditions}"]
    return overrides, lines, prompts, frozen


def test_records_carry_the_probabilities_and_the_metrics_follow_them(data_dir: Path, workdir: Path) -> None:
    overrides, lines, prompts, frozen = scenario(data_dir, workdir)
    result = run(compose_config([*overrides, "generation.label_probs=true"]), output_dir=workdir / "out")
    records = list(read_jsonl(result.output_dir / "responses" / "responses.jsonl"))
    assert all(set(LABEL_FIELDS) - {"top_logprobs"} <= set(r) for r in records)
    assert all(r["generation"]["label_probs"] is True and r["label_probs_source"] == "replay" for r in records)
    # Likelihood accuracy by hand: the canonical option of the most likely displayed label, against the key.
    keys = {q.question_id: q.answer for q in frozen.questions}
    hits = []
    for line in lines:
        prompt = prompts[(line["question_id"], line["condition"])]
        best = max(prompt.displayed_labels, key=lambda label: line["label_probs"][label])
        hits.append(prompt.canonical_for(best) == keys[line["question_id"]])
    assert result.metrics["likelihood_accuracy"] == pytest.approx(sum(hits) / len(hits))
    assert result.metrics["mean_label_mass"] == pytest.approx(sum(x["label_mass"] for x in lines) / len(lines))
    scored = list(read_jsonl(result.output_dir / "results" / "scored.jsonl"))
    assert all(set(LIKELIHOOD_FIELDS) <= set(r) for r in scored)
    with (result.output_dir / "results" / "position_bias.csv").open() as handle:
        kinds = {row["kind"] for row in csv.DictReader(handle)}
    assert kinds == {"position", "label", "pride_prior"}  # option_order moves options: the prior is defined
    assert (result.output_dir / "results" / "likelihood.csv").is_file()


def test_a_run_without_the_option_has_none_of_the_fields_and_the_old_store_keys(data_dir: Path,
                                                                                workdir: Path) -> None:
    overrides, *_ = scenario(data_dir, workdir)
    result = run(compose_config(overrides), output_dir=workdir / "out")
    records = list(read_jsonl(result.output_dir / "responses" / "responses.jsonl"))
    assert not any(set(LABEL_FIELDS) & set(r) for r in records)
    assert all(set(r["generation"]) == {"temperature", "max_tokens", "seed", "top_p", "top_k"} for r in records)
    scored = list(read_jsonl(result.output_dir / "results" / "scored.jsonl"))
    assert not any(set(LIKELIHOOD_FIELDS) & set(r) for r in scored)
    assert not (result.output_dir / "results" / "position_bias.csv").exists()
    assert not any(name.startswith(("likelihood", "mean_prob_tv", "mean_label_mass")) for name in result.metrics)
    # Asking for probabilities later cannot reuse these completions: they have none.
    again = run(compose_config([*overrides, "generation.label_probs=true"]), output_dir=workdir / "again")
    assert again.n_cached == 0 and again.n_fresh == len(records)


def test_a_replay_file_without_probabilities_stops_the_run_before_inference(data_dir: Path, workdir: Path) -> None:
    overrides, *_ = scenario(data_dir, workdir, with_probs=False)
    with pytest.raises(BackendError, match=r"no line of the replay file .* has label_probs"):
        run(compose_config([*overrides, "generation.label_probs=true"]), output_dir=workdir / "out")
    assert not (workdir / "out" / "responses").exists()


class NoLogprobs:
    """A backend whose entry declares no label_probs capability (a replay file's answers)."""

    concurrency = 1

    def __init__(self, model_cfg) -> None:
        from prism.backends.replay import ReplayBackend

        self._replay = ReplayBackend(model_cfg)

    def identity(self):
        return self._replay.identity()

    def generate(self, request):
        return self._replay.generate(request)

    def close(self) -> None:
        pass


def test_a_backend_that_gives_no_logprobs_is_named_with_what_to_use_instead(data_dir: Path, workdir: Path,
                                                                           monkeypatch) -> None:
    overrides, *_ = scenario(data_dir, workdir)
    registry.backend_entries()  # the built-in entries first, so the stand-in below is not overwritten
    monkeypatch.setitem(registry._ENTRIES, "replay", registry.BackendEntry("replay", ReplayModelConfig, NoLogprobs))
    with pytest.raises(BackendError, match=r"'replay' backend gives no log-probabilities.*model=openai"):
        run(compose_config([*overrides, "generation.label_probs=true"]), output_dir=workdir / "out")


def test_compare_mixes_runs_with_and_without_probabilities_and_shows_both_readings(data_dir: Path,
                                                                                   workdir: Path) -> None:
    from compare.test_compare import compose_compare

    from prism.compare import compare

    overrides, *_ = scenario(data_dir, workdir)
    with_probs = run(compose_config([*overrides, "generation.label_probs=true", "model.name=probs"]),
                     output_dir=workdir / "a")
    without = run(compose_config([*overrides, "model.name=text"]), output_dir=workdir / "b")
    result = compare(compose_compare([f"tracking.uri=sqlite:///{workdir}/mlflow.db", "bootstrap=50",
                                      "permutations=50", f"runs=[{with_probs.run_id},{without.run_id}]",
                                      "measures=[answer,prob_tv]"]), output_dir=workdir / "cmp")
    assert not result.mismatches  # label_probs is not a comparability key
    readings = result.tables.readings
    assert set(readings["model"]) == {"probs"}  # only the run that has probabilities
    p0 = readings[readings["condition"] == "P0"].iloc[0]
    assert p0["likelihood_accuracy"] == pytest.approx(with_probs.metrics["likelihood_accuracy/P0"])
    assert p0["accuracy"] == pytest.approx(with_probs.metrics["accuracy/P0"])
    shifts = result.tables.shifts
    assert set(shifts.loc[shifts["measure"] == "prob_tv", "model"]) == {"probs"}
    tv = shifts[(shifts["measure"] == "prob_tv") & (shifts["to_condition"] == "reverse")].iloc[0]
    assert tv["between"] == pytest.approx(with_probs.metrics["mean_prob_tv/reverse"])
    parted = result.tables.reading_disagreements
    assert len(parted) and (parted["answer"] != parted["likelihood_answer"]).all()
    assert (workdir / "cmp" / "comparison" / "readings.csv").is_file()


def test_a_rerun_serves_the_probabilities_from_the_store(data_dir: Path, workdir: Path) -> None:
    overrides, *_ = scenario(data_dir, workdir, conditions="prism")
    cfg = compose_config([*overrides, "generation.label_probs=true"])
    first = run(cfg, output_dir=workdir / "first")
    again = run(cfg, output_dir=workdir / "again")
    assert again.n_fresh == 0 and again.n_cached == first.n_fresh

    def fields(out: Path) -> dict:
        return {(r["question_id"], r["condition"]): {k: r.get(k) for k in LABEL_FIELDS}
                for r in read_jsonl(out / "responses" / "responses.jsonl")}

    assert fields(again.output_dir) == fields(first.output_dir)
    assert again.metrics["likelihood_accuracy"] == first.metrics["likelihood_accuracy"]
    assert "pride_prior" not in (again.output_dir / "results" / "position_bias.csv").read_text()  # no order moves
