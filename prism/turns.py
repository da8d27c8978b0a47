"""A prompt is a conversation: its turns, how they are checked, hashed, recorded and shown.

A :class:`prism.types.Prompt` is an ordered tuple of turns (:class:`prism.types.Turn`, role ``system``,
``user`` or ``assistant``); the last is the user turn holding the question. The raw record keeps that last
turn's exact text as ``prompt`` and the earlier turns, when there are any, as ``turns``
(``[{"role", "content"}, ...]``); a one-turn prompt has no ``turns`` field, and its hash is that of its
text alone, so stores and records written before prompts had turns stay what they were.

Every backend sends the turns as they are (:meth:`prism.types.Prompt.messages`); a chat template that has
no system role is refused before inference rather than let a system turn be dropped
(:func:`prism.backends.registry.require_system_turns`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

# The checks and the hash live beside Prompt, which runs them as it is built; they are prism.turns' API too.
from prism.types import Turn, TurnError, check_turns, turns_sha256

__all__ = ["Turn", "TurnError", "check_turns", "earlier_field", "record_turns", "shown_prompt", "transcript",
           "turn_roles", "turns_sha256", "write_conversations"]


def earlier_field(turns: Sequence[Turn]) -> list[dict[str, str]] | None:
    """The raw record's ``turns`` field: the turns before the last, or None (no field) when there are none."""
    return [turn.to_dict() for turn in turns[:-1]] or None


def record_turns(record: Mapping[str, Any]) -> list[Turn]:
    """Every turn of a raw record: its ``turns`` (if any), then the user turn ``prompt``."""
    earlier = [Turn(str(t["role"]), str(t["content"])) for t in record.get("turns") or ()]
    return [*earlier, Turn("user", str(record.get("prompt") or ""))]


def transcript(turns: Iterable[Turn]) -> str:
    """A conversation as text for a reader (the report, the site's trace): each turn under its role."""
    return "\n\n".join(f"[{turn.role}]\n{turn.content}" for turn in turns)


def shown_prompt(record: Mapping[str, Any]) -> str:
    """What a reader is shown of a raw record's prompt: its text, or every turn when it has earlier ones."""
    if not record.get("turns"):
        return str(record.get("prompt") or "")
    return transcript(record_turns(record))


def turn_roles(prompts: Iterable[Any]) -> dict[str, set[str]]:
    """Condition -> the roles of every turn of its prompts (``prism.types.Prompt`` values)."""
    roles: dict[str, set[str]] = {}
    for prompt in prompts:
        roles.setdefault(prompt.condition, set()).update(turn.role for turn in prompt.turns)
    return roles


def write_conversations(folder: Path, set_name: str, prompts: Sequence[Any]) -> Path | None:
    """Write ``prompts/<set>.turns.yaml``: every turn of each condition's first prompt, when a condition has turns.

    The set's own YAML beside it holds the steps and the texts they name; this file shows what they made, a
    conversation per condition (its first question's), each turn under its role. A run without earlier turns
    writes nothing, so its ``prompts/`` stays what it always was.

    Returns:
        The file written, or None.
    """
    import yaml

    from prism.types import safe_filename

    if not any(prompt.earlier_turns for prompt in prompts):
        return None
    first: dict[str, list[dict[str, str]]] = {}
    for prompt in prompts:
        first.setdefault(prompt.condition, prompt.messages())
    path = folder / f"{safe_filename(set_name)}.turns.yaml"
    path.write_text(yaml.safe_dump(first, sort_keys=False, allow_unicode=True, width=1000), encoding="utf-8")
    return path
