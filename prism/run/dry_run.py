"""A dry run: what a run would ask and what it would cost, with nothing sent to the model server.

``python -m prism ... dry_run=true`` checks every input as a run does, renders every prompt, and prints the
cells, how many the completion store already holds, the requests left, the estimated prompt tokens of those
requests and, with ``model.pricing``, the estimated cost; then it exits 0 without an MLflow run.

Store keys hold the model's digest. An embedded model or a replay file gives its identity without a server
(a hash of a local file); a server is never asked in a dry run, so for a remote backend the dry run uses the
identity last recorded for that backend, model name and address in the store's ``identities`` table
(every run records the identity it read there). With none recorded, how many cells the store holds is
unknown until the first request, and every cell is counted as a request (an upper bound).

Prompt tokens are counted with the model's own tokenizer where one is at hand (the embedded llama.cpp
model; the chat template's own tokens are not included), otherwise estimated as characters / 4 and said
so. The cost is an upper bound on output: every request is priced at ``generation.max_tokens`` output
tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from prism.backends.base import Backend
from prism.backends.pool import EndpointPool
from prism.backends.registry import create_backend, keyed_settings, token_counter
from prism.backends.remote import RemoteBackend
from prism.conditions import check_option_counts, condition_set_from_config, render_all
from prism.config import PrismConfig
from prism.questions import freeze_dataset
from prism.run.cells import CellGrid
from prism.run.fewshot import with_demonstrations
from prism.run.generation import repetition_params
from prism.run.store import CompletionStore
from prism.run.usage import cost_usd
from prism.types import ModelIdentity

#: How the prompt tokens were counted when no tokenizer is at hand.
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class RunPlan:
    """What a run of this config would ask.

    Attributes:
        cells: Cells of the run (questions x conditions x repetitions).
        held: Cells the store already holds, or None when unknown (no identity recorded for the server).
        requests: Requests left to send (cells not held; all of them when ``held`` is None).
        prompt_tokens: Estimated prompt tokens of those requests.
        token_method: How they were counted (``tokenizer`` or ``chars/4``).
        max_completion_tokens: ``requests x generation.max_tokens``, the most output they can cost.
        cost_usd: Estimated cost at ``model.pricing`` (output at its maximum), or None without prices.
        identity: Where the digest came from (``local``, ``recorded <time>``, or ``unknown``).
        model: ``model.name``; backend: ``model.backend``.
    """

    cells: int
    held: int | None
    requests: int
    prompt_tokens: int
    token_method: str
    max_completion_tokens: int
    cost_usd: float | None
    identity: str
    model: str
    backend: str


def plan_run(cfg: PrismConfig) -> RunPlan:
    """Check the inputs and count what a run would ask, sending nothing to a model server.

    Raises:
        PrismError: For any input a run would refuse (the same checks, in the same words).
    """
    condition_set = condition_set_from_config(cfg.conditions, subjective=cfg.dataset.subjective)
    backend = create_backend(cfg.model)
    try:
        frozen = freeze_dataset(cfg.dataset)
        check_option_counts(condition_set, frozen.questions)
        frozen, _ = with_demonstrations(cfg.dataset, frozen, condition_set)
        prompts = render_all(frozen.questions, condition_set)
        params = repetition_params(cfg.generation)
        store_path = Path(cfg.store.path)
        store = CompletionStore(store_path) if cfg.store.enabled and store_path.exists() else None
        try:
            identity, source = _identity(backend, cfg, store)
            keys: list[str] = []
            if identity is not None:
                grid = CellGrid(prompts, params, [q.question_id for q in frozen.questions], condition_set.names,
                                identity, frozen.dataset, frozen.split, keyed_settings(cfg.model))
                keys = [cell.key for cell in grid]
            cells = len(prompts) * len(params)
            if identity is None:
                held: int | None = None
                missing = [(p.text, r) for r in range(len(params)) for p in prompts]
            else:
                present = _present(store, keys)
                held = len(present)
                missing = [(prompts[i % len(prompts)].text, i // len(prompts)) for i, key in enumerate(keys)
                           if key not in present]
        finally:
            if store is not None:
                store.close()
        counter = token_counter(backend, cfg.model.backend)
        if counter is not None:
            prompt_tokens, method = sum(int(counter.count_tokens(text)) for text, _ in missing), "tokenizer"
        else:
            prompt_tokens = sum(math.ceil(len(text) / CHARS_PER_TOKEN) for text, _ in missing)
            method = f"chars/{CHARS_PER_TOKEN}"
    finally:
        backend.close()
    max_completion = sum(params[repetition].max_tokens for _, repetition in missing)
    pricing = cfg.model.pricing
    cost = cost_usd(prompt_tokens, max_completion, pricing) if pricing.priced else None
    return RunPlan(cells=cells, held=held, requests=len(missing), prompt_tokens=prompt_tokens, token_method=method,
                   max_completion_tokens=max_completion, cost_usd=cost, identity=source, model=cfg.model.name,
                   backend=cfg.model.backend)


def _identity(backend: Backend, cfg: PrismConfig, store: CompletionStore | None) -> tuple[ModelIdentity | None, str]:
    """The identity for store keys without a request: local, or the one last recorded for this server."""
    if not isinstance(backend, RemoteBackend | EndpointPool):  # a pool's servers are not asked either
        return backend.identity(), "local"
    recorded = store.last_identity(backend.address(), cfg.model.backend, cfg.model.name) if store else None
    if recorded is None:
        return None, "unknown"
    digest, details, when = recorded
    return ModelIdentity(cfg.model.name, cfg.model.backend, digest, details), f"recorded {when}"


def _present(store: CompletionStore | None, keys: list[str]) -> set[str]:
    """The keys the store holds."""
    if store is None:
        return set()
    return store.present(keys)


def format_plan(plan: RunPlan) -> str:
    """The dry run's report, as printed."""
    held = ("unknown until the first request (no identity of this server is recorded in the store), so every "
            "cell is counted as a request" if plan.held is None else str(plan.held))
    method = ("the model's tokenizer, prompt text without the chat template" if plan.token_method == "tokenizer"
              else f"an estimate: characters / {CHARS_PER_TOKEN}, no tokenizer at hand for this backend")
    lines = [
        f"dry run of {plan.model} ({plan.backend}): nothing was sent to the model server and no MLflow run was made",
        f"cells:                  {plan.cells}",
        f"held by the store:      {held}",
        f"requests left:          {plan.requests}",
        f"prompt tokens:          {plan.prompt_tokens} ({method})",
        f"completion tokens:      at most {plan.max_completion_tokens} (requests x generation.max_tokens)",
    ]
    if plan.identity.startswith("recorded"):
        lines.append(f"model identity:         as {plan.identity} in the store")
    if plan.cost_usd is None:
        lines.append("estimated cost:         unknown: set model.pricing.input_per_mtok and output_per_mtok")
    else:
        lines.append(f"estimated cost:         at most ${plan.cost_usd:.4f} at model.pricing")
    return "\n".join(lines)

