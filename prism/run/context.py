"""A prompt longer than the model's context is refused before inference, naming the condition and its tokens.

Few-shot prompts (``conditions=fewshot``: eight demonstrations before an MMLU question) can outgrow a small
context, and a server then cuts or refuses them one by one mid-run. The backend says its context when it knows
it (``context_window()``: the embedded model's ``model.n_ctx``; a server whose model list gives one, e.g. vLLM's
``max_model_len``). Tokens are counted by the backend's own tokenizer over the whole conversation as its chat
template renders it (``prompt_tokens(prompt)``, the embedded model), else estimated as characters / 4 (the dry
run's estimate; the message says so). Only prompts whose UTF-8 bytes could reach the limit are counted exactly (a
token is at least one byte), so a run of short prompts costs nothing here.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

from prism.backends.base import Backend
from prism.errors import ConfigError
from prism.types import Prompt

log = logging.getLogger(__name__)

#: Characters per token of the estimate used when the backend has no tokenizer (as in prism.run.dry_run).
CHARS_PER_TOKEN = 4
#: Bytes a chat template may add per turn (role markers, separators): part of the byte bound only.
TEMPLATE_BYTES_PER_TURN = 32


class ContextError(ConfigError):
    """A prompt (with the tokens it may generate) does not fit the model's context."""


def _byte_bound(prompt: Prompt) -> int:
    return sum(len(turn.content.encode("utf-8")) + TEMPLATE_BYTES_PER_TURN for turn in prompt.turns)


def check_context(backend: Backend, prompts: Sequence[Prompt], max_tokens: int, where: str) -> None:
    """Refuse the run when a prompt plus ``max_tokens`` generated tokens exceeds the backend's context.

    Args:
        backend: The run's backend (after its identity was read: a server's context comes with its listing).
        prompts: Every prompt of the run.
        max_tokens: The most tokens a reply may take (``generation.max_tokens``).
        where: What to name the setting by (``model.n_ctx``, or the server).

    Raises:
        ContextError: Naming the condition, the question, the prompt's tokens and the limit, and how to fit it.
    """
    window_of = getattr(backend, "context_window", None)
    window = window_of() if callable(window_of) else None
    if not window:
        log.debug("the backend does not say its context; prompt lengths are not checked against it")
        return
    limit = int(window) - max_tokens
    counter = getattr(backend, "prompt_tokens", None)
    exact = callable(counter)
    worst: tuple[int, Prompt] | None = None
    for prompt in prompts:
        if exact:
            if _byte_bound(prompt) <= limit:
                continue
            tokens = int(counter(prompt))  # type: ignore[misc]  # callable checked above
        else:
            tokens = math.ceil(sum(len(turn.content) for turn in prompt.turns) / CHARS_PER_TOKEN)
        if tokens > limit and (worst is None or tokens > worst[0]):
            worst = (tokens, prompt)
    if worst is None:
        return
    tokens, prompt = worst
    counted = "counted by the model's tokenizer through its chat template" if exact else \
        f"estimated as characters / {CHARS_PER_TOKEN}: this backend has no tokenizer at hand"
    over = sorted({p.condition for p in prompts if p.condition == prompt.condition})
    raise ContextError(
        f"condition {prompt.condition!r} (question {prompt.question_id!r}) asks a prompt of {tokens} tokens "
        f"({counted}), and with generation.max_tokens={max_tokens} that exceeds the context of {window} tokens "
        f"({where}): the model would see it cut or refuse it. No model was asked anything. Raise the context "
        f"({where}), ask fewer demonstrations (a condition set without {over[0]!r}), or leave long questions out "
        "(dataset.subjects, dataset.exclude)."
    )
