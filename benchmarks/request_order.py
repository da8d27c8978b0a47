"""13. Request order through a server that reuses prompt prefixes: condition-major against question-major.

PRISM asks condition-major (every question under P0, then P1, ...). Section 2 measured that order against
question-major (every condition of question 1, then question 2, ...) inside llama.cpp; this measures it
through a real server: ``python -m llama_cpp.server`` serving the embedded SmolLM2 GGUF, asked by PRISM's
own path (``OpenAIBackend`` through ``prism.run.inference.collect`` at concurrency 1, greedy, the default
``max_tokens``, the response log written and fsynced per record, no store), with
``model.extra_body={repeat_penalty: 1.0}`` so the server samples as the embedded backend does. The same
prompts as section 2 (PRISM's own rendering, ``benchmarks/prompts.py``) go in both orders, alternating
ABBA, each run on a freshly started server (so no run inherits a cache an earlier run filled) after the
backend's identity probe, with two settings of the server:

- ``default``: llama-cpp-python's server holds one model and one sequence and answers one request at a
  time; every request keeps the KV cache of the longest prefix its tokens share with the previous request's
  (its prompt and completion) and evaluates only the rest. Always on, nothing to set.
- ``ram_cache`` (``--cache true``, ``cache_type=ram``, ``cache_size`` 2 GiB): after every request the whole
  model state (the KV of its tokens: 1 to 5 MB here) is saved in an LRU keyed by its tokens; before a
  request, the saved state sharing the longest prefix with the prompt is loaded when it shares more than
  the current one. 500 such states come close to the 2 GiB; beyond it the least recently used go.

Measured: the wall time of each run (from the first cell sent to the last record logged), the server
process's CPU seconds over the same span (``/proc``; barely moved by other jobs where wall time is), the
ratio question-major / condition-major of both, and whether every (question, condition) got the same
response in every run. The server is run with ``--verbose true`` so that llama.cpp logs each request's
prompt evaluation (``llama_perf_context_print: prompt eval time = ... / N tokens``) and llama-cpp-python its
prefix and RAM-cache hits: the response's ``usage`` has only ``prompt_tokens``, ``completion_tokens`` and
``total_tokens`` (no ``timings``), so the tokens actually evaluated are read from that log.

What transfers. llama.cpp's C++ ``llama-server`` caches per slot: with ``cache_prompt`` (on by default
in current builds) a request reuses the longest common prefix of the slot it lands in, which with one slot
(``-np 1``) at concurrency 1 is the ``default`` setting here; with several slots a request goes to the idle
slot whose cached prompt is most similar (``--slot-prompt-similarity``), and recent builds keep more prompts
in host memory (``--cache-ram``), alike in idea to ``ram_cache``. Its responses carry ``timings``
(``prompt_n``, ``cache_n``), which llama_cpp.server's do not. vLLM's automatic prefix caching hashes full KV
blocks (16 tokens by default) and shares them across every request in flight and every earlier one until
they are evicted, so for it the order matters only through eviction; and it batches many requests at once,
where this measures one at a time on a CPU. What transfers to such servers is how much of each prompt is
shared with what came before, not these wall times; nor do they transfer to GPUs, to concurrency above 1,
or to prompts with a long shared prefix (few-shot), where reuse saves far more.

Threads: ``--n_threads 2`` for the figures (``SERVER_THREADS``), on a quiet machine; ``--quick`` runs one
thread, because on a machine other jobs load, llama.cpp's two threads wait for each other at every barrier
(``tests/backends/llama_server.py``).
"""

from __future__ import annotations

import importlib
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import Context, Section
from benchmarks.concurrency import _tests_on_path
from benchmarks.embedded import agreement, bench_overrides
from benchmarks.prompts import compose, in_order, rendered_requests

COMMAND = "python -m benchmarks --only request_order"
ORDERS = ("condition", "question")
SERVER_THREADS = 2
QUICK_THREADS = 1
# Generous: a loaded machine can take minutes for one 64-token answer, and a timed-out request would be
# retried and counted twice.
REQUEST_TIMEOUT_S = 900.0
CHAT_LINE = '"POST /v1/chat/completions HTTP/1.1"'  # uvicorn's access log, once per chat request
_PROMPT_EVAL = re.compile(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")


@dataclass(frozen=True)
class Setting:
    """One way of running the server: a name, its flags and what they mean."""

    name: str
    flags: tuple[str, ...]
    meaning: str


SETTINGS = (
    Setting("default", (), "server default: the previous request's longest shared prefix (one sequence)"),
    Setting("ram_cache", ("--cache", "true"), "`--cache true`: also a RAM cache of earlier requests' states"),
)


@dataclass(frozen=True)
class Served:
    """What the server's log says about one chat request (``None``: the log did not say)."""

    prompt_eval_tokens: int | None
    prefix_hit: bool
    cache_hit: bool


@dataclass(frozen=True)
class OrderRun:
    """One timed run of every prompt in one order against one fresh server."""

    setting: str
    index: int
    order: str
    seconds: float
    server_cpu_s: float
    responses: dict[tuple[str, str], str]
    prompt_tokens: int
    served: list[Served]

    def prompt_eval_tokens(self) -> int | None:
        """Prompt tokens the server evaluated over the run, or None when its log did not say for every request."""
        counts = [s.prompt_eval_tokens for s in self.served]
        return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)


def schedule(quick: bool) -> tuple[str, ...]:
    """The orders in the sequence they run for each setting: ABBA, or AB at toy size."""
    return ORDERS if quick else (*ORDERS, *reversed(ORDERS))


def ordered_requests(ctx: Context, n_questions: int) -> tuple[dict[str, list[Any]], str, str]:
    """The default experiment's requests (PRISM's rendering) in each order, and the dataset and split."""
    overrides = bench_overrides(ctx, "request_order", n_questions, store=False)
    cfg = compose(overrides)
    requests, question_ids = rendered_requests(overrides)
    return ({order: in_order(requests, question_ids, order) for order in ORDERS}, cfg.dataset.name,
            cfg.dataset.split)


def read_served(log: str) -> list[Served]:
    """One entry per chat request in a verbose server log, in the order they were answered.

    The access-log line of a request is written once its answer is ready and before the client can send
    the next (concurrency 1), so the text before each such line, back to the previous one, is that
    request's.
    """
    served = []
    for part in log.split(CHAT_LINE)[:-1]:
        evals = _PROMPT_EVAL.findall(part)
        served.append(Served(int(evals[0]) if len(evals) == 1 else None, "prefix-match hit" in part,
                             "Llama._create_completion: cache hit" in part))
    return served


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` and its threads so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14 and 15


def server_class() -> Any:
    """The test suite's ``LlamaServer`` (``tests/backends/llama_server.py``), untyped as every test helper here."""
    with _tests_on_path():
        return importlib.import_module("backends.llama_server").LlamaServer


def timed_run(setting: Setting, order: str, index: int, requests: Sequence[Any], dataset: str, split: str,
              workdir: Path, threads: int) -> OrderRun:
    """Start a fresh server with ``setting``, probe it, then time ``requests`` through PRISM's backend.

    Raises:
        RuntimeError: If the server does not start, a request fails, or its log cannot be read per request;
            the message says what went wrong, so the caller reports it instead of a figure.
    """
    from prism.backends.openai_compat import OpenAIBackend, OpenAIModelConfig
    from prism.run.inference import collect, make_cells
    from prism.run.store import ResponseLog

    name = f"{setting.name}-{index}-{order}"
    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    server = server_class()(workdir / "logs", threads=threads, verbose=True, extra_args=setting.flags).start()
    try:
        backend = OpenAIBackend(OpenAIModelConfig(name="smollm2", base_url=server.url, concurrency=1,
                                                  request_timeout_s=REQUEST_TIMEOUT_S,
                                                  extra_body={"repeat_penalty": 1.0}))
        log = ResponseLog(workdir / f"{name}.jsonl")
        try:
            identity = backend.identity()  # the model list and a one-token chat, before the clock
            cells = make_cells(requests, identity, dataset, split)
            cpu_before, started = cpu_seconds(server.pid), time.perf_counter()
            records = collect(backend, identity, cells, log, None, run_id=None)
            seconds, server_cpu = time.perf_counter() - started, cpu_seconds(server.pid) - cpu_before
        finally:
            log.close()
            backend.close()
        failed = [r for r in records if r.error]
        if failed or len(records) != len(requests):
            raise RuntimeError(f"{len(failed)} of {len(requests)} requests failed (got {len(records)} records); "
                               f"the first said: {failed[0].error if failed else 'nothing'}\n"
                               f"{server.log()[-2000:]}")
        served = read_served(server.log())[1:]  # the first chat request is the identity probe
        if len(served) != len(requests):
            raise RuntimeError(f"the server's log shows {len(served)} chat requests after the probe, not "
                               f"{len(requests)}: it cannot be read per request")
    finally:
        server.stop()
    return OrderRun(setting.name, index, order, seconds, server_cpu,
                    {(r.question_id, r.condition): r.response or "" for r in records},
                    sum(r.prompt_tokens or 0 for r in records), served)


def _ratio(runs: list[OrderRun], value: str) -> float:
    """Question-major over condition-major, summed over the runs of each order."""
    total = {order: sum(getattr(r, value) for r in runs if r.order == order) for order in ORDERS}
    return float(total["question"] / total["condition"])


def setting_report(setting: Setting, runs: list[OrderRun], reference: OrderRun, figures: dict[str, float]) -> list[str]:
    """The table and figures of one setting's runs."""
    body = ["", f"**{setting.name}** ({setting.meaning}):", "",
            "| run | order | wall s | server CPU s | ms per prompt | prompt tokens | evaluated by the server | "
            "prefix hits | RAM-cache hits | responses as the first run |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for run in runs:
        evaluated = run.prompt_eval_tokens()
        shown = "not in the log" if evaluated is None else f"{evaluated} ({evaluated / run.prompt_tokens:.0%})"
        body.append(f"| {run.index + 1} | {run.order}-major | {run.seconds:.1f} | {run.server_cpu_s:.1f} | "
                    f"{run.seconds / len(run.served) * 1000:.0f} | {run.prompt_tokens} | {shown} | "
                    f"{sum(s.prefix_hit for s in run.served)} | {sum(s.cache_hit for s in run.served)} | "
                    f"{agreement(reference.responses, run.responses)} |")
        if evaluated is not None:
            figures[f"{setting.name}_{run.order}_{run.index}_evaluated_tokens"] = float(evaluated)
    wall, cpu = _ratio(runs, "seconds"), _ratio(runs, "server_cpu_s")
    figures[f"{setting.name}_question_over_condition"] = wall
    figures[f"{setting.name}_question_over_condition_cpu"] = cpu
    counts = {order: [r.prompt_eval_tokens() for r in runs if r.order == order] for order in ORDERS}
    tokens = ""
    if all(count is not None for per_order in counts.values() for count in per_order):
        # Deterministic for a given server and prompts (every run of an order evaluates the same), so
        # the one figure here that no other job on the machine can move.
        mean = {order: sum(c or 0 for c in per_order) / len(per_order) for order, per_order in counts.items()}
        ratio = mean["question"] / mean["condition"]
        figures[f"{setting.name}_evaluated_question_over_condition"] = ratio
        tokens = f"; prompt tokens the server evaluated {ratio:.3f}"
    body += ["", f"Question-major / condition-major: wall time **{wall:.3f}** (question-major takes "
                 f"{abs(wall - 1):.1%} {'more' if wall > 1 else 'less'} wall time), server CPU time {cpu:.3f}"
                 f"{tokens}."]
    return body


def run(ctx: Context) -> Section:
    """Measure both orders under each server setting and report one table per setting."""
    n_questions = 4 if ctx.quick else 100
    threads = QUICK_THREADS if ctx.quick else SERVER_THREADS
    requests, dataset, split = ordered_requests(ctx, n_questions)
    workdir = ctx.workdir / "request_order"
    n_prompts = len(requests["condition"])
    body = [f"{n_prompts} prompts ({n_questions} questions x the default conditions) through `OpenAIBackend` "
            f"(concurrency 1, greedy, `repeat_penalty` 1.0) against `python -m llama_cpp.server` "
            f"(`--n_threads {threads}`), each run on a fresh server, orders alternating "
            f"{'AB' if ctx.quick else 'ABBA'} per setting; \"the first run\" is the first that worked (default, "
            "condition-major). Tokens are the whole chat prompt (template included) as the server counts them. "
            "Load average at start: "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}."]
    figures: dict[str, float] = {"prompts": float(n_prompts), "server_threads": float(threads)}
    reference: OrderRun | None = None
    for setting in SETTINGS:
        runs: list[OrderRun] = []
        try:
            for index, order in enumerate(schedule(ctx.quick)):
                runs.append(timed_run(setting, order, index, requests[order], dataset, split, workdir, threads))
        except RuntimeError as exc:
            body += ["", f"**{setting.name}** ({setting.meaning}): failed, so no figure: {exc}"]
            continue
        reference = reference or runs[0]
        body += setting_report(setting, runs, reference, figures)
    body += ["", f"Load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}."]
    return Section("13. Request order through llama_cpp.server: condition-major vs question-major", COMMAND, body,
                   figures)
