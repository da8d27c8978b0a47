"""From condition-set data to checked prompts: step specs become steps, steps become checked variants.

Every step a condition lists is applied to the unperturbed P0 rendering in order, each output checked
(``prism.conditions.perturbations.checks``) before the next step sees it, and the final prompt text is checked too.
All of this happens while requests are built, so a failing step stops the run before inference.
"""

from __future__ import annotations

from collections.abc import Sequence

from prism.conditions.perturbations.checks import check_prompt, check_step, check_variant, fail
from prism.conditions.perturbations.labels import closing_for
from prism.conditions.perturbations.ops import family_seeded_types
from prism.conditions.perturbations.step import Step, step_seed
from prism.conditions.perturbations.variant import Format, Variant, base_variant, to_prompt
from prism.types import Prompt, Question

SeedKey = tuple[str, int]


def seed_keys(condition: str, family: str, steps: Sequence[Step]) -> tuple[SeedKey, ...]:
    """What each step's seed is derived from (with the set's seed and the question id).

    ``(condition, position)`` for most steps, so each condition draws its own; ``(family, position)`` for
    steps whose levels nest (``nested_typos``), so every level of the family sees the same draw. A grid
    cell keeps the keys of the conditions it composes, so it shows exactly what each of them shows alone.
    """
    nested = family_seeded_types()
    return tuple((family if isinstance(step, nested) else condition, index) for index, step in enumerate(steps))


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
