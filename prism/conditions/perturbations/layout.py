"""Format steps: the same content in another surface format (attribute ``format``).

Separators, casing of section words, spacing, wrappers and field layout are all data (a ``Format``
named in the condition set); this step only swaps one format for another.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from prism.conditions.perturbations.ops import Op, named, register_op
from prism.conditions.perturbations.variant import Attribute, Format, Variant


@dataclass(frozen=True)
class Reformat:
    """Render the variant in the format ``new_format`` (named ``format_name`` in the set).

    Attributes:
        format_name: Name of the format (for messages).
        new_format: The format.
    """

    format_name: str
    new_format: Format
    changes: frozenset[Attribute] = frozenset({"format"})

    @property
    def name(self) -> str:
        """``reformat(<format>)``."""
        return f"reformat({self.format_name})"

    def apply(self, variant: Variant, seed: int) -> Variant:
        """Swap the format (the seed is unused)."""
        return replace(variant, format=self.new_format)

    def verify(self, before: Variant, after: Variant) -> str | None:
        """The format must render, and must actually differ from the one it replaces."""
        problems = after.format.problems()
        if problems:
            return "; ".join(problems)
        if after.format == before.format:
            return "the new format is the same as the old one"
        return None


register_op(Op("reformat", lambda spec, library: Reformat(str(spec.to), named(library, "formats", spec.to)),
               Reformat, takes="formats"))
