"""python -m prism.compare: the entry point's process settings."""

from __future__ import annotations

import os
import subprocess
import sys

# numpy must not be loaded before the entry point sets the thread count: OpenBLAS reads it once, when it loads.
SHOW = ("import sys\nimport prism.compare.__main__, os\n"
        "print(os.environ['OPENBLAS_NUM_THREADS'], 'numpy' in sys.modules)")


def _threads(env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", SHOW], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_the_comparison_runs_on_one_blas_thread_unless_told_otherwise() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    assert _threads(env) == "1 True"
    assert _threads({**env, "OPENBLAS_NUM_THREADS": "2"}) == "2 True"  # the caller's setting wins
