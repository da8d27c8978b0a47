"""The pipeline on conditions=fewshot: the draw is frozen and logged, the records hold the prompt as sent, a
reproduction asks identical prompts, compare reads the families like any invariant family, and a prompt longer than
the context is refused before inference."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from conftest import compose, compose_config, run_overrides

from prism.config import CompareConfig, ReproduceConfig, TrackingConfig, to_schema
from prism.questions import DataError
from prism.questions.demonstrations import read_draw
from prism.reproduce import format_outcome, reproduce
from prism.run.context import ContextError, check_context
from prism.run.pipeline import run
from prism.types import Prompt, Turn

CONDITIONS = ["P1", "shots_1", "shots_2", "shots_4", "shots_8", "shots_4_reversed", "shots_4_shuffled",
              "shots_4_draw2", "shots_4_draw3", "shots_4_multiturn"]
DIRECT = "Answer the following question by selecting the correct option."


def raw_records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "responses" / "responses.jsonl").open()]


@pytest.fixture
def replay_overrides(workdir: Path, data_dir: Path) -> list[str]:
    """A replay model answering 3 ARC questions under every few-shot condition (A without demonstrations, else B)."""
    from prism.questions import freeze_question_set

    questions = freeze_question_set("arc_challenge", "test", 3, 0, data_dir, workdir / "frozen").questions
    path = workdir / "replay.jsonl"
    path.write_text("".join(json.dumps({"question_id": q.question_id, "condition": c,
                                        "response": "A" if c == "P1" else "B"}) + "\n"
                            for q in questions for c in CONDITIONS))
    return [*run_overrides(workdir, data_dir), "conditions=fewshot", "model=replay", f"model.path={path}",
            "model.name=scripted", "dataset.n=3"]


def test_a_fewshot_run_freezes_logs_and_shows_its_demonstrations(replay_overrides, workdir: Path) -> None:
    import mlflow

    result = run(compose_config(replay_overrides), output_dir=workdir / "one")
    raw = raw_records(result.output_dir)
    assert [r["condition"] for r in raw[::3]] == CONDITIONS
    draw = read_draw(result.output_dir / "questions" / "demonstrations.jsonl")
    assert len(draw) == 3 and all(len(shots) == 12 for shots in draw.values())
    frozen_ids = set(draw)
    for record in raw:
        shots = draw[record["question_id"]]
        assert not {d.question_id for d in shots} & frozen_ids and {d.split for d in shots} == {"train"}
        if record["condition"] == "shots_4_multiturn":  # the prompt is the last user turn: the question alone
            assert [t["role"] for t in record["turns"]] == ["user", "assistant"] * 4
            assert record["turns"][0]["content"].startswith(DIRECT) and DIRECT not in record["prompt"]
        elif record["condition"] != "P1":
            assert "turns" not in record and record["prompt"].startswith(DIRECT)
            assert shots[0].question.strip() in record["prompt"] or record["condition"] == "shots_4_draw2" \
                or record["condition"] == "shots_4_draw3"
    shots_8 = next(r for r in raw if r["condition"] == "shots_8")
    assert all(d.question.strip() in shots_8["prompt"] for d in draw[shots_8["question_id"]][:8])
    assert draw[shots_8["question_id"]][8].question.strip() not in shots_8["prompt"]
    client = mlflow.tracking.MlflowClient(result.tracking_uri)
    tags = client.get_run(result.run_id).data.tags
    import hashlib

    assert tags["prism.demonstrations_sha256"] == hashlib.sha256(
        (result.output_dir / "questions" / "demonstrations.jsonl").read_bytes()).hexdigest()
    artifacts = {a.path for a in client.list_artifacts(result.run_id, "questions")}
    assert "questions/demonstrations.jsonl" in artifacts
    with (result.output_dir / "results" / "demonstrations.csv").open() as handle:
        balance = {row["condition"]: row for row in csv.DictReader(handle)}
    assert set(balance) == set(CONDITIONS) - {"P1"}
    assert abs(sum(float(balance["shots_4"][f"answer_{x}"]) for x in "ABCD") - 1) < 1e-9
    assert balance["shots_4"]["demonstrations"] == "12"


def test_a_reproduction_asks_identical_fewshot_prompts(replay_overrides, workdir: Path) -> None:
    original = run(compose_config(replay_overrides), output_dir=workdir / "one")
    outcome = reproduce(ReproduceConfig(run_id=original.run_id,
                                        tracking=TrackingConfig(uri=f"sqlite:///{workdir}/mlflow.db")),
                        output_dir=workdir / "again")
    assert outcome.identical, format_outcome(outcome, original.run_id)
    asked = [(r["condition"], r["prompt_sha256"], r["prompt"], r.get("turns")) for r in raw_records(workdir / "again")]
    assert asked == [(r["condition"], r["prompt_sha256"], r["prompt"], r.get("turns"))
                     for r in raw_records(workdir / "one")]
    assert not any(r["cached"] for r in raw_records(workdir / "again"))


def test_compare_reads_the_shots_profile_and_the_families_from_shots_4(replay_overrides, workdir: Path) -> None:
    from prism.compare.core import compare

    original = run(compose_config(replay_overrides), output_dir=workdir / "one")
    cfg = to_schema(compose("compare", [f"tracking.uri=sqlite:///{workdir}/mlflow.db", f"runs=[{original.run_id}]",
                                        "baseline=P1", "bootstrap=50", "permutations=50"]), CompareConfig)
    result = compare(cfg, output_dir=workdir / "cmp")
    steps = {(r.from_condition, r.to_condition) for r in result.tables.shifts.itertuples()}
    assert {("P1", "shots_1"), ("shots_1", "shots_2"), ("shots_2", "shots_4"), ("shots_4", "shots_8"),
            ("shots_4", "shots_4_reversed"), ("shots_4", "shots_4_shuffled"), ("shots_4", "shots_4_draw2"),
            ("shots_4", "shots_4_draw3"), ("shots_4", "shots_4_multiturn")} == steps
    roles = result.tables.roles
    assert set(roles["axis"]) == {"shots", "shot_order", "shot_draw", "shot_turns"}
    assert set(roles["role"]) == {"invariant"}
    profile = result.tables.profile
    shots = profile[(profile["axis"] == "shots") & (profile["measure"] == "answer")]
    assert list(shots["to_condition"]) == ["shots_1", "shots_2", "shots_4", "shots_8"]
    assert set(shots["scale"]) == {"ordinal"}


def test_a_dataset_without_a_pool_split_is_refused_before_inference(workdir: Path, data_dir: Path) -> None:
    overrides = [*run_overrides(workdir, data_dir), "conditions=fewshot", "dataset=openbookqa", "dataset.n=2",
                 "model=replay", f"model.path={workdir / 'none.jsonl'}", "model.name=scripted"]
    (workdir / "none.jsonl").write_text("")
    with pytest.raises(DataError, match=r"split 'train' of openbookqa.*openbookqa/train.jsonl does not exist"):
        run(compose_config(overrides), output_dir=workdir / "out")
    assert not (workdir / "out" / "responses" / "responses.jsonl").exists()


def characters(prompt: Prompt) -> int:
    """A token count of one token per character (for the check alone)."""
    return sum(len(turn.content) for turn in prompt.turns)


def prompt(condition: str, text: str, earlier: tuple[Turn, ...] = ()) -> Prompt:
    return Prompt("q1", condition, text, ("A", "B"), ("A", "B"), ("x", "y"), "1", earlier_turns=earlier)


def test_a_prompt_over_the_context_is_refused_naming_the_condition_and_its_tokens() -> None:
    short, long = prompt("P1", "x" * 100), prompt("shots_8", "y" * 500, (Turn("user", "z" * 400),
                                                                        Turn("assistant", "A")))
    count = characters
    check_context(1024, count, [short, long], 64, "model.n_ctx")  # 901 + 64 fit
    with pytest.raises(ContextError, match=r"condition 'shots_8' \(question 'q1'\) asks a prompt of 901 tokens .* "
                                           r"exceeds the context of 900 tokens \(model.n_ctx\)"):
        check_context(900, count, [short, long], 64, "model.n_ctx")
    check_context(None, count, [long], 64, "the server's")  # a context nobody says is not checked
    with pytest.raises(ContextError, match=r"asks a prompt of 226 tokens \(estimated as characters / 4"):
        check_context(900, None, [long], 700, "the server's")  # no tokenizer: estimated


def test_a_server_listing_its_context_is_read() -> None:
    from prism.backends.openai_compat import listed_context

    assert listed_context({"id": "m", "max_model_len": 4096}) == 4096
    assert listed_context({"id": "m", "meta": {"n_ctx_train": 8192}}) == 8192
    assert listed_context({"id": "m", "object": "model"}) is None
    assert listed_context({"id": "m", "context_length": True}) is None


@pytest.mark.model
def test_the_embedded_model_refuses_eight_shots_over_its_context(workdir: Path, data_dir: Path) -> None:
    overrides = [*run_overrides(workdir, data_dir), "conditions=fewshot", "dataset.n=2", "model.n_ctx=512",
                 "model.n_threads=1"]
    with pytest.raises(ContextError, match=r"condition 'shots_8' .* asks a prompt of \d+ tokens \(counted by the "
                                           r"model's tokenizer through its chat template\).*context of 512 tokens "
                                           r"\(model.n_ctx\)"):
        run(compose_config(overrides), output_dir=workdir / "out")
    assert not (workdir / "out" / "responses" / "responses.jsonl").exists()
