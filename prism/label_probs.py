"""The second reading of every answer: the first reply token's probabilities over the option labels.

A response says which option the model wrote; the distribution of its first token says which option it
preferred, and how strongly. With ``generation.label_probs=true`` each backend reads that distribution in
the same call as the generation and turns it into a :class:`~prism.types.LabelReading` with these pure
functions; scoring then maps the displayed labels back to canonical options (:func:`likelihood_fields`).

A label's probability is the mass of the tokens whose text, stripped of white space, is exactly the label
as displayed (``A``, `` A`` and ``A`` after a newline all count for ``A``). Labels that are not one token cannot be read
from the first position: :func:`check_label_sets` refuses them before anything is asked (see there for
the rule per source). No I/O here; numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from prism.errors import PrismError
from prism.types import LabelReading, Prompt

#: The raw-record fields of a reading, present only in runs with ``generation.label_probs=true``.
LABEL_FIELDS: tuple[str, ...] = ("label_probs", "label_mass", "top_logprobs", "label_probs_source")
#: The scored-record fields derived from them (absent when the record has no ``label_probs``).
LIKELIHOOD_FIELDS: tuple[str, ...] = ("option_probs", "likelihood_answer", "likelihood_correct")
#: How many top tokens are asked for and recorded: the most OpenAI-compatible servers return.
TOP_LOGPROBS = 20
FULL = "full"
TOP_K = "top_k"


class LabelProbsError(PrismError, ValueError):
    """Label probabilities were asked for but cannot be read as meant; the message says what to do."""


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-probabilities of a row of logits, in float64 (the float32 logits would lose the small ones)."""
    values = np.asarray(logits, dtype=np.float64)
    shifted = values - values.max()
    result: np.ndarray = shifted - math.log(float(np.exp(shifted).sum()))
    return result


def label_token_ids(token_texts: Sequence[str], labels: Iterable[str]) -> dict[str, list[int]]:
    """For each label, the ids of the vocabulary tokens whose stripped text is exactly that label.

    Args:
        token_texts: The text of every token of the vocabulary, indexed by token id.
        labels: The labels to look up.
    """
    wanted = {label: [] for label in labels}  # type: dict[str, list[int]]
    for token_id, text in enumerate(token_texts):
        key = text.strip()
        if key in wanted:
            wanted[key].append(token_id)
    return wanted


def reading_from_full(logprobs: np.ndarray, label_ids: Mapping[str, Sequence[int]],
                      token_text: Callable[[int], str], top_n: int = TOP_LOGPROBS) -> LabelReading:
    """Read the labels from the whole first-position distribution (``label_probs_source=full``).

    Args:
        logprobs: Log-probabilities of every vocabulary token at the first generated position.
        label_ids: For each displayed label, its token ids (:func:`label_token_ids`), in display order.
        token_text: The text of a token id, for the recorded top tokens.
        top_n: How many of the most likely tokens to record.
    """
    masses = {label: float(np.exp(logprobs[list(ids)]).sum()) if ids else 0.0 for label, ids in label_ids.items()}
    n = min(top_n, len(logprobs))
    best = np.argpartition(-logprobs, n - 1)[:n]
    best = best[np.lexsort((best, -logprobs[best]))]  # most likely first; equal ones by token id
    top = tuple((token_text(int(i)), float(logprobs[i])) for i in best)
    return _reading(masses, top, FULL)


def reading_from_top(top: Sequence[tuple[str, float]], labels: Sequence[str]) -> LabelReading:
    """Read the labels from a server's top-k list (``label_probs_source=top_k``).

    Labels outside the list count as 0; when none is in it the reading has no ``label_probs``.

    Args:
        top: (token text, log-probability) pairs of the first position, as returned.
        labels: The prompt's displayed labels, in display order.
    """
    masses = dict.fromkeys(labels, 0.0)
    for token, logprob in top:
        key = token.strip()
        if key in masses and math.isfinite(logprob):
            masses[key] += math.exp(logprob)
    return _reading(masses, tuple(top), TOP_K)


def _reading(masses: Mapping[str, float], top: tuple[tuple[str, float], ...], source: str) -> LabelReading:
    total = float(sum(masses.values()))
    probs = {label: mass / total for label, mass in masses.items()} if total > 0 else None
    return LabelReading(label_probs=probs, label_mass=total, top_logprobs=top, source=source)


def check_label_sets(label_sets: Mapping[str, Sequence[str]], backend: str, source: str,
                     label_ids: Mapping[str, Sequence[int]] | None = None) -> None:
    """Refuse, before anything is asked, labels whose probability the first reply token cannot give.

    - ``full`` (the embedded model, whose vocabulary is known): every displayed label must be a token of
      the vocabulary by itself (``label_ids`` non-empty for it). ``iii`` and ``10`` are read when the
      vocabulary has them as single tokens, and refused when the model can only spell them over several.
    - ``top_k`` (a server, whose vocabulary is unknown): every label must be one character. A longer one
      may be split by the tokenizer, and its first piece (``i`` of ``iii``, ``1`` of ``10``) would then be
      counted for another label or for none, without a trace in the numbers.

    Args:
        label_sets: Condition name -> the displayed labels of its prompts.
        backend: The backend's name, for the message.
        source: ``full`` or ``top_k``.
        label_ids: For ``full``, each label's token ids in the model's vocabulary.

    Raises:
        LabelProbsError: Naming the label, the condition and what to do instead.
    """
    for condition, labels in label_sets.items():
        for label in labels:
            if source == FULL and label_ids is not None and not label_ids.get(label):
                raise LabelProbsError(
                    f"generation.label_probs=true cannot read the label {label!r} of condition {condition!r}: no "
                    f"single token of the model's vocabulary is {label!r} (the {backend} model spells it over "
                    "several tokens), so the first reply token cannot say how much the model wanted it. Drop the "
                    "conditions with such labels, or set generation.label_probs=false."
                )
            if source == TOP_K and len(label) != 1:
                raise LabelProbsError(
                    f"generation.label_probs=true cannot read the label {label!r} of condition {condition!r} from "
                    f"the {backend} backend: a server returns only its top tokens, so PRISM cannot tell whether "
                    f"{label!r} is one token of the model's vocabulary, and a label the tokenizer splits would be "
                    "read wrongly without a trace. Run these conditions on the embedded backend (model.backend="
                    "llamacpp checks the vocabulary), drop them, or set generation.label_probs=false."
                )


def likelihood_fields(record: Mapping[str, Any], prompt: Prompt, correct_answer: str | None) -> dict[str, Any]:
    """The scored-record fields of the likelihood reading, or ``{}`` when the record has no ``label_probs``.

    - ``option_probs``: canonical label -> probability (the displayed labels mapped back through the prompt,
      so reordered and relabelled conditions are comparable);
    - ``likelihood_answer``: the canonical option with the highest probability; a tie goes to the first
      in display order;
    - ``likelihood_correct``: ``likelihood_answer == correct_answer``; absent for an item without an answer
      key (as with the text reading, it gets no accuracy).

    Raises:
        ValueError: If ``label_probs`` names a label the prompt did not display.
    """
    probs = record.get("label_probs")
    if not isinstance(probs, Mapping) or not probs:
        return {}
    strangers = sorted(set(probs) - set(prompt.displayed_labels))
    if strangers:
        raise ValueError(f"label_probs names {strangers}, which question {prompt.question_id!r} under condition "
                         f"{prompt.condition!r} did not display (labels {list(prompt.displayed_labels)})")
    ordered = [(prompt.canonical_for(label), float(probs.get(label, 0.0))) for label in prompt.displayed_labels]
    best_answer, best = ordered[0]
    for answer, p in ordered[1:]:
        if p > best:  # strictly greater: a tie keeps the earlier option in display order
            best_answer, best = answer, p
    fields: dict[str, Any] = {"option_probs": dict(ordered), "likelihood_answer": best_answer}
    if correct_answer is not None:
        fields["likelihood_correct"] = best_answer == correct_answer
    return fields
