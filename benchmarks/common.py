"""What every benchmark shares: timing a child process, its peak memory, and the section it reports.

A benchmark measures two things side by side in the same invocation, so a machine that is slower today
slows both and the ratio stays put. Each benchmark module has ``run(ctx) -> Section``; ``__main__`` runs them
in order and prints one Markdown section each, which is what BENCHMARKS.md is made of.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Context:
    """What a benchmark is given: a scratch directory, the data directory and whether to run small."""

    workdir: Path
    data_dir: Path
    quick: bool


@dataclass
class Section:
    """One benchmark's report: a title, the command that reproduces it, a Markdown body and its figures."""

    title: str
    command: str
    body: list[str] = field(default_factory=list)
    figures: dict[str, float] = field(default_factory=dict)

    def markdown(self) -> str:
        """The section as Markdown, the command first so the figures can be reproduced."""
        return "\n".join([f"## {self.title}", "", f"Command: `{self.command}`", "", *self.body, ""])


@dataclass(frozen=True)
class Timed:
    """A finished child process: wall seconds, peak resident memory and what it printed."""

    seconds: float
    max_rss_mib: float
    stdout: str
    stderr: str


def run_timed(args: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Timed:
    """Run ``args`` to completion; wall time from spawn to exit, peak RSS of that child alone.

    ``os.wait4`` gives the rusage of exactly this child (``RUSAGE_CHILDREN`` would be the maximum over every
    child so far).

    Raises:
        SystemExit: If the command fails, with its output, so a broken benchmark never reports a number.
    """
    full_env = {**os.environ, **(env or {})}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(list(args), env=full_env, cwd=cwd, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = code = os.waitstatus_to_exitcode(status)  # reaped here; Popen must not wait again
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if code != 0:
        raise SystemExit(f"benchmark command failed ({code}): {' '.join(args)}\n{stdout[-2000:]}\n{stderr[-4000:]}")
    rss = usage.ru_maxrss / 1024  # kilobytes on Linux
    return Timed(seconds, rss, stdout, stderr)


def machine() -> dict[str, str]:
    """The machine and software the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    versions = {}
    for package in ("llama_cpp_python", "mlflow", "hydra_core", "prism_eval"):
        try:
            from importlib.metadata import version

            versions[package] = version(package.replace("_", "-"))
        except Exception:
            versions[package] = "not installed"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": f"{cpu}, {os.cpu_count()} logical cores",
        "memory": f"{mem_gib:.1f} GiB",
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        "load average at start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "commit": commit.stdout.strip() or "unknown",
        **versions,
    }
