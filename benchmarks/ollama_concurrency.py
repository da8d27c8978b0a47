"""Wall time of N Ollama requests at concurrency 1 and 4, against a loopback server with a fixed delay.

The server is the test suite's Ollama stand-in (``tests/backends/ollama_server.py``), told to take a
fixed time per request; the requests go through the real path of a run without MLflow: the official
client in ``OllamaBackend``, ``prism.inference.collect`` (bounded-concurrency dispatch) and the
completion store and response log, each record fsynced as it arrives. The goal (issue 4) is a wall time
at concurrency 4 within 1.3x of a quarter of the serial one.

    python benchmarks/ollama_concurrency.py                       # 40 requests, 0.2 s each, c = 1 and 4
    python benchmarks/ollama_concurrency.py --requests 80 --delay 0.1 --concurrency 1 2 4 8
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from backends.ollama_server import OllamaStub  # noqa: E402

from prism.backends.base import Request  # noqa: E402
from prism.backends.ollama import OllamaBackend  # noqa: E402
from prism.inference import collect, make_cells  # noqa: E402
from prism.store import CompletionStore, ResponseLog  # noqa: E402
from prism.types import GenerationParams, Prompt  # noqa: E402


def requests(n: int) -> list[Request]:
    """``n`` distinct prompts (distinct store keys), greedy decoding."""
    params = GenerationParams(temperature=0.0, max_tokens=8, seed=0)
    return [
        Request(Prompt(f"q{i}", "P0", f"Question {i}?\n\nA. yes\nB. no\n\nReturn only the letter.", ("A", "B"),
                       ("A", "B"), ("yes", "no"), "1"), params, 0)
        for i in range(n)
    ]


def timed_run(url: str, concurrency: int, n: int, workdir: Path) -> float:
    """Seconds to collect ``n`` completions at ``concurrency`` into a fresh store and log."""
    backend = OllamaBackend({"name": "llama3", "backend": "ollama", "host": url, "concurrency": concurrency})
    identity = backend.identity()
    cells = make_cells(requests(n), identity, "bench", "test")
    store = CompletionStore(workdir / f"store-c{concurrency}.sqlite")
    log = ResponseLog(workdir / f"responses-c{concurrency}.jsonl")
    try:
        start = time.perf_counter()
        records = collect(backend, identity, cells, log, store, run_id=None)
        elapsed = time.perf_counter() - start
    finally:
        log.close()
        store.close()
        backend.close()
    failed = [r for r in records if r["error"]]
    if len(records) != n or failed:
        raise SystemExit(f"expected {n} completions, got {len(records)} ({len(failed)} failed)")
    return elapsed


def main() -> None:
    """Run the measurement and print one line per concurrency."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--delay", type=float, default=0.2, help="seconds the server takes per request")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, OllamaStub(delay_s=args.delay) as stub:
        times = {c: timed_run(stub.url, c, args.requests, Path(tmp)) for c in args.concurrency}
        peak = stub.max_in_flight
    serial = times.get(1)
    print(f"{args.requests} requests, {args.delay:g} s each on the server (max in flight seen: {peak})")
    print(f"{'concurrency':>11} {'wall s':>8} {'ideal s':>8} {'ratio':>6}")
    for c, t in times.items():
        ideal = serial / c if serial is not None else float("nan")
        print(f"{c:>11} {t:>8.2f} {ideal:>8.2f} {t / ideal:>6.2f}")
    if serial is not None and 4 in times:
        ratio = times[4] / (serial / 4)
        print(f"concurrency 4 vs a quarter of serial: {ratio:.2f}x (goal <= 1.30x): "
              f"{'met' if ratio <= 1.3 else 'NOT met'}")


if __name__ == "__main__":
    main()
