"""The ``conditions`` group: a versioned condition set (template conditions, step variants, axes)."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import II, MISSING

from prism.config.choices import ClozeTargetField, FamilyScaleField


@dataclass
class ConditionSpec:
    """One template condition (see ``prism.conditions``)."""

    name: str = MISSING
    description: str = ""
    family: str = "instruction"
    template: str = MISSING
    # A condition in lm-eval's own form fixes its cloze continuation: text or label (conditions=cloze).
    cloze_target: ClozeTargetField | None = None


# ---- Step conditions: perturbation sets (``prism.conditions.perturbations``) ---------------------------------------


@dataclass
class StepSpec:
    """One perturbation step: ``op`` is its name; ``to`` names the data it uses; ``count`` how many."""

    op: str = MISSING
    to: str | None = None
    count: int | None = None


@dataclass
class VariantSpec:
    """One step condition: the unperturbed P0 rendering with ``steps`` applied in order."""

    family: str = MISSING
    description: str = ""
    steps: list[StepSpec] = field(default_factory=list)


@dataclass
class FormatSpec:
    """A surface format: the body layout, one option line, and the separators."""

    layout: str = MISSING
    option: str = "{label}. {text}"
    option_separator: str = "\n"
    paragraph: str = "\n\n"


@dataclass
class FamilySpec:
    """A family as an axis: its scale and, optionally, its values in order (the first is its baseline)."""

    scale: FamilyScaleField = "nominal"
    values: list[str] = field(default_factory=list)


@dataclass
class SubjectiveWording:
    """How a condition set asks items without a key (``dataset.type=subjective``): nothing is "correct".

    ``version`` is empty for a set without subjective wording; a subjective run refuses such a set.
    """

    version: str = ""
    # The closing line every condition of the set ends with ({kind} as in the objective closing).
    closing: str = ""
    # Template condition name -> its subjective template (every template condition needs one).
    templates: dict[str, str] = field(default_factory=dict)
    # Instruction name -> its subjective text (every instruction a step names needs one).
    instructions: dict[str, str] = field(default_factory=dict)
    # System prompt name -> its subjective text (every system prompt a step names needs one).
    system_prompts: dict[str, str] = field(default_factory=dict)


@dataclass
class ConditionsConfig:
    """A versioned condition set: template ``conditions`` and/or step ``variants`` with the data they name."""

    name: str = MISSING
    template_version: str = MISSING
    closing: str = MISSING
    baseline: str = "P0"
    conditions: list[ConditionSpec] = field(default_factory=list)
    # Every step seed is derived from this (and the condition, step and question).
    seed: int = II("seed")
    base_format: FormatSpec | None = None
    variants: dict[str, VariantSpec] = field(default_factory=dict)
    formats: dict[str, FormatSpec] = field(default_factory=dict)
    label_sets: dict[str, list[str]] = field(default_factory=dict)
    instructions: dict[str, str] = field(default_factory=dict)
    synonyms: dict[str, list[str]] = field(default_factory=dict)
    protected_words: list[str] = field(default_factory=list)
    # Options a step adds (remove_answer: "None of the other options"), by wording name.
    added_options: dict[str, str] = field(default_factory=dict)
    # System prompts a `system` step puts in a system turn (prism.conditions.perturbations.turns), by name.
    system_prompts: dict[str, str] = field(default_factory=dict)
    # Draw name -> where in each question's frozen draw of demonstrations a `shots` step with `to: <name>` starts.
    draws: dict[str, int] = field(default_factory=dict)
    # Each family is an axis (prism.conditions.axes): nominal, ordinal or numeric, declared with the family.
    families: dict[str, FamilySpec] = field(default_factory=dict)
    # Cross these axes into a grid of every combination of their values (prism.conditions.grid); empty: a sweep.
    axes: list[str] = field(default_factory=list)
    # A set (or grid) with more conditions is refused before any request.
    max_conditions: int = 200
    subjective: SubjectiveWording = field(default_factory=SubjectiveWording)
