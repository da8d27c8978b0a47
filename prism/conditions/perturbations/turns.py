"""Turn steps: which turn an instruction sits in (attribute ``turn``, :mod:`prism.turns`).

A prompt is a conversation; these steps change only where its instructions sit, never their words, the
question, the options, the labels or the output requirement:

- ``system`` (``to:`` a name under ``system_prompts``) adds a system turn with that text
  ("You are a helpful assistant.", a role sentence);
- ``instruction_to_system`` moves the instruction paragraph (an earlier ``instruct`` step's) out of the
  user turn into the system turn, word for word.

The texts are data in the condition set (``prism/conf/conditions/turns.yaml``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from prism.conditions.perturbations.ops import Library, Op, named, register_op
from prism.conditions.perturbations.variant import Attribute, Variant
from prism.config import StepSpec

_TURN: frozenset[Attribute] = frozenset({"turn"})


@dataclass(frozen=True)
class SystemPrompt:
    """Put ``text`` (named ``prompt_name`` under ``system_prompts``) in a system turn before the user turn.

    Attributes:
        prompt_name: Name of the system prompt (for messages).
        text: The system prompt.
    """

    prompt_name: str
    text: str
    changes: frozenset[Attribute] = _TURN

    @property
    def name(self) -> str:
        """``system(<name>)``."""
        return f"system({self.prompt_name})"

    def apply(self, variant: Variant, seed: int) -> Variant:
        """Set the system prompt (the seed is unused)."""
        return replace(variant, system=self.text.strip())

    def verify(self, before: Variant, after: Variant) -> str | None:
        """The system prompt must be one non-empty paragraph, and there must have been none before."""
        if not after.system or "\n\n" in after.system:
            return f"the system prompt {self.prompt_name!r} must be one non-empty paragraph"
        if before.system:
            return f"the variant already has the system prompt {before.system!r}; a prompt has one system turn"
        return None


@dataclass(frozen=True)
class InstructionToSystem:
    """Move the instruction paragraph from the user turn into the system turn, unchanged."""

    changes: frozenset[Attribute] = _TURN

    @property
    def name(self) -> str:
        """``instruction_to_system``."""
        return "instruction_to_system"

    def apply(self, variant: Variant, seed: int) -> Variant:
        """Say that the instruction sits in the system turn (the seed is unused)."""
        return replace(variant, instruction_turn="system")

    def verify(self, before: Variant, after: Variant) -> str | None:
        """There must be an instruction in the user turn to move (an ``instruct`` step before this one)."""
        if not before.instruction:
            return "there is no instruction to move; put an 'instruct' step before 'instruction_to_system'"
        if before.instruction_turn != "user":
            return "the instruction already sits in the system turn"
        return None


def _system(spec: StepSpec, library: Library) -> SystemPrompt:
    return SystemPrompt(str(spec.to), named(library, "system_prompts", spec.to))


register_op(Op("system", _system, SystemPrompt, takes="system_prompts"))
register_op(Op("instruction_to_system", lambda spec, library: InstructionToSystem(), InstructionToSystem))
