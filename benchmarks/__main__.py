"""Run PRISM's benchmarks and print BENCHMARKS.md's figures as Markdown.

    python -m benchmarks                         # all of them (about 30 minutes on 2 cores)
    python -m benchmarks --only overhead rerun   # some of them
    python -m benchmarks --quick                 # every benchmark at toy size, to check the harness

Run it on a quiet machine from the repository root; the full datasets come from ``--data-dir`` (default
``PRISM_DATA_DIR``): a directory with ``arc_challenge/test.jsonl`` and ``sciq/test.jsonl`` in the Hub
schema. Each benchmark compares two things measured in the same invocation; no figure is a timed
assertion anywhere in the test suite.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import Context, machine

BENCHMARKS = {
    "overhead": "benchmarks.overhead",
    "prefix": "benchmarks.prefix_reuse",
    "rerun": "benchmarks.rerun",
    "startup": "benchmarks.startup",
    "compare": "benchmarks.compare_scale",
    "concurrency": "benchmarks.concurrency",
    "label_probs": "benchmarks.label_probs",
    "label_probs_run": "benchmarks.label_probs_run",
    "parser": "benchmarks.parser",
    "publish": "benchmarks.publish_site",
    "run_scale": "benchmarks.run_scale",
    "request_order": "benchmarks.request_order",
    "pools": "benchmarks.pools",
    "sharded": "benchmarks.sharded",
    "client_cpu": "benchmarks.client_cpu",
    "plan": "benchmarks.plan_power",
    "import_logs": "benchmarks.import_logs",
    "cloze_cost": "benchmarks.cloze_cost",
}


def main() -> None:
    """Run the chosen benchmarks in order and print (and optionally write) their Markdown."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=list(BENCHMARKS), default=list(BENCHMARKS))
    parser.add_argument("--quick", action="store_true", help="toy sizes: checks the harness, not the figures")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("PRISM_DATA_DIR") or "."))
    parser.add_argument("--out", type=Path, help="also write the Markdown here")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it (default: a temporary one)")
    args = parser.parse_args()
    if not (args.data_dir / "arc_challenge").is_dir():
        sys.exit(f"no datasets at {args.data_dir}: pass --data-dir DIR or set PRISM_DATA_DIR=DIR, where DIR holds "
                 "arc_challenge/test.jsonl and sciq/test.jsonl in the Hugging Face schema (the full test splits)")
    os.environ["PRISM_DATA_DIR"] = str(args.data_dir.resolve())
    os.environ["HF_HUB_OFFLINE"] = "1"  # nothing here may wait on the network
    facts = machine()
    parts = ["## Machine", "", *(f"- {key}: {value}" for key, value in facts.items()),
             f"- command: `python -m benchmarks{' --quick' if args.quick else ''}"
             f"{' --only ' + ' '.join(args.only) if args.only != list(BENCHMARKS) else ''}`", ""]
    print("\n".join(parts), flush=True)
    with tempfile.TemporaryDirectory(prefix="prism-bench-") as tmp:
        workdir = args.keep.resolve() if args.keep else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        ctx = Context(workdir=workdir, data_dir=args.data_dir.resolve(), quick=args.quick)
        for name in args.only:
            started = time.perf_counter()
            section = importlib.import_module(BENCHMARKS[name]).run(ctx)
            text = section.markdown() + f"\n_(benchmark took {time.perf_counter() - started:.0f} s)_\n"
            print(text, flush=True)
            parts.append(text)
    if args.out:
        args.out.write_text("\n".join(parts), encoding="utf-8")


if __name__ == "__main__":
    main()
