"""One registry of perturbation ops: each ``op:`` a condition set may name is one entry that builds its step.

A step module (``order``, ``labels``, ``layout``, ``text``, ``spelling``, ``missing``, or a lab's own) defines
its step classes and registers an :class:`Op` for each name a condition set may write; nothing else names
it. :func:`make_step` finds the op by name, checks ``to:`` against what the op takes, and hands the spec and
the set's :class:`Library` (the named data steps refer to) to its builder. The registry is filled by
importing this package's modules on the first look-up, so a new built-in op is its module alone; code
outside the package (a test, a lab's op) adds one with :func:`register_op`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prism.conditions.perturbations.step import Step
from prism.conditions.perturbations.variant import Format, SpecError
from prism.config import ConditionsConfig, FormatSpec, StepSpec


def format_from(spec: FormatSpec, where: str) -> Format:
    """Build a :class:`Format` from its config, refusing one that cannot render."""
    fmt = Format(layout=spec.layout, option=spec.option, option_separator=spec.option_separator,
                 paragraph=spec.paragraph)
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
        system_prompts: System prompt name -> its text (``system`` steps, :mod:`prism.conditions.perturbations.turns`).
        draws: Draw name -> where in each question's frozen draw of demonstrations it starts (``shots`` steps,
            :mod:`prism.conditions.perturbations.shots`).
    """

    closing: str
    formats: Mapping[str, Format] = field(default_factory=dict)
    label_sets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    instructions: Mapping[str, str] = field(default_factory=dict)
    synonyms: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    protected_words: frozenset[str] = frozenset()
    added_options: Mapping[str, str] = field(default_factory=dict)
    system_prompts: Mapping[str, str] = field(default_factory=dict)
    draws: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: ConditionsConfig) -> Library:
        """Read the library out of a condition set's config (missing parts are empty)."""
        return cls(
            closing=cfg.closing,
            formats={name: format_from(spec, f"format {name!r}") for name, spec in cfg.formats.items()},
            label_sets={name: tuple(labels) for name, labels in cfg.label_sets.items()},
            instructions=dict(cfg.instructions),
            synonyms={word: tuple(words) for word, words in cfg.synonyms.items()},
            protected_words=frozenset(word.lower() for word in cfg.protected_words),
            added_options=dict(cfg.added_options),
            system_prompts=dict(cfg.system_prompts),
            draws=dict(cfg.draws),
        )


def named(library: Library, kind: str, name: Any) -> Any:
    """The entry of the library table ``kind`` that a step's ``to:`` names; refused when there is none."""
    table: Mapping[str, Any] = getattr(library, kind)
    if name is None or str(name) not in table:
        raise SpecError(f"'to: {name}' names no entry of {kind}; known: {sorted(table)}")
    return table[str(name)]


def count_of(spec: StepSpec, op: str, default: int | None, allow_all: bool = False) -> int | None:
    """A step's ``count:``, or ``default`` without one (an error when there is no default, unless ``allow_all``)."""
    count = spec.count
    if count is None:
        if default is None and not allow_all:
            raise SpecError(f"step {op!r} needs 'count:'")
        return default
    if int(count) < 1:
        raise SpecError(f"step {op!r}: count must be at least 1, not {count}")
    return int(count)


@dataclass(frozen=True)
class Op:
    """One step name of the condition sets' ``op:`` and how to build its step.

    Attributes:
        name: What a condition set writes (``op: reverse``).
        build: Builds the step from its spec (``to``, ``count``, ...) and the set's library; raises
            :class:`SpecError` for a spec it cannot build.
        step_type: The class of the steps it builds.
        takes: The library table ``to:`` names (``label_sets``, ``formats``, ...), None when the op takes
            no ``to:``.
        family_seeded: Steps whose levels nest (``nested_typos``): their seed is keyed by the family, not the
            condition, so every level of the family sees one draw per question.
    """

    name: str
    build: Callable[[StepSpec, Library], Step]
    step_type: type
    takes: str | None = None
    family_seeded: bool = False


_OPS: dict[str, Op] = {}
_discovered = False


def register_op(op: Op) -> Op:
    """Add ``op`` to the registry and return it; the same op again is harmless, another under its name not.

    Raises:
        SpecError: If another op already has this name.
    """
    known = _OPS.get(op.name)
    if known is not None and known != op:
        raise SpecError(f"a perturbation op named {op.name!r} is registered already ({known.step_type.__name__}); "
                        "give the new one another name.")
    _OPS[op.name] = op
    return op


def ops() -> dict[str, Op]:
    """Every registered op by name, the built-in ones included."""
    global _discovered
    if not _discovered:
        package = importlib.import_module("prism.conditions.perturbations")
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"prism.conditions.perturbations.{module.name}")
        _discovered = True
    return dict(_OPS)


def family_seeded_types() -> tuple[type, ...]:
    """The step classes whose seeds are keyed by their family (:attr:`Op.family_seeded`)."""
    return tuple(op.step_type for op in ops().values() if op.family_seeded)


def make_step(spec: StepSpec, library: Library) -> Step:
    """Build one step from its spec (``op``, and ``to`` / ``count`` where the op takes them).

    Raises:
        SpecError: For an unknown op (listing the known ones), a missing or unknown ``to``, or a bad count.
    """
    name = spec.op
    known = ops()
    if name not in known:
        raise SpecError(f"unknown step op {name!r}; known: {sorted(known)}")
    op = known[name]
    if op.takes is None and spec.to is not None:
        raise SpecError(f"step {name!r} takes no 'to:'")
    return op.build(spec, library)
