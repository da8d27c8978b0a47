"""3. Rerun from the store: an identical second run over the first, at 100 questions.

The first run asks the model for every cell and stores each completion; the second finds all of them in
the store. It must neither load the model nor import llama_cpp: after the timed pair, the same rerun is
started once more under ``python -X importtime`` (not timed) and its import log is searched for
``llama_cpp``. Both runs' responses are compared.
"""

from __future__ import annotations

import re
import sys

from benchmarks.common import Context, Section, run_timed
from benchmarks.embedded import agreement, prepare, run_responses

TARGET = 0.05


def run(ctx: Context) -> Section:
    """Measure and report."""
    n_questions = 4 if ctx.quick else 100
    bench = prepare(ctx, "rerun", n_questions, store=True)
    first = bench.prism("first")
    second = bench.prism("second")
    counts = re.search(r"(\d+) responses from the store, (\d+) new", second.stdout)
    if counts is None or counts.group(2) != "0":
        raise SystemExit(f"the rerun asked the model again:\n{second.stdout[-1500:]}")
    check = run_timed([sys.executable, "-X", "importtime", "-m", "prism", *bench.overrides,
                       f"hydra.run.dir={bench.workdir / 'runs' / 'importcheck'}"], cwd=bench.workdir)
    imported = sorted({m for m in ("llama_cpp", "ollama", "openai") if re.search(rf"\| +{m}$", check.stderr, re.M)})
    ratio = second.seconds / first.seconds
    same = agreement(run_responses(bench.workdir, "first"), run_responses(bench.workdir, "second"))
    section = Section(
        title="3. Rerun from the store",
        command="python -m benchmarks --only rerun",
        figures={"ratio": ratio, "first_s": first.seconds, "rerun_s": second.seconds},
    )
    section.body = [
        f"`python -m prism` (SmolLM2, {n_questions} ARC-Challenge questions x P0-P4, store on), then the identical "
        "command again.",
        "",
        "| run | wall s | peak RSS MiB | from the store | asked |",
        "|---|---:|---:|---:|---:|",
        f"| first | {first.seconds:.1f} | {first.max_rss_mib:.0f} | 0 | {bench.n_prompts} |",
        f"| rerun | {second.seconds:.2f} | {second.max_rss_mib:.0f} | {counts.group(1)} | 0 |",
        "",
        f"**Ratio rerun / first: {ratio:.4f}** (target <= {TARGET}: {'met' if ratio <= TARGET else 'NOT met'}). "
        f"Modules among llama_cpp, ollama and openai that the rerun imported: {', '.join(imported) or 'none'}. "
        f"Identical responses: {same}.",
    ]
    return section
