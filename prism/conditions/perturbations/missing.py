"""A causal step: the correct option is removed and "None of the other options" takes its place as the last.

Every other PRISM step keeps the correct answer where it was (an invariant step). ``remove_answer`` moves it:
the correct option is left out, the other options keep their order, and an added option (its wording from
the condition set's ``added_options``, versioned with the set's ``template_version``) is shown last, so the
reference answer becomes that option. The added option gets its own canonical label, the next letter after
the question's own (``E`` for a four-option question), which scoring accepts like any other; the number of
options, and so the displayed labels and the closing, stay as they were.

The step reads the variant's key to know which option to remove, and declares attribute ``answer`` (the
options and the key); the key travels on the variant to scoring only, never into the prompt or the parser.
Its checks prove the new key is the added option, shown last, and that the removed text is no longer a
shown option (:func:`prism.conditions.perturbations.checks.removed_text` then reads the whole prompt).

Some questions cannot be asked this way, and a run including them is refused before any request
(:meth:`RemoveAnswer.check_questions`), listing every such question at once:

- an item without an answer key: there is no correct option to remove;
- a question with an option that speaks of the other options ("none of the above", "all of these", "both
  of them", "neither"): removing the correct option would make "None of the other options" a second such
  option, or (when "all of the above" is correct) make every remaining option true, so the new reference
  would not be the one correct answer. Such questions are left out with ``dataset.exclude=[...]``.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from dataclasses import dataclass, replace

from prism.conditions.perturbations.ops import Library, Op, named, register_op
from prism.conditions.perturbations.variant import Attribute, PerturbationError, SpecError, Variant
from prism.config import StepSpec
from prism.types import Question

# Options that speak of the other options. Matched anywhere in an option, ignoring case.
_META_OPTION = re.compile(
    r"\b(?:none|all|neither|both|each|any)\s+of\s+(?:the\s+)?(?:above|below|these|those|them|others?|"
    r"other\s+\w+|options|answers|choices)\b|^\s*(?:none|neither|all|both)\s*[.!]?\s*$",
    re.IGNORECASE,
)


def speaks_of_other_options(option: str) -> bool:
    """Whether an option refers to the others ("None of the above", "all of these", a bare "Neither")."""
    return _META_OPTION.search(option) is not None


def next_label(labels: Iterable[str]) -> str:
    """The canonical label after the question's own: ``E`` after ``A``-``D`` (canonical labels are letters)."""
    last = max(labels)
    position = string.ascii_uppercase.index(last) + 1
    if position >= len(string.ascii_uppercase):
        raise PerturbationError(f"no canonical letter after {last!r} for an added option")
    return string.ascii_uppercase[position]


@dataclass(frozen=True)
class RemoveAnswer:
    """Leave the correct option out and show ``text`` last, under the next canonical label; it becomes the key.

    Attributes:
        wording: The name of the wording in the condition set's ``added_options``.
        text: The added option's text ("None of the other options").
    """

    wording: str
    text: str

    @property
    def name(self) -> str:
        """Short name for messages."""
        return f"remove_answer({self.wording})"

    @property
    def changes(self) -> frozenset[Attribute]:
        """The option set and its key."""
        return frozenset({"answer"})

    def apply(self, variant: Variant, seed: int) -> Variant:
        """Remove the key's option, append the added one; a variant without a frozen key shown is left as is.

        ``seed`` is unused: the step is deterministic. A variant it cannot change (no key, a key not shown,
        or a key that is already an added option) comes back unchanged, and :meth:`verify` names the problem.
        """
        del seed
        if variant.key is None or variant.key not in variant.canonical or variant.key in dict(variant.added):
            return variant
        at = variant.canonical.index(variant.key)
        label = next_label([*variant.canonical, *(added for added, _ in variant.added)])
        return replace(
            variant,
            options=(*variant.options[:at], *variant.options[at + 1:], self.text),
            canonical=(*variant.canonical[:at], *variant.canonical[at + 1:], label),
            key=label,
            added=(*variant.added, (label, self.text)),
        )

    def verify(self, before: Variant, after: Variant) -> str | None:
        """The key moved to the added option, shown last, and the removed option is no longer shown."""
        if before.key is None:
            return "the item has no answer key, so there is no correct option to remove"
        if before.key not in before.canonical or before.key in dict(before.added):
            return (f"the key {before.key} is not a frozen option shown, so it cannot be removed (remove_answer "
                    "applies once)")
        removed = before.options[before.canonical.index(before.key)]
        if after.key is None or after.key in before.canonical or (after.key, self.text) not in after.added:
            return f"the new key {after.key!r} is not the added option {self.text!r}"
        if after.canonical[-1] != after.key or after.options[-1] != self.text:
            return f"the added option {self.text!r} is not the last one shown"
        if len(after.options) != len(before.options):
            return f"{len(before.options)} options became {len(after.options)}; one is removed and one added"
        if removed.strip().casefold() in {option.strip().casefold() for option in after.options}:
            return f"the removed option {removed!r} is still shown"
        return None

    def check_questions(self, questions: Iterable[Question], where: str) -> None:
        """Refuse, before any request, the questions this step cannot ask (see the module docstring).

        Raises:
            PerturbationError: Listing every such question and how to leave them out.
        """
        keyless = [q.question_id for q in questions if q.answer is None]
        if keyless:
            raise PerturbationError(
                f"{where}: step {self.name} removes the correct option, but {len(keyless)} items have no answer "
                f"key (e.g. {keyless[:3]}). No model was asked anything. Use it on a dataset with an answer key, "
                "or a condition set without it.")
        meta = [q.question_id for q in questions if any(speaks_of_other_options(o) for o in q.options)
                or any(o.strip().casefold() == self.text.strip().casefold() for o in q.options)]
        if meta:
            ids = ",".join(meta)
            raise PerturbationError(
                f"{where}: step {self.name} cannot ask {len(meta)} question(s) whose options speak of the other "
                f"options ('none of the above', 'all of these', ...): {meta}. Removing their correct option would "
                f"leave two such options, or make the remaining ones true, so {self.text!r} would not be the one "
                f"correct answer. No model was asked anything. Leave them out with dataset.exclude=[{ids}], or "
                "use a condition set without this step.")


def _remove_answer(spec: StepSpec, library: Library) -> RemoveAnswer:
    text = str(named(library, "added_options", spec.to))
    if not text.strip():
        raise SpecError(f"added_options.{spec.to} is empty; the added option needs a text")
    return RemoveAnswer(str(spec.to), text)


register_op(Op("remove_answer", _remove_answer, RemoveAnswer, takes="added_options"))
