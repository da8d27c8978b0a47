"""Condition sets from config: the conditions of ``prism/conf/conditions/*.yaml``, checked, as axes or a grid.

A condition set is data (``prism/conf/conditions/*.yaml``): a version, a closing line, a baseline and its
conditions, each in a family. A condition is one of two kinds:

- a *template condition* (``conditions:`` list, e.g. ``prism.yaml``'s P0-P4): a template whose fields
  ``{question}``, ``{options}`` and ``{closing}`` are filled by literal substitution, so dataset text
  containing braces, ``${...}`` or Jinja markers is shown as-is and never interpreted;
- a *step condition* (``variants:`` mapping, the perturbation sets): the unperturbed P0 rendering
  (``base_format``) with a list of checked, seeded perturbation steps applied (``prism.conditions.perturbations``).
  Its seed is derived from the set's ``seed``, which defaults to the run's.

Each family of the non-baseline conditions is an axis (:mod:`prism.conditions.axes`) with the scale declared under
``families:``. With ``axes:`` (``conditions.axes=[labels,option_order]``) the set becomes the grid of those
axes (:mod:`prism.conditions.grid`). A set of more than ``max_conditions`` conditions is refused before any request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields, replace
from typing import Any

from prism.conditions import grid
from prism.conditions.axes import Member, axes_of
from prism.conditions.condition import _FIELD_PATTERN, _NAME, FIELDS, Condition, ConditionError, ConditionSet
from prism.conditions.perturbations import Library, SpecError, Step, make_step
from prism.conditions.perturbations.build import seed_keys
from prism.conditions.perturbations.labels import Relabel
from prism.conditions.perturbations.missing import RemoveAnswer
from prism.conditions.perturbations.ops import format_from
from prism.conditions.perturbations.variant import Attribute
from prism.config import ConditionsConfig, ConditionSpec, FamilySpec, StepSpec, VariantSpec
from prism.types import Question


def condition_set_from_config(group: ConditionsConfig | Mapping[str, Any], *, subjective: bool = False) -> ConditionSet:
    """Build and validate a condition set from its config (``cfg.conditions``, or as a run logged it).

    Args:
        group: The ``conditions`` group, or the same as a mapping (a run's logged ``resolved.yaml``) with
            ``name``, ``template_version``, ``closing``, ``baseline``, and template
            ``conditions`` (a list of mappings with ``name``, ``description``, ``family``, ``template``)
            and/or step ``variants`` (name -> ``family``, ``description``, ``steps``) with the data their
            steps name (``base_format``, ``formats``, ``label_sets``, ``instructions``, ``synonyms``,
            ``protected_words``) and the ``seed``; ``families`` (family -> ``scale``, ``values``), the grid's
            ``axes`` and ``max_conditions`` (read with :func:`conditions_config`).
        subjective: Render with the set's ``subjective`` wording (items without a key): its closing line,
            templates and instructions replace the objective ones, and ``template_version`` becomes
            ``<version>+subjective.<subjective version>``.

    Returns:
        The validated condition set.

    Raises:
        ConditionError: If a name repeats or has characters a metric name cannot, the baseline is not a
            condition, a template lacks a field, repeats one, or does not end with the closing line, or a
            step cannot be built (unknown op, unknown name, missing count), a family's scale or values are
            wrong, a grid's axes cannot be crossed, or there are more than ``max_conditions`` conditions.
    """
    cfg = group if isinstance(group, ConditionsConfig) else conditions_config(group)
    where = f"condition set {cfg.name!r}"
    if subjective:
        cfg = subjective_config(cfg)
    baseline = cfg.baseline
    conditions = []
    for c in cfg.conditions:
        family = c.family or "instruction"
        conditions.append(Condition(name=c.name, description=c.description, template=c.template, family=family,
                                    levels=((family, c.name),) if c.name != baseline else (),
                                    cloze_target=c.cloze_target))
    base_format = None
    try:
        library = Library.from_config(cfg)
        if cfg.base_format is not None:
            base_format = format_from(cfg.base_format, "base_format")
        for name, spec in cfg.variants.items():
            steps = tuple(make_step(step, library) for step in spec.steps)
            conditions.append(Condition(name=name, description=spec.description, family=spec.family, steps=steps,
                                        keys=seed_keys(name, spec.family, steps),
                                        levels=((spec.family, name),) if name != baseline else ()))
    except SpecError as exc:
        raise ConditionError(f"{where}: {exc}") from exc
    sweep = ConditionSet(
        name=cfg.name,
        template_version=cfg.template_version,
        closing=library.closing,  # the library read it from the same config, for the steps that use it
        baseline=baseline,
        conditions=tuple(conditions),
        seed=cfg.seed or 0,
        base_format=base_format,
    )
    validate(sweep)
    return _design(sweep, cfg, where)


def conditions_config(mapping: Mapping[str, Any]) -> ConditionsConfig:
    """A condition set given as a mapping (a run's logged ``resolved.yaml``, a set's YAML file) as its typed config.

    Raises:
        ConditionError: If a condition, variant, step or family has a key nobody reads (listing the known
            ones), or a value the schema refuses (naming it).
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    where = f"condition set {mapping.get('name')!r}"
    _known_keys(where, "condition", mapping.get("conditions") or (), _spec_keys(ConditionSpec))
    variants: Mapping[str, Any] = mapping.get("variants") or {}
    _known_keys(where, "variant", variants.values(), _spec_keys(VariantSpec))
    _known_keys(where, "step", [s for v in variants.values() for s in v.get("steps") or ()], _spec_keys(StepSpec))
    _known_keys(where, "family", (mapping.get("families") or {}).values(), _spec_keys(FamilySpec))
    # A mapping written by hand may leave a part empty (``variants:`` with nothing under it): the default.
    given = {str(key): value for key, value in mapping.items() if value is not None or key == "base_format"}
    # The schema's seed follows the run's (``${seed}``); a set read on its own has no run: seed 0, as before.
    given.setdefault("seed", 0)
    try:
        typed = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(ConditionsConfig), given))
    except OmegaConfBaseException as exc:
        raise ConditionError(f"{where} cannot be read: {exc}. Fix the named key in the condition set.") from exc
    assert isinstance(typed, ConditionsConfig)
    return typed


def _spec_keys(spec: type) -> tuple[str, ...]:
    """The keys a spec of a condition set may have: its schema's fields."""
    return tuple(f.name for f in fields(spec))


def _design(sweep: ConditionSet, cfg: ConditionsConfig, where: str) -> ConditionSet:
    """The sweep with its axes, or the grid of the axes named in ``cfg.axes``; refused when too large."""
    max_conditions = cfg.max_conditions
    chosen = tuple(cfg.axes)
    try:
        if max_conditions < 1:
            raise SpecError(f"conditions.max_conditions={max_conditions} must be at least 1")
        members = [Member(c.name, c.family, None if c.steps is None else _changes(c.steps)) for c in sweep.conditions]
        axes = axes_of(members, sweep.baseline, cfg.families)
        if not chosen:
            if len(sweep.conditions) > max_conditions:
                raise SpecError(f"it has {len(sweep.conditions)} conditions, more than conditions.max_conditions="
                                f"{max_conditions}; raise the limit with conditions.max_conditions="
                                f"{len(sweep.conditions)}")
            return replace(sweep, axes=axes)
        cells, grid_axes = grid.compose(sweep.conditions, grid.choose_axes(axes, chosen, sweep.baseline,
                                                                           max_conditions), sweep.baseline)
    except SpecError as exc:
        raise ConditionError(f"{where}: {exc}") from exc
    condition_set = replace(sweep, conditions=tuple(cells), axes=grid_axes, grid=chosen)
    validate(condition_set)
    return condition_set


def _changes(steps: Iterable[Step]) -> frozenset[Attribute]:
    """Every attribute some step of a condition may change."""
    found: set[Attribute] = set()
    for step in steps:
        found |= step.changes
    return frozenset(found)


def subjective_config(cfg: ConditionsConfig) -> ConditionsConfig:
    """The condition set's config with its ``subjective`` wording in place of the objective one.

    Raises:
        ConditionError: The set has no subjective wording, or leaves a template condition or an instruction
            without its subjective text (the message names it and where to add it).
    """
    where = f"condition set {cfg.name!r}"
    wording = cfg.subjective
    if not wording.version or not wording.closing:
        raise ConditionError(f"{where} has no subjective wording, so it cannot ask items without an answer key "
                             "(dataset.type=subjective): add 'subjective: {version, closing, templates, "
                             "instructions}' to it, or use a set that has one (prism, robustness and the "
                             "perturbation sets do).")
    conditions = []
    for condition in cfg.conditions:
        if condition.name not in wording.templates:
            raise ConditionError(f"{where}: condition {condition.name!r} has no subjective template; add it "
                                 f"under subjective.templates.{condition.name}.")
        conditions.append(replace(condition, template=wording.templates[condition.name]))
    missing = sorted(set(cfg.instructions) - set(wording.instructions))
    if missing:
        raise ConditionError(f"{where}: instructions {missing} have no subjective wording; add them under "
                             "subjective.instructions.")
    missing = sorted(set(cfg.system_prompts) - set(wording.system_prompts))
    if missing:
        raise ConditionError(f"{where}: system prompts {missing} have no subjective wording; add them under "
                             "subjective.system_prompts.")
    return replace(cfg, closing=wording.closing, conditions=conditions,
                   instructions={name: wording.instructions[name] for name in cfg.instructions},
                   system_prompts={name: wording.system_prompts[name] for name in cfg.system_prompts},
                   template_version=f"{cfg.template_version}+subjective.{wording.version}")


def _known_keys(where: str, what: str, specs: Iterable[Mapping[str, Any]], known: tuple[str, ...]) -> None:
    """Refuse a spec with a key nobody reads (a typo the schema did not catch, e.g. a ``+key=`` override)."""
    for spec in specs:
        unknown = sorted(set(spec) - set(known))
        if unknown:
            raise ConditionError(f"{where}: a {what} has unknown keys {unknown}; known keys: {list(known)}.")


def validate(condition_set: ConditionSet) -> None:
    """Check that every template can be rendered and ends with the closing line.

    Raises:
        ConditionError: Naming the condition set, the condition and what is wrong with it.
    """
    where = f"condition set {condition_set.name!r}"
    if not condition_set.conditions:
        raise ConditionError(f"{where} has no conditions; list at least one under 'conditions:'.")
    names = condition_set.names
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConditionError(f"{where} repeats condition names {repeated}; every name must be unique.")
    if condition_set.baseline not in names:
        raise ConditionError(f"{where}: baseline {condition_set.baseline!r} is not one of its conditions {names}.")
    for condition in condition_set.conditions:
        for what, value in (("condition name", condition.name), ("family", condition.family)):
            # Names become metric names and file names, so '.' and '..' (a path's own segments) are refused too.
            if not _NAME.fullmatch(value) or value in (".", ".."):
                raise ConditionError(f"{where}: {what} {value!r} may use only letters, digits, '_', '.' and '-', "
                                     "and may not be '.' or '..'.")
        if condition.steps is not None:
            if condition_set.base_format is None:
                raise ConditionError(f"{where}, condition {condition.name!r}: steps need a 'base_format:' to start "
                                     "from (the P0 layout).")
            continue
        found = _FIELD_PATTERN.findall(condition.template)
        if condition.cloze_target is not None:
            _validate_cloze(where, condition, found)
            continue
        for name in FIELDS:
            if found.count(name) != 1:
                raise ConditionError(
                    f"{where}, condition {condition.name!r}: the template must contain {{{name}}} exactly once "
                    f"(found {found.count(name)})."
                )
        if not condition.template.rstrip().endswith("{closing}"):
            raise ConditionError(
                f"{where}, condition {condition.name!r}: the template must end with {{closing}} so every "
                "prompt ends with the same output requirement."
            )


def _validate_cloze(where: str, condition: Condition, found: list[str]) -> None:
    """A condition in lm-eval's own form: its question once, its options at most once, no closing line.

    A ``label`` continuation needs the labels shown; a ``text`` one may leave the options out (lm-eval's ARC).

    Raises:
        ConditionError: Naming the condition and what is wrong with its template or target.
    """
    if condition.cloze_target not in ("label", "text"):
        raise ConditionError(f"{where}, condition {condition.name!r}: cloze_target {condition.cloze_target!r} must be "
                             "label or text.")
    wanted = {"question": (1, 1), "options": (1 if condition.cloze_target == "label" else 0, 1), "closing": (0, 0)}
    for name, (low, high) in wanted.items():
        if not low <= found.count(name) <= high:
            raise ConditionError(f"{where}, condition {condition.name!r} (cloze_target {condition.cloze_target}): the "
                                 f"template must contain {{{name}}} {low if low == high else f'{low} to {high}'} "
                                 f"time(s) (found {found.count(name)}); a label continuation needs the options shown.")


def check_option_counts(condition_set: ConditionSet, questions: Iterable[Question]) -> None:
    """Refuse, before any inference, a condition whose label set cannot label every question's options.

    A condition that removes the correct option (:class:`prism.conditions.perturbations.missing.RemoveAnswer`) also
    refuses questions it cannot ask that way (an option speaking of the others, no answer key).

    Raises:
        ConditionError: Naming the condition, its family, the label set and the option counts it cannot cover.
        PerturbationError: Naming the questions a removal step cannot ask, and how to leave them out.
    """
    questions = list(questions)
    counts = sorted({len(q.options) for q in questions})
    for condition in condition_set.conditions:
        for step in condition.steps or ():
            if isinstance(step, RemoveAnswer):  # also refuses items it cannot ask (listed at once)
                step.check_questions(questions, f"condition set {condition_set.name!r}, condition {condition.name!r}")
            if not isinstance(step, Relabel):
                continue
            uncovered = [count for count in counts if not step.covers(count)]
            coverable = ",".join(str(count) for count in counts if step.covers(count))
            if uncovered:
                raise ConditionError(
                    f"condition set {condition_set.name!r}, condition {condition.name!r} (family "
                    f"{condition.family!r}): label set {step.set_name!r} has {len(step.new_labels)} labels, but "
                    f"the frozen questions include {uncovered[0]}-option questions (counts {counts}). No model was "
                    f"asked anything. Keep questions it can label ('dataset.options=[{coverable}]'), "
                    f"give conditions.label_sets.{step.set_name} more labels, or use a condition set without "
                    f"{condition.name!r}."
                )


def reordering_conditions(condition_set: ConditionSet) -> list[str]:
    """Conditions that show the options out of their frozen order (the ``option_order`` family's steps).

    On an ordered scale (``dataset.ordinal``) these break the scale's order, which the run says.
    """
    from prism.conditions.perturbations.order import Reverse, Rotate, Shuffle, SwapEnds

    reorders = (Reverse, Rotate, Shuffle, SwapEnds)
    return [c.name for c in condition_set.conditions if any(isinstance(step, reorders) for step in c.steps or ())]
