"""A prompt longer than the model's context is refused before inference, naming the condition and its tokens.

Few-shot prompts (``conditions=fewshot``: eight demonstrations before an MMLU question) can outgrow a small context,
and a server then cuts or refuses them one by one mid-run. A backend whose registry entry declares
``context_window`` says its context (the embedded model's ``model.n_ctx``; a server whose model list gives one, e.g.
vLLM's ``max_model_len``). Tokens are counted by the backend's own tokenizer over the whole conversation as its chat
template renders it when its entry declares ``prompt_tokens`` (the embedded model), else estimated as characters / 4
(the dry run's estimate; the message says so). Only prompts whose UTF-8 bytes could reach the limit are counted
exactly (a token is at least one byte), so a run of short prompts costs nothing here.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence

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


def check_context(window: int | None, counter: Callable[[Prompt], int] | None, prompts: Sequence[Prompt],
                  max_tokens: int, where: str) -> None:
    """Refuse the run when a prompt plus ``max_tokens`` generated tokens exceeds the backend's context.

    Args:
        window: The context the backend says (:func:`prism.backends.registry.context_window`, read after its
            identity: a server's context comes with its listing); None: nothing is checked.
        counter: The backend's own count of a conversation's tokens
            (:func:`prism.backends.registry.prompt_token_counter`); None: estimated from characters.
        prompts: Every prompt of the run.
        max_tokens: The most tokens a reply may take (``generation.max_tokens``).
        where: What to name the setting by (``model.n_ctx``, or the server).

    Raises:
        ContextError: Naming the condition, the question, the prompt's tokens and the limit, and how to fit it.
    """
    if not window:
        log.debug("the backend does not say its context; prompt lengths are not checked against it")
        return
    limit = int(window) - max_tokens
    exact = counter is not None
    worst: tuple[int, Prompt] | None = None
    for prompt in prompts:
        if counter is not None:
            if _byte_bound(prompt) <= limit:
                continue
            tokens = int(counter(prompt))
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
