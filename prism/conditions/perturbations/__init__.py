"""Perturbation families: checked, seeded steps that turn P0 into other semantically equivalent prompts.

A variant is a frozen question plus a rendering (:class:`~prism.conditions.perturbations.variant.Variant`). A
condition of a perturbation set (``prism/conf/conditions/option_order.yaml`` and its siblings) lists steps;
each step is a pure function of (variant, seed) that declares which attributes it may change:

====================  ===========================================  =====================
step (``op:``)        what it does                                 attributes
====================  ===========================================  =====================
``reverse``           options in reverse order                     order
``rotate``            every option ``count`` places down, wrapped  order
``swap_ends``         first and last option trade places           order
``shuffle``           a seeded non-identity permutation            order
``relabel``           another label set (``to:``), same order      labels (and closing)
``reformat``          another surface format (``to:``)             format
``instruct``          an instruction paragraph (``to:``)           instruction
``synonyms``          seeded near-synonym swaps in the instruction instruction
``typos``             seeded readable typos, ``count`` per field   instruction, stem
``nested_typos``      exactly ``count`` typos in both fields, the  instruction, stem
                      levels of one family nested
``remove_answer``     the correct option out, an added one         answer (causal: the
                      (``to:``) last; it becomes the key           key moves)
``system``            a system turn with a system prompt (``to:``) turn
====================  ===========================================  =====================

and ``instruction_to_system`` (attribute ``turn``), which moves the instruction paragraph from the user turn
into the system turn word for word (:mod:`prism.conditions.perturbations.turns`).

Every step's output is checked (:mod:`prism.conditions.perturbations.checks`) while the requests are built, before
any model sees a prompt; a failure raises :class:`PerturbationError` naming the question and the step.
"""

from prism.conditions.perturbations.build import build_prompt
from prism.conditions.perturbations.ops import Library, Op, make_step, register_op
from prism.conditions.perturbations.step import Step
from prism.conditions.perturbations.variant import Format, PerturbationError, SpecError, Variant

__all__ = ["Format", "Library", "Op", "PerturbationError", "SpecError", "Step", "Variant", "build_prompt", "make_step",
           "register_op"]
