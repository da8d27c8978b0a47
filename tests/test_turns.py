"""prism.turns and the conversation of a Prompt: checked turns, hashes, the raw record's fields, the pinned key."""

from __future__ import annotations

import pytest

from prism.backends.base import Request
from prism.records import RawRecord
from prism.run.inference import make_cells, raw_record
from prism.turns import TurnError, record_turns, shown_prompt, transcript, turn_roles, turns_sha256
from prism.types import GenerationParams, ModelIdentity, Prompt, Turn

P1_TEXT = ("Answer the following question by selecting the correct option.\n\nWhich gas do plants take in?\n\n"
           "A. oxygen\nB. carbon dioxide\n\nReturn only the letter of the correct option.")
# Computed with the code of commit 6d2e625, before prompts had turns (store_key of this prompt, backend
# llamacpp, digest "sha256-of-the-gguf", temperature 0, 64 tokens, seed 0, repetition 0): a one-turn prompt
# must keep it, so every completion stored before turns existed still serves its cell.
P1_SHA256 = "6e54cdd9b6edd5ffaecbe53b93ab75bb93e7fa55de27d9060b4d5557ca79e454"
P1_STORE_KEY = "1035ef4623e04f3c1e8387106a4ae0f4b8c312db2ba24dbe9de58df65ecf2ac6"
IDENTITY = ModelIdentity("smollm2", "llamacpp", "sha256-of-the-gguf")
PARAMS = GenerationParams(temperature=0.0, max_tokens=64, seed=0)


def prompt(text: str = P1_TEXT, earlier: tuple[Turn, ...] = (), condition: str = "P1") -> Prompt:
    return Prompt("q1", condition, text, ("A", "B"), ("A", "B"), ("oxygen", "carbon dioxide"), "1", earlier)


def test_a_one_turn_prompt_keeps_the_hash_and_store_key_it_had_before_turns() -> None:
    one = prompt()
    assert one.turns == (Turn("user", P1_TEXT),) and one.messages() == [{"role": "user", "content": P1_TEXT}]
    assert one.sha256 == P1_SHA256
    [cell] = make_cells([Request(one, PARAMS, 0)], IDENTITY, "arc_challenge", "test")
    assert cell.key == P1_STORE_KEY


def test_the_hash_covers_every_turn_so_a_system_turn_gets_its_own_key() -> None:
    generic = prompt(earlier=(Turn("system", "You are a helpful assistant."),))
    role = prompt(earlier=(Turn("system", "You are a knowledgeable subject-matter expert."),))
    assert generic.text == prompt().text  # the same user turn ...
    assert len({prompt().sha256, generic.sha256, role.sha256}) == 3  # ... three prompts, three keys
    assert generic.sha256 == turns_sha256(generic.turns)
    cells = make_cells([Request(p, PARAMS, 0) for p in (prompt(), generic, role)], IDENTITY, "arc_challenge", "test")
    assert len({c.key for c in cells}) == 3 and cells[0].key == P1_STORE_KEY
    assert generic.messages() == [{"role": "system", "content": "You are a helpful assistant."},
                                  {"role": "user", "content": P1_TEXT}]


@pytest.mark.parametrize(("earlier", "message"), [
    ((Turn("narrator", "Once."),), "role 'narrator'; a role is one of system, user, assistant"),
    ((Turn("system", "  "),), r"turn 1 \(system\) is empty"),
    ((Turn("user", "Hi."), Turn("system", "Late.")), "turn 2 is a system turn; a system turn can only come first"),
])
def test_a_conversation_no_chat_api_could_send_is_refused(earlier: tuple[Turn, ...], message: str) -> None:
    with pytest.raises(TurnError, match=message):
        prompt(earlier=earlier)


def test_the_raw_record_keeps_the_user_turn_as_prompt_and_the_earlier_turns_apart() -> None:
    system = (Turn("system", "You are a helpful assistant."),)
    cells = make_cells([Request(prompt(), PARAMS, 0), Request(prompt(earlier=system, condition="system_generic"),
                                                              PARAMS, 0)], IDENTITY, "arc_challenge", "test")
    completion = {"response": "B", "latency_s": 0.1, "backend_options": {}, "timestamp": "2026-01-01T00:00:00Z"}
    one, two = (raw_record(cell, IDENTITY, completion, cached=False, error=None).to_json() for cell in cells)
    assert "turns" not in one and one["prompt"] == P1_TEXT  # a one-turn record is what it always was
    assert two["prompt"] == P1_TEXT and two["turns"] == [{"role": "system", "content": "You are a helpful assistant."}]
    assert two["prompt_sha256"] == cells[1].request.prompt.sha256 != one["prompt_sha256"]
    assert RawRecord.from_json(two).to_json() == two  # read back as written
    assert record_turns(two) == [*system, Turn("user", P1_TEXT)]
    assert shown_prompt(one) == P1_TEXT
    assert shown_prompt(two) == transcript(record_turns(two)) == (
        f"[system]\nYou are a helpful assistant.\n\n[user]\n{P1_TEXT}")


def test_turn_roles_names_the_roles_of_each_condition() -> None:
    system = (Turn("system", "You are a helpful assistant."),)
    roles = turn_roles([prompt(), prompt(earlier=system, condition="system_generic")])
    assert roles == {"P1": {"user"}, "system_generic": {"system", "user"}}
