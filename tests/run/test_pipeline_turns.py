"""The pipeline on conditions=turns: records keep every turn, the store keys them apart, reruns and a
reproduction ask identical turns, the report trace shows them, and a backend that cannot send a system turn is
refused before inference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import compose_config, run_overrides

from prism.backends.base import BackendError
from prism.backends.registry import backend_entries, require_system_turns
from prism.compare.select import load_prompts
from prism.config import ReproduceConfig, TrackingConfig
from prism.reproduce import format_outcome, reproduce
from prism.run.pipeline import run
from prism.turns import transcript

CONDITIONS = ["P1", "system_instruction", "system_generic", "system_role"]
DIRECT = "Answer the following question by selecting the correct option."


def raw_records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "responses" / "responses.jsonl").open()]


@pytest.fixture
def replay_overrides(workdir: Path, data_dir: Path) -> list[str]:
    """A replay model answering 3 ARC questions under every condition of the turns set (B for the system ones)."""
    from prism.questions import freeze_question_set

    questions = freeze_question_set("arc_challenge", "test", 3, 0, data_dir, workdir / "frozen").questions
    path = workdir / "replay.jsonl"
    path.write_text("".join(json.dumps({"question_id": q.question_id, "condition": c,
                                        "response": "A" if c == "P1" else "B"}) + "\n"
                            for q in questions for c in CONDITIONS))
    return [*run_overrides(workdir, data_dir), "conditions=turns", "model=replay", f"model.path={path}",
            "model.name=scripted", "dataset.n=3"]


def test_a_turns_run_records_every_turn_and_a_rerun_is_served_from_the_store(replay_overrides, workdir) -> None:
    first = run(compose_config(replay_overrides), output_dir=workdir / "one")
    raw = raw_records(first.output_dir)
    assert [r["condition"] for r in raw[::3]] == CONDITIONS and len(raw) == 12
    by_condition: dict[str, list[dict]] = {}
    for r in raw:
        by_condition.setdefault(r["condition"], []).append(r)
    generic_first = by_condition["system_generic"][0]
    for p1, moved, generic, role in zip(*(by_condition[c] for c in CONDITIONS), strict=True):
        assert "turns" not in p1 and p1["prompt"].startswith(DIRECT)
        assert moved["turns"] == [{"role": "system", "content": DIRECT}] and DIRECT not in moved["prompt"]
        assert generic["turns"] == [{"role": "system", "content": "You are a helpful assistant."}]
        assert role["turns"] == [{"role": "system", "content": "You are a knowledgeable subject-matter expert."}]
        assert generic["prompt"] == role["prompt"] == p1["prompt"]  # one user turn, three prompts, three keys
        assert len({r["prompt_sha256"] for r in (p1, moved, generic, role)}) == 4
    scored = [json.loads(line) for line in (first.output_dir / "results" / "scored.jsonl").open()]
    assert all("turns" not in r and "prompt" not in r for r in scored)  # prompt text stays in responses.jsonl
    assert {r["answer"] for r in scored if r["condition"] != "P1"} == {"B"}
    # The report's and the site's prompt text is every turn, each under its role.
    shown = load_prompts(first.output_dir / "responses" / "responses.jsonl")
    assert shown[generic["prompt_sha256"]] == transcript_of(generic)
    assert shown[generic["prompt_sha256"]].startswith("[system]\nYou are a helpful assistant.\n\n[user]\n")
    assert shown[p1["prompt_sha256"]] == p1["prompt"]
    # prompts/ holds the set as run: its steps and the system prompts they name.
    configured = (first.output_dir / "prompts" / "turns.yaml").read_text()
    assert "instruction_to_system" in configured and "You are a helpful assistant." in configured
    shown_turns = yaml.safe_load((first.output_dir / "prompts" / "turns.turns.yaml").read_text())
    assert list(shown_turns) == CONDITIONS  # each condition's first conversation, every turn under its role
    user = {"role": "user", "content": generic_first["prompt"]}
    assert shown_turns["system_generic"] == [*generic_first["turns"], user]
    assert [t["role"] for t in shown_turns["P1"]] == ["user"]
    metrics = first.metrics
    assert metrics["accuracy/system_generic"] == metrics["accuracy/system_role"]
    assert "consistency/turns" in metrics

    again = run(compose_config(replay_overrides), output_dir=workdir / "two")
    rerun = raw_records(again.output_dir)
    assert all(r["cached"] for r in rerun)
    assert [(r["prompt_sha256"], r.get("turns"), r["response"]) for r in rerun] == [
        (r["prompt_sha256"], r.get("turns"), r["response"]) for r in raw]


def transcript_of(record: dict) -> str:
    from prism.turns import record_turns

    return transcript(record_turns(record))


def test_a_reproduction_asks_identical_turns(replay_overrides, workdir: Path) -> None:
    original = run(compose_config(replay_overrides), output_dir=workdir / "one")
    outcome = reproduce(ReproduceConfig(run_id=original.run_id,
                                        tracking=TrackingConfig(uri=f"sqlite:///{workdir}/mlflow.db")),
                        output_dir=workdir / "again")
    assert outcome.identical, format_outcome(outcome, original.run_id)
    asked = [(r["condition"], r["prompt_sha256"], r.get("turns")) for r in raw_records(workdir / "again")]
    assert asked == [(r["condition"], r["prompt_sha256"], r.get("turns")) for r in raw_records(workdir / "one")]
    assert not any(r["cached"] for r in raw_records(workdir / "again"))


class NoSystemTurns:
    """A backend of another name (a plug-in) that says nothing about system turns."""

    concurrency = 1


def test_a_backend_that_cannot_send_a_system_turn_is_refused_with_the_fix() -> None:
    roles = {"P1": {"user"}, "system_generic": {"system", "user"}}
    sending = {name for name, entry in backend_entries().items() if "system_turn" in entry.capabilities}
    assert {"llamacpp", "replay", "ollama", "openai"} <= sending
    with pytest.raises(BackendError, match=r"conditions \['system_generic'\] send a system turn, but the 'plugin' "
                                           r"backend cannot send one, so nothing was asked\. Use a backend that sends "
                                           r"system turns \(anthropic, llamacpp, ollama, openai, replay\)"):
        require_system_turns(NoSystemTurns(), "plugin", roles)  # type: ignore[arg-type]
    require_system_turns(NoSystemTurns(), "plugin", {"P1": {"user"}})  # no system turn: nothing to refuse


@pytest.mark.model
def test_a_model_whose_template_drops_system_turns_stops_the_run_before_inference(workdir, data_dir) -> None:
    overrides = [*run_overrides(workdir, data_dir), "conditions=turns", "dataset.n=2", "model.chat_format=gemma",
                 "model.name=gemma_format", "model.n_threads=1"]
    with pytest.raises(BackendError, match=r"conditions \['system_instruction', 'system_generic', 'system_role'\] "
                                           r"send a system turn, but the chat template of model 'gemma_format'"):
        run(compose_config(overrides), output_dir=workdir / "out")
    assert not (workdir / "out" / "responses" / "responses.jsonl").exists()


def test_compare_reads_turns_as_an_invariant_family_tested_from_p1(replay_overrides, workdir: Path) -> None:
    from conftest import compose

    from prism.compare.core import compare
    from prism.config import CompareConfig, to_schema

    original = run(compose_config(replay_overrides), output_dir=workdir / "one")
    cfg = to_schema(compose("compare", [f"tracking.uri=sqlite:///{workdir}/mlflow.db", f"runs=[{original.run_id}]",
                                        "baseline=P1", "bootstrap=50", "permutations=50"]), CompareConfig)
    result = compare(cfg, output_dir=workdir / "cmp")
    roles = result.tables.roles  # one row per step of the turns axis, from P1, each invariant
    assert {(r.axis, r.from_condition, r.to_condition, r.role) for r in roles.itertuples()} == {
        ("turns", "P1", c, "invariant") for c in CONDITIONS[1:]}
    sensitivity = result.tables.sensitivity.set_index("condition")
    assert set(sensitivity["baseline"]) == {"P1"}
    # The replay answers A under P1 and B under every system-turn condition: each flips every question.
    assert all(sensitivity.loc[c, "flip_rate"] == 1.0 for c in CONDITIONS[1:])
    shifts = result.tables.shifts
    assert {(r.axis, r.from_condition, r.to_condition) for r in shifts.itertuples()} == {
        ("turns", "P1", c) for c in CONDITIONS[1:]}
