"""Prompt conditions: what a condition is, condition sets from config, axes, grids, and rendering.

The package's modules go one way, bottom first: ``perturbations/`` (checked, seeded steps), ``axes``
(each family as an axis), ``condition`` (:class:`Condition`, :class:`ConditionSet`, a grid cell's
:class:`Part`), ``grid`` (crossed axes), ``sets`` (a set from its config, checked) and ``prompts``
(a question under a condition, as the prompt a model is asked). The rest of PRISM imports the names
below from here.
"""

from prism.conditions.condition import FIELDS, Condition, ConditionError, ConditionSet, Part
from prism.conditions.prompts import fill, format_options, render, render_all, render_keyed
from prism.conditions.sets import (
    check_option_counts,
    condition_set_from_config,
    conditions_config,
    reordering_conditions,
    subjective_config,
    validate,
)

__all__ = [
    "FIELDS",
    "Condition",
    "ConditionError",
    "ConditionSet",
    "Part",
    "check_option_counts",
    "condition_set_from_config",
    "conditions_config",
    "fill",
    "format_options",
    "render",
    "render_all",
    "render_keyed",
    "reordering_conditions",
    "subjective_config",
    "validate",
]
