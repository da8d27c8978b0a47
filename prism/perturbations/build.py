"""From condition-set data to checked prompts: step specs become steps, steps become checked variants.

Every step a condition lists is applied to the unperturbed P0 rendering in order, each output checked
(``prism.perturbations.checks``) before the next step sees it, and the final prompt text is checked too.
All of this happens while requests are built, so a failing step stops the run before inference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prism.perturbations.checks import check_prompt, check_step, check_variant, fail
from prism.perturbations.labels import Relabel, closing_for
from prism.perturbations.layout import Reformat
from prism.perturbations.missing import RemoveAnswer
from prism.perturbations.order import Reverse, Rotate, Shuffle, SwapEnds
from prism.perturbations.spelling import NestedTypos, Typos
from prism.perturbations.step import Step, step_seed
from prism.perturbations.text import Instruct, Synonyms
from prism.perturbations.turns import InstructionToSystem, SystemPrompt
from prism.perturbations.variant import Format, SpecError, Variant, base_variant, to_prompt
from prism.types import Prompt, Question

# Step names as written in the condition set (``op:``), with what their ``to:`` names (if anything).
OPS: dict[str, str | None] = {
    "reverse": None,
    "rotate": None,
    "swap_ends": None,
    "shuffle": None,
    "relabel": "label_sets",
    "reformat": "formats",
    "instruct": "instructions",
    "synonyms": None,
    "typos": None,
    "nested_typos": None,
    "remove_answer": "added_options",
    "system": "system_prompts",
    "instruction_to_system": None,
}

# A step's seed is keyed by (condition, position): every condition draws its own. These steps instead share
# one draw per question across all conditions of their family, so the levels of a dose nest.
_FAMILY_SEEDED = (NestedTypos,)


def format_from(spec: Mapping[str, Any], where: str) -> Format:
    """Build a :class:`Format` from its config mapping, refusing one that cannot render."""
    fmt = Format(
        layout=str(spec["layout"]),
        option=str(spec.get("option", "{label}. {text}")),
        option_separator=str(spec.get("option_separator", "\n")),
        paragraph=str(spec.get("paragraph", "\n\n")),
    )
    problems = fmt.problems()
    if problems:
        raise SpecError(f"{where}: {'; '.join(problems)}")
    return fmt


@dataclass(frozen=True)
class Library:
    """The named data steps refer to: formats, label sets, instructions, synonyms, protected words.

    Attributes:
        closing: The closing template (``{kind}`` names the label kind).
        formats: Format name -> format.
        label_sets: Label set name -> labels.
        instructions: Instruction name -> text.
        synonyms: Word -> its reviewed near-synonyms.
        protected_words: Words typos never touch (lower case).
        added_options: Wording name -> the text of an option a step adds ("None of the other options").
        system_prompts: System prompt name -> its text (``system`` steps, :mod:`prism.perturbations.turns`).
    """

    closing: str
    formats: Mapping[str, Format] = field(default_factory=dict)
    label_sets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    instructions: Mapping[str, str] = field(default_factory=dict)
    synonyms: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    protected_words: frozenset[str] = frozenset()
    added_options: Mapping[str, str] = field(default_factory=dict)
    system_prompts: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> Library:
        """Read the library out of a condition set's config mapping (missing parts are empty)."""
        return cls(
            closing=str(cfg["closing"]),
            formats={str(k): format_from(v, f"format {k!r}") for k, v in (cfg.get("formats") or {}).items()},
            label_sets={str(k): tuple(str(x) for x in v) for k, v in (cfg.get("label_sets") or {}).items()},
            instructions={str(k): str(v) for k, v in (cfg.get("instructions") or {}).items()},
            synonyms={str(k): tuple(str(x) for x in v) for k, v in (cfg.get("synonyms") or {}).items()},
            protected_words=frozenset(str(w).lower() for w in cfg.get("protected_words") or ()),
            added_options={str(k): str(v) for k, v in (cfg.get("added_options") or {}).items()},
            system_prompts={str(k): str(v) for k, v in (cfg.get("system_prompts") or {}).items()},
        )


def _named(library: Library, kind: str, name: Any) -> Any:
    table: Mapping[str, Any] = getattr(library, kind)
    if name is None or str(name) not in table:
        raise SpecError(f"'to: {name}' names no entry of {kind}; known: {sorted(table)}")
    return table[str(name)]


def _count(spec: Mapping[str, Any], op: str, default: int | None, allow_all: bool = False) -> int | None:
    count = spec.get("count", None)
    if count is None:
        if default is None and not allow_all:
            raise SpecError(f"step {op!r} needs 'count:'")
        return default
    if int(count) < 1:
        raise SpecError(f"step {op!r}: count must be at least 1, not {count}")
    return int(count)


def make_step(spec: Mapping[str, Any], library: Library) -> Step:
    """Build one step from its spec (``op``, and ``to`` / ``count`` where the op takes them).

    Raises:
        SpecError: For an unknown op (listing the known ones), a missing or unknown ``to``, or a bad count.
    """
    op = str(spec.get("op"))
    if op not in OPS:
        raise SpecError(f"unknown step op {op!r}; known: {sorted(OPS)}")
    if OPS[op] is None and spec.get("to") is not None:
        raise SpecError(f"step {op!r} takes no 'to:'")
    if op == "reverse":
        return Reverse()
    if op == "rotate":
        return Rotate(by=_count(spec, op, 1) or 1)
    if op == "swap_ends":
        return SwapEnds()
    if op == "shuffle":
        return Shuffle()
    if op == "relabel":
        if "{kind}" not in library.closing:
            raise SpecError("step 'relabel' needs a closing with {kind}, so the output requirement names the labels")
        return Relabel(str(spec["to"]), _named(library, "label_sets", spec.get("to")), library.closing)
    if op == "reformat":
        return Reformat(str(spec["to"]), _named(library, "formats", spec.get("to")))
    if op == "instruct":
        return Instruct(str(spec["to"]), _named(library, "instructions", spec.get("to")))
    if op == "system":
        return SystemPrompt(str(spec["to"]), _named(library, "system_prompts", spec.get("to")))
    if op == "instruction_to_system":
        return InstructionToSystem()
    if op == "remove_answer":
        text = str(_named(library, "added_options", spec.get("to")))
        if not text.strip():
            raise SpecError(f"added_options.{spec['to']} is empty; the added option needs a text")
        return RemoveAnswer(str(spec["to"]), text)
    if op == "synonyms":
        if not library.synonyms:
            raise SpecError("step 'synonyms' needs a 'synonyms:' word list in the condition set")
        return Synonyms.from_mapping(library.synonyms, _count(spec, op, None, allow_all=True))
    count = _count(spec, op, None)
    assert count is not None  # typos, nested_typos: _count raised without one
    if op == "nested_typos":
        return NestedTypos(count, library.protected_words)
    return Typos(count, library.protected_words)


SeedKey = tuple[str, int]


def seed_keys(condition: str, family: str, steps: Sequence[Step]) -> tuple[SeedKey, ...]:
    """What each step's seed is derived from (with the set's seed and the question id).

    ``(condition, position)`` for most steps, so each condition draws its own; ``(family, position)`` for
    steps whose levels nest (``nested_typos``), so every level of the family sees the same draw. A grid
    cell keeps the keys of the conditions it composes, so it shows exactly what each of them shows alone.
    """
    return tuple((family if isinstance(step, _FAMILY_SEEDED) else condition, index) for index, step in enumerate(steps))


def build_variant(
    question: Question, condition: str, steps: Sequence[Step], base_format: Format, closing: str, seed: int,
    keys: Sequence[SeedKey] | None = None,
) -> Variant:
    """Apply ``steps`` to the unperturbed rendering of ``question``, checking the start and every step.

    Args:
        question: The frozen question.
        condition: The condition's name (for messages, and step seeds when ``keys`` is None).
        steps: The steps, applied in order.
        base_format: The format of the unperturbed rendering (P0's).
        closing: The closing template.
        seed: The condition set's seed; each step's seed is derived from it.
        keys: Per step, what its seed is keyed by (:func:`seed_keys`); None: ``(condition, position)``.

    Raises:
        PerturbationError: Naming the question, the condition and the step whose check failed.
    """
    variant = base_variant(question, base_format, closing_for(closing, question.labels))
    problem = check_variant(question, variant, closing)
    if problem is not None:
        raise fail(question.question_id, condition, "0 (the unperturbed rendering)", problem)
    keys = [(condition, index) for index in range(len(steps))] if keys is None else keys
    for index, (step, (key, position)) in enumerate(zip(steps, keys, strict=True)):
        step_rng_seed = step_seed(seed, key, position, question.question_id)
        after = step.apply(variant, step_rng_seed)
        problem = check_step(question, step, variant, after, step_rng_seed, closing)
        if problem is not None:
            raise fail(question.question_id, condition, f"{index + 1} ({step.name})", problem)
        variant = after
    return variant


def build_prompt(
    question: Question, condition: str, steps: Sequence[Step], base_format: Format, closing: str, seed: int,
    template_version: str, keys: Sequence[SeedKey] | None = None,
) -> Prompt:
    """Build, check and render one variant (see :func:`build_variant`); the rendered text is checked too."""
    return build_keyed(question, condition, steps, base_format, closing, seed, template_version, keys)[0]


def build_keyed(
    question: Question, condition: str, steps: Sequence[Step], base_format: Format, closing: str, seed: int,
    template_version: str, keys: Sequence[SeedKey] | None = None,
) -> tuple[Prompt, str | None]:
    """:func:`build_prompt`, and the canonical label of the correct option in that prompt (for scoring only)."""
    variant = build_variant(question, condition, steps, base_format, closing, seed, keys)
    prompt = to_prompt(variant, condition, template_version)
    problem = check_prompt(variant, prompt, question)
    if problem is not None:
        raise fail(question.question_id, condition, "render", problem)
    return prompt, variant.key
