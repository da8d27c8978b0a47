"""The Ollama backend: request and reply without a server, then the real client and the whole pipeline
against the loopback stand-in of ``ollama_server.py`` (concurrency, retries, faults, resume, digests).

Pipeline tests share one MLflow sqlite store per module (creating one costs seconds) and isolate
themselves with an experiment of their own; each has its own completion store and outputs.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import time
from pathlib import Path

import pytest
from conftest import compose_config, run_overrides

from prism.backends.base import BackendError, Request
from prism.backends.ollama import (
    DEFAULT_HOST,
    OllamaBackend,
    OllamaModelConfig,
    build_request,
    find_listed,
    normalize_host,
    normalize_tag,
    read_reply,
    resolve_host,
)
from prism.run.pipeline import run
from prism.types import GenerationParams, Prompt

from .ollama_server import LLAMA3_DIGEST, Behaviour, OllamaStub

OTHER_DIGEST = "a6990ed6be412c6a217614b0ec8e9cd6800a743d5dd7e1d7fbe9df09e61d5615"
FAST_RETRY = {"retry_base_delay_s": 0.01, "retry_max_delay_s": 0.05}
# A retry budget longer than the one a never-reached server gets, so the two cannot be confused.
FIRST_CONTACT_BUDGET_S_PLUS_ONE = 3.0


def request(**params) -> Request:
    prompt = Prompt("q", "P0", "Which?\n\nA. x\nB. y", ("A", "B"), ("A", "B"), ("x", "y"), "1")
    return Request(prompt, GenerationParams(**{"temperature": 0.0, "max_tokens": 16, "seed": 3, **params}), 0)


def backend(stub: OllamaStub, **cfg) -> OllamaBackend:
    return OllamaBackend(OllamaModelConfig(**{"name": "llama3", "host": stub.url, **FAST_RETRY, **cfg}))


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- request building and reply reading, no server -----------------------------------------------------------


def test_request_is_one_user_message_without_streaming_and_maps_parameters() -> None:
    assert build_request(request(), "llama3:latest") == {
        "model": "llama3:latest",
        "messages": [{"role": "user", "content": "Which?\n\nA. x\nB. y"}],
        "stream": False,
        "options": {"temperature": 0.0, "num_predict": 16, "seed": 3},
    }
    full = build_request(request(top_p=0.9, top_k=20), "m:latest", num_ctx=4096)["options"]
    assert full == {"temperature": 0.0, "num_predict": 16, "seed": 3, "top_p": 0.9, "top_k": 20, "num_ctx": 4096}
    assert "seed" not in build_request(request(seed=None), "m:latest")["options"]


def test_reply_is_read_with_token_counts_and_what_was_sent() -> None:
    sent = build_request(request(), "llama3:latest")
    reply = {"model": "llama3:latest", "message": {"role": "assistant", "content": "B"}, "done": True,
             "prompt_eval_count": 26, "eval_count": 2}
    completion = read_reply(reply, 0.25, sent)
    assert (completion.text, completion.prompt_tokens, completion.completion_tokens) == ("B", 26, 2)
    assert completion.error is None and completion.latency_s == 0.25
    assert completion.finish_reason is None  # this reply has no done_reason
    assert read_reply(dict(reply, done_reason="length"), 0.25, sent).finish_reason == "length"
    assert completion.backend_options == {"model": "llama3:latest", "stream": False,
                                          "options": {"temperature": 0.0, "num_predict": 16, "seed": 3}}
    assert "messages" not in completion.backend_options and "messages" in sent  # the caller's dict is intact


def test_empty_content_is_observed_and_a_reply_without_text_is_a_failed_request() -> None:
    for empty in ({"message": {"role": "assistant", "content": ""}}, {"message": {"role": "assistant"}}):
        completion = read_reply(empty, 0.1, {})
        assert completion.text == "" and completion.error is None
        assert completion.prompt_tokens is None  # absent counts stay unknown
    for broken in ({"error": "boom"}, {"message": "B"}, {"message": {"content": 7}}):
        completion = read_reply(broken, 0.1, {})
        assert completion.text is None and completion.error and "unreadable" in completion.error


# -- addresses and tags --------------------------------------------------------------------------------------

ACCEPTED = {
    "http://localhost:11434": "http://localhost:11434",
    "localhost": "http://localhost:11434",
    "example.com:56789": "http://example.com:56789",
    "1.2.3.4": "http://1.2.3.4:11434",
    "http://1.2.3.4": "http://1.2.3.4:80",
    "https://ollama.example.com": "https://ollama.example.com:443",
    "https://1.2.3.4:56789": "https://1.2.3.4:56789",
    "example.com/ollama/": "http://example.com:11434/ollama",
    ":56789": "http://127.0.0.1:56789",
    "0.0.0.0": "http://0.0.0.0:11434",
    "[::1]": "http://[::1]:11434",
    "https://[2001:db8::1]:8443": "https://[2001:db8::1]:8443",
}
REJECTED = {
    "local host": "whitespace",
    " localhost": "whitespace",
    "localhost:11434\n": "whitespace",
    "localhost:abc": "port",
    "localhost:70000": "port",
    "localhost:0": "port 0",
    "ftp://localhost": "scheme 'ftp'",
    "unix:///run/ollama.sock": "scheme 'unix'",
    "http://": "no host",
    "http://http://localhost": "two schemes",
    "http://user:secret@localhost": "credentials",
    "localhost/?x=1": "query",
    "http://[::1": "IPv6",
    "exa$mple.com": "host name",
}


@pytest.mark.parametrize(("raw", "expected"), ACCEPTED.items())
def test_accepted_addresses_normalize_like_the_official_client(raw: str, expected: str) -> None:
    from ollama._client import _parse_host  # the client's own reading, to stay in step with it

    assert normalize_host(raw) == expected == _parse_host(raw)


@pytest.mark.parametrize(("raw", "why"), REJECTED.items())
def test_rejected_addresses_fail_before_any_request_naming_the_setting(raw: str, why: str) -> None:
    with pytest.raises(BackendError, match=r"model.host=") as caught:
        OllamaBackend(OllamaModelConfig(name="llama3", host=raw))
    assert why in str(caught.value) and "http://HOST:PORT" in str(caught.value)


def test_host_precedence_model_host_then_ollama_host_then_default() -> None:
    assert resolve_host("h1:1", {"OLLAMA_HOST": "h2:2"}).url == "http://h1:1"
    env = resolve_host(None, {"OLLAMA_HOST": "h2:2"})
    assert (env.url, env.source) == ("http://h2:2", "OLLAMA_HOST")
    assert resolve_host(None, {"OLLAMA_HOST": ""}).url == DEFAULT_HOST == resolve_host(None, {}).url
    assert resolve_host("", {}).url == DEFAULT_HOST  # an empty setting is an unset one, as for the client
    with pytest.raises(BackendError, match="empty"):
        normalize_host("")
    with pytest.raises(BackendError, match="OLLAMA_HOST='bad host'"):
        resolve_host(None, {"OLLAMA_HOST": "bad host"})


@pytest.mark.parametrize(("tag", "listed"), [
    ("llama3", "llama3:latest"), ("llama3:latest", "llama3:latest"), ("qwen2.5:7b", "qwen2.5:7b"),
    ("library/llama3", "llama3:latest"), ("registry.ollama.ai/library/llama3:8b", "llama3:8b"),
    ("user/model", "user/model:latest"), ("hf.co/org/repo:Q4_K_M", "hf.co/org/repo:Q4_K_M"),
    ("myregistry:5000/ns/model", "myregistry:5000/ns/model:latest"),
])
def test_tags_normalize_the_way_ollama_lists_them(tag: str, listed: str) -> None:
    assert normalize_tag(tag) == listed


def test_model_list_lookup_ignores_case_and_needs_the_right_tag() -> None:
    models = [{"model": "llama3:8b", "digest": "a"}, {"model": "Llama3:latest", "digest": "b"}]
    assert find_listed(models, "llama3") == models[1]
    assert find_listed(models, "llama3:8b") == models[0]
    assert find_listed(models, "llama3:70b") is None


# -- the real client against the stand-in --------------------------------------------------------------------


def test_identity_pins_the_listed_digest_with_the_normalized_tag_and_server_version() -> None:
    with OllamaStub(models={"llama3:latest": LLAMA3_DIGEST, "mistral:7b": OTHER_DIGEST}) as stub:
        b = backend(stub)
        identity = b.identity()
        b.close()
    assert (identity.name, identity.backend, identity.digest) == ("llama3", "ollama", LLAMA3_DIGEST)
    assert identity.details["tag"] == "llama3:latest" and identity.details["server_version"] == "0.6.5"
    assert identity.details["host"] == stub.url and identity.details["quantization_level"] == "Q4_0"


def test_a_model_that_is_not_pulled_is_one_clear_error_before_any_chat() -> None:
    with OllamaStub() as stub:
        b = OllamaBackend(OllamaModelConfig(name="mistral", host=stub.url))
        with pytest.raises(BackendError, match="`ollama pull mistral`") as caught:
            b.identity()
        b.close()
    assert "'mistral:latest'" in str(caught.value) and "llama3:latest" in str(caught.value)
    assert stub.chats == []


def test_a_server_that_is_not_ollama_is_named_as_such() -> None:
    with OllamaStub() as stub:
        b = OllamaBackend(OllamaModelConfig(name="llama3", host=f"{stub.url}/not-ollama"))
        with pytest.raises(BackendError, match=r"HTTP 404.*does not look like an Ollama server"):
            b.identity()
        b.close()


def test_completion_through_the_client_records_what_was_sent() -> None:
    with OllamaStub(answer=lambda prompt: "B") as stub:
        b = backend(stub, num_ctx=4096)
        b.identity()
        completion = b.generate(request(top_k=40))
        b.close()
    assert completion.text == "B" and completion.error is None and completion.completion_tokens == 1
    (body,) = stub.chats
    assert body["options"] == {"temperature": 0.0, "num_predict": 16, "seed": 3, "top_k": 40, "num_ctx": 4096}
    assert body["stream"] is False and body["model"] == "llama3:latest"
    assert completion.backend_options["options"] == body["options"]


def test_busy_and_dropped_replies_are_retried_and_then_answered() -> None:
    with OllamaStub(fail_first=2, drop_first=2) as stub:
        b = backend(stub)
        b.identity()
        completion = b.generate(request())
        b.close()
    assert completion.error is None and completion.text in {"A", "B", "C"}
    assert len(stub.chats) == 5  # two 503s, two dropped connections, one answer


def test_a_body_that_is_not_a_completion_is_a_failed_request_not_an_answer() -> None:
    with OllamaStub(garbage=lambda prompt: True) as stub:
        b = backend(stub)
        b.identity()
        completion = b.generate(request())
        b.close()
    assert completion.text is None and completion.error and completion.error.startswith("unreadable reply")
    assert len(stub.chats) == 1  # not retried now: the next run asks again


def test_a_server_error_is_a_failed_request_and_a_refused_client_stops_the_run() -> None:
    with OllamaStub(error=lambda prompt: (500, "llama runner process has terminated: signal: killed")) as stub:
        b = backend(stub)
        b.identity()
        completion = b.generate(request())
        stub.behaviour.error = lambda prompt: (401, "unauthorized")
        with pytest.raises(BackendError, match=r"HTTP 401.*OLLAMA_API_KEY"):
            b.generate(request())
        b.close()
    assert completion.text is None and completion.error == (
        "Ollama answered HTTP 500: llama runner process has terminated: signal: killed")
    assert len(stub.chats) == 2  # neither is retried within the run


def test_a_server_that_is_down_fails_within_the_budget_saying_where_and_how_to_start_it() -> None:
    port = free_port()
    b = OllamaBackend(OllamaModelConfig(name="llama3", host=f"127.0.0.1:{port}", retry_budget_s=0.5, **FAST_RETRY))
    start = time.monotonic()
    with pytest.raises(BackendError) as caught:
        b.identity()
    elapsed = time.monotonic() - start
    b.close()
    message = str(caught.value)
    assert f"http://127.0.0.1:{port} (from model.host)" in message and "connection refused" in message
    assert "`ollama serve`" in message and "model.retry_budget_s=0.5" in message
    assert elapsed < 10  # the budget is 0.5 s; generous slack, this is not a timing test


def test_no_server_at_the_first_request_fails_in_seconds_not_after_the_whole_retry_budget() -> None:
    from prism.backends.remote import FIRST_CONTACT_BUDGET_S

    port = free_port()
    b = OllamaBackend(OllamaModelConfig(name="llama3", host=f"127.0.0.1:{port}"))  # the default 30 s budget
    with pytest.raises(BackendError) as caught:
        b.identity()
    b.close()
    message = str(caught.value)
    assert "connection refused" in message and "`ollama serve`" in message and "never reached" in message
    assert caught.value.__cause__.budget_s == FIRST_CONTACT_BUDGET_S < 30


def test_a_server_that_goes_away_after_answering_gets_the_whole_retry_budget() -> None:
    with OllamaStub() as stub:
        b = backend(stub, retry_budget_s=FIRST_CONTACT_BUDGET_S_PLUS_ONE)
        b.identity()
        stub.stop()
        with pytest.raises(BackendError) as caught:
            b.generate(request())
        b.close()
    assert caught.value.__cause__.budget_s == FIRST_CONTACT_BUDGET_S_PLUS_ONE
    assert "never reached" not in str(caught.value) and "connection refused" in str(caught.value)


def test_a_server_that_stays_busy_says_so_and_a_slow_one_names_the_timeout() -> None:
    with OllamaStub(fail_first=10**6) as stub:
        b = backend(stub, retry_budget_s=0.3)
        b.identity()
        with pytest.raises(BackendError, match=r"busy.*OLLAMA_NUM_PARALLEL"):
            b.generate(request())
        b.close()
    with OllamaStub(delay_s=1.0) as stub:
        b = backend(stub, retry_budget_s=0.2, request_timeout_s=0.2)
        b.identity()
        with pytest.raises(BackendError, match=r"timed out.*model.request_timeout_s=0.2"):
            b.generate(request())
        b.close()


def test_a_model_removed_mid_run_stops_the_run_naming_ollama_pull() -> None:
    with OllamaStub() as stub:
        b = backend(stub)
        b.identity()
        stub.behaviour.models = {}
        with pytest.raises(BackendError, match=r"no longer has 'llama3:latest'.*`ollama pull llama3`"):
            b.generate(request())
        b.close()


# -- the whole pipeline ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mlflow_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow')}/mlflow.db"


@pytest.fixture
def overrides(request: pytest.FixtureRequest, workdir: Path, data_dir: Path, mlflow_uri: str):
    """Overrides for ``model=llama3 dataset.n=5`` against a stub, in this test's own experiment."""

    def make(stub: OllamaStub, *extra: str) -> list[str]:
        base = [o for o in run_overrides(workdir, data_dir) if not o.startswith("tracking.uri=")]
        return [*base, f"tracking.uri={mlflow_uri}", f"tracking.experiment={request.node.name}", "model=llama3",
                "dataset.n=5", f"model.host={stub.url}", "model.retry_base_delay_s=0.01",
                "model.retry_max_delay_s=0.05", *extra]

    return make


def client(uri: str):
    import mlflow

    return mlflow.tracking.MlflowClient(uri)


def raw_records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "responses" / "responses.jsonl").open()]


def scored_records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results" / "scored.jsonl").open()]


def test_pipeline_against_the_stand_in_records_the_same_mlflow_shape(overrides, workdir, mlflow_uri) -> None:
    with OllamaStub() as stub:
        result = run(compose_config(overrides(stub)), output_dir=workdir / "out")
    info = client(mlflow_uri).get_run(result.run_id)
    assert info.info.status == "FINISHED" and len(stub.chats) == 25
    data = info.data
    assert data.params["model.name"] == "llama3" and data.params["model.backend"] == "ollama"
    for key in ("dataset.name", "dataset.n", "generation.temperature", "parser_version", "scorer_version",
                "protocol_version", "conditions.template_version"):
        assert key in data.params, key
    assert data.tags["prism.model_digest"] == LLAMA3_DIGEST and data.tags["prism.kind"] == "run"
    assert data.tags["prism.model.tag"] == "llama3:latest" and data.tags["prism.model.server_version"] == "0.6.5"
    for tag in ("prism.question_set_sha256", "prism.dataset_version", "prism.git_commit", "prism.version"):
        assert data.tags[tag], tag
    assert data.metrics["n_responses"] == 25 and data.metrics["n_questions"] == 5
    artifacts = set()
    for top in client(mlflow_uri).list_artifacts(result.run_id):
        artifacts |= {a.path for a in client(mlflow_uri).list_artifacts(result.run_id, top.path)}
    for path in ("config/resolved.yaml", "questions/frozen.jsonl", "responses/responses.jsonl",
                 "results/scored.jsonl", "results/question_metrics.csv", "results/condition_metrics.csv",
                 "prompts/prism.yaml"):
        assert path in artifacts, path
    raw = raw_records(result.output_dir)
    assert {r["backend"] for r in raw} == {"ollama"} and {r["model_digest"] for r in raw} == {LLAMA3_DIGEST}
    assert all(r["error"] is None and r["response"] in {"A", "B", "C"} for r in raw)
    assert all(r["backend_options"]["options"]["num_predict"] == r["generation"]["max_tokens"] for r in raw)
    assert all(isinstance(r["prompt_tokens"], int) and r["completion_tokens"] == 1 for r in raw)
    # Each response is the stub's function of exactly the prompt that was sent for that cell.
    sent = {c["messages"][0]["content"] for c in stub.chats}
    assert {r["prompt"] for r in raw} == sent


def test_concurrency_four_overlaps_and_results_do_not_depend_on_arrival_order(overrides, workdir) -> None:
    with OllamaStub() as stub:
        serial = run(compose_config(overrides(stub, "store.enabled=false")), output_dir=workdir / "serial")
    first_prompt = raw_records(serial.output_dir)[0]["prompt"]
    # The first cell sent is the slowest to answer, so replies arrive in another order than requests.
    slow_first = Behaviour(delay_s=lambda prompt: 0.4 if prompt == first_prompt else 0.02)
    with OllamaStub(slow_first) as stub:
        parallel = run(compose_config(overrides(stub, "model.concurrency=4", "store.enabled=false")),
                       output_dir=workdir / "parallel")
    assert stub.max_in_flight == 4
    raw = raw_records(parallel.output_dir)
    assert raw[0]["prompt"] != first_prompt  # arrival order differs from submission order

    def by_cell(records: list[dict]) -> dict:
        return {(r["question_id"], r["condition"]): (r["response"], r.get("answer"), r.get("correct"))
                for r in records}

    assert by_cell(raw) == by_cell(raw_records(serial.output_dir))
    assert by_cell(scored_records(parallel.output_dir)) == by_cell(scored_records(serial.output_dir))
    assert parallel.metrics == pytest.approx(serial.metrics, nan_ok=True)


def test_transient_failures_mid_run_are_retried_and_nothing_is_lost(overrides, workdir) -> None:
    with OllamaStub(fail_first=3, drop_first=2) as stub:
        result = run(compose_config(overrides(stub, "model.concurrency=2")), output_dir=workdir / "out")
    raw = raw_records(result.output_dir)
    assert len(raw) == 25 and all(r["error"] is None for r in raw)
    assert len(stub.chats) == 30  # 25 cells + 3 busy replies + 2 dropped connections, each asked again


def test_server_down_mid_run_keeps_everything_and_the_same_command_resumes(overrides, workdir, mlflow_uri,
                                                                         request) -> None:
    stub = OllamaStub(down_after=7).start()
    command = overrides(stub, "model.concurrency=4", "model.retry_budget_s=1")
    try:
        with pytest.raises(BackendError, match=r"(?s)did not answer /api/chat.*`ollama serve`.*kept.*resumes"):
            run(compose_config(command), output_dir=workdir / "first")
        answered, asked = stub.answered, len(stub.chats)
        assert answered >= 7  # the requests in flight when it went down may still have been answered
        mlflow = client(mlflow_uri)
        experiment = mlflow.get_experiment_by_name(request.node.name)
        (failed,) = mlflow.search_runs([experiment.experiment_id])
        assert failed.info.status == "FAILED"
        assert "responses" in {a.path for a in mlflow.list_artifacts(failed.info.run_id)}
        kept = [r for r in raw_records(workdir / "first") if r["error"] is None]
        assert len(kept) == answered

        stub.behaviour.down_after = None
        stub.start()  # back, on the same port
        resumed = run(compose_config(command), output_dir=workdir / "second")
    finally:
        stub.stop()
    assert (resumed.n_cached, resumed.n_fresh) == (answered, 25 - answered)
    assert len(stub.chats) - asked == 25 - answered  # nothing stored was asked for again
    tags = mlflow.get_run(resumed.run_id).data.tags
    assert tags["prism.resumed_from"] == failed.info.run_id
    assert mlflow.get_run(resumed.run_id).info.status == "FINISHED"


def test_garbage_bodies_are_failed_requests_and_empty_content_is_an_observed_unknown(overrides, workdir) -> None:
    behaviour = Behaviour(answer=lambda p: "" if p.startswith("Answer the following") else "A",  # P1: empty
                          garbage=lambda p: p.startswith("### Task"))  # P2: a body that is not JSON
    with OllamaStub(behaviour) as stub:
        first = run(compose_config(overrides(stub)), output_dir=workdir / "one")
        again = run(compose_config(overrides(stub)), output_dir=workdir / "two")
    raw = raw_records(first.output_dir)
    p1 = [r for r in raw if r["condition"] == "P1"]
    p2 = [r for r in raw if r["condition"] == "P2"]
    assert len(p1) == len(p2) == 5
    assert all(r["response"] == "" and r["error"] is None for r in p1)
    assert all(r["response"] is None and r["error"].startswith("unreadable reply") for r in p2)
    scored = {(s["question_id"], s["condition"]): s for s in scored_records(first.output_dir)}
    assert {scored[(r["question_id"], "P1")]["method"] for r in p1} == {"empty"}
    assert {scored[(r["question_id"], "P1")]["answer"] for r in p1} == {None}
    assert {scored[(r["question_id"], "P2")]["method"] for r in p2} == {"failed"}
    assert first.metrics["n_responses"] == 20  # the five garbage replies are not observed responses
    assert (again.n_cached, again.n_fresh) == (20, 5)  # only the failed requests are asked again


def test_a_changed_digest_is_a_loud_warning_and_nothing_is_mixed(overrides, workdir, mlflow_uri, caplog) -> None:
    with OllamaStub() as stub:
        run(compose_config(overrides(stub)), output_dir=workdir / "before")
        stub.behaviour.models = {"llama3:latest": OTHER_DIGEST}  # `ollama pull llama3` fetched new weights
        with caplog.at_level(logging.WARNING, logger="prism.run.pipeline"):
            after = run(compose_config(overrides(stub)), output_dir=workdir / "after")
    warning = next(r.getMessage() for r in caplog.records if "MODEL DIGEST CHANGED" in r.getMessage())
    assert OTHER_DIGEST in warning and LLAMA3_DIGEST in warning
    assert (after.n_cached, after.n_fresh) == (0, 25)
    tags = client(mlflow_uri).get_run(after.run_id).data.tags
    assert tags["prism.model_digest"] == OTHER_DIGEST
    assert tags["prism.model_digest_changed_from"] == LLAMA3_DIGEST
    assert {r["model_digest"] for r in raw_records(after.output_dir)} == {OTHER_DIGEST}


def test_a_model_not_pulled_stops_the_pipeline_before_inference(overrides, workdir) -> None:
    with OllamaStub() as stub:
        cfg = compose_config(overrides(stub, "model=mistral"))
        with pytest.raises(BackendError, match="`ollama pull mistral`"):
            run(cfg, output_dir=workdir / "out")
    assert stub.chats == []


# -- a real Ollama, opt in ------------------------------------------------------------------------------------

LIVE_HOST = os.environ.get("PRISM_OLLAMA_LIVE_HOST")


@pytest.mark.live
@pytest.mark.skipif(not LIVE_HOST, reason="set PRISM_OLLAMA_LIVE_HOST (and PRISM_OLLAMA_LIVE_MODEL) to run")
def test_live_ollama_tiny_experiment(workdir: Path, data_dir: Path) -> None:
    model = os.environ.get("PRISM_OLLAMA_LIVE_MODEL", "llama3.2:1b")
    cfg = compose_config([*run_overrides(workdir, data_dir), "model=llama3", f"model.name='{model}'",
                          f"model.host='{LIVE_HOST}'", "dataset.n=2"])
    result = run(cfg, output_dir=workdir / "out")
    raw = raw_records(result.output_dir)
    assert len(raw) == 10 and all(len(r["model_digest"]) == 64 for r in raw)
    assert client(f"sqlite:///{workdir}/mlflow.db").get_run(result.run_id).info.status == "FINISHED"


# -- label probabilities (generation.label_probs) --------------------------------------------------------------


def by_hand(distribution: list[tuple[str, float]], labels: tuple[str, ...]) -> dict[str, float]:
    """The labels' renormalized probabilities, recomputed from a first-token list."""
    mass = {label: sum(math.exp(lp) for token, lp in distribution if token.strip() == label) for label in labels}
    return {label: m / sum(mass.values()) for label, m in mass.items()}


def test_label_probs_are_top_level_chat_fields_and_the_first_token_is_read_as_labels() -> None:
    body = build_request(request(label_probs=True), "llama3:latest")
    assert body["logprobs"] is True and body["top_logprobs"] == 20 and "logprobs" not in body["options"]
    assert "logprobs" not in build_request(request(), "llama3:latest")  # only when asked
    reply = {"message": {"role": "assistant", "content": "B"}, "logprobs": [
        {"token": "B", "logprob": -0.2, "top_logprobs": [{"token": "B", "logprob": -0.2},
                                                          {"token": " A", "logprob": -2.0}]}]}
    reading = read_reply(reply, 0.1, body, labels=("A", "B")).label_reading
    assert reading is not None and reading.source == "top_k"
    assert reading.label_probs == pytest.approx(by_hand([("B", -0.2), (" A", -2.0)], ("A", "B")))
    assert read_reply({"message": {"content": "B"}}, 0.1, body, labels=("A", "B")).label_reading is None


def test_label_probs_through_the_client_equal_the_stand_ins_distribution() -> None:
    from .ollama_server import first_token_distribution, letter_answer

    with OllamaStub() as stub:
        ollama_backend = backend(stub)
        ollama_backend.check_label_probs({"P0": ("A", "B")})
        completion = ollama_backend.generate(request(label_probs=True))
        ollama_backend.close()
    prompt = request().prompt.text
    assert stub.chats[-1]["logprobs"] is True and stub.chats[-1]["top_logprobs"] == 20
    reading = completion.label_reading
    assert reading is not None
    distribution = first_token_distribution(prompt, letter_answer(prompt))
    assert reading.label_probs == pytest.approx(by_hand(distribution, ("A", "B")))
    # Tokens exactly, log-probabilities approximately: pytest.approx takes no nested (token, logprob) pairs.
    assert [token for token, _ in reading.top_logprobs] == [token for token, _ in distribution]
    assert [logprob for _, logprob in reading.top_logprobs] == pytest.approx([logprob for _, logprob in distribution])


def test_an_ollama_without_logprobs_stops_the_run_before_inference_naming_the_release(overrides, workdir) -> None:
    with OllamaStub(logprobs=False) as stub, pytest.raises(BackendError, match=r"version 0\.6\.5\).*0\.12\.11: upg"):
        run(compose_config(overrides(stub, "generation.label_probs=true")), output_dir=workdir / "out")
    assert len(stub.chats) == 1 and stub.chats[0]["options"]["num_predict"] == 1  # the probe only


def test_pipeline_records_the_stand_ins_label_probabilities(overrides, workdir) -> None:
    from .ollama_server import first_token_distribution

    with OllamaStub() as stub:
        result = run(compose_config(overrides(stub, "generation.label_probs=true")), output_dir=workdir / "out")
    records = raw_records(result.output_dir)
    assert len(records) == 25
    for r in records:
        assert r["label_probs_source"] == "top_k" and r["generation"]["label_probs"] is True
        expected = by_hand(first_token_distribution(r["prompt"], r["response"]), ("A", "B", "C", "D"))
        assert r["label_probs"] == pytest.approx(expected)
        assert r["backend_options"]["logprobs"] is True
    assert result.metrics["label_probs_missing"] == 0


def test_num_ctx_is_part_of_the_completion_key_only_when_set(overrides, workdir) -> None:
    with OllamaStub() as stub:
        first = run(compose_config(overrides(stub)), output_dir=workdir / "first")
        wider = run(compose_config(overrides(stub, "model.num_ctx=8192")), output_dir=workdir / "wider")
        again = run(compose_config(overrides(stub, "model.num_ctx=8192")), output_dir=workdir / "again")
        default = run(compose_config(overrides(stub)), output_dir=workdir / "default")
    assert (first.n_fresh, wider.n_fresh, again.n_fresh, default.n_fresh) == (25, 25, 0, 0)
    assert len(stub.chats) == 50  # a num_ctx that can cut a prompt is asked for, never served the default's
    assert {c["options"].get("num_ctx") for c in stub.chats[25:]} == {8192}


def sent_conversation(record: dict) -> list[dict]:
    """The messages a raw record says were sent: its earlier turns, then the user turn."""
    return [*(record.get("turns") or []), {"role": "user", "content": record["prompt"]}]


def test_the_turns_set_reaches_the_stand_in_as_messages_turn_for_turn(overrides, workdir) -> None:
    with OllamaStub() as stub:
        result = run(compose_config(overrides(stub, "conditions=turns", "dataset.n=3")), output_dir=workdir / "out")
    raw = raw_records(result.output_dir)
    assert len(raw) == 12 and all(r["error"] is None for r in raw)
    chats = stub.chats
    assert len(chats) == 12  # one chat per cell, no probe
    received = sorted(json.dumps(c["messages"], sort_keys=True) for c in chats)
    assert received == sorted(json.dumps(sent_conversation(r), sort_keys=True) for r in raw)  # every turn, as recorded
    system = {r["condition"]: r["turns"][0]["content"] for r in raw if r.get("turns")}
    assert system == {"system_instruction": "Answer the following question by selecting the correct option.",
                      "system_generic": "You are a helpful assistant.",
                      "system_role": "You are a knowledgeable subject-matter expert."}
    assert all(c["messages"][0]["role"] == "system" for c in chats if len(c["messages"]) == 2)
