"""What every benchmark shares: timing a child process, its peak memory, and the section it reports.

A benchmark measures two things side by side in the same invocation, so a machine that is slower today
slows both and the ratio stays put. Each benchmark module has ``run(ctx) -> Section``; ``__main__`` runs them
in order and prints one Markdown section each, which is what BENCHMARKS.md is made of.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
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
    """A finished child process: wall seconds, peak resident memory, what it printed, and its CPU seconds.

    CPU seconds (user + system) barely move when other jobs load the machine, where wall seconds do.
    """

    seconds: float
    max_rss_mib: float
    stdout: str
    stderr: str
    cpu_seconds: float = 0.0


_launcher: subprocess.Popen[str] | None = None


def _spawner() -> subprocess.Popen[str]:
    """The small process that spawns every measured command (see ``benchmarks/launcher.py``)."""
    global _launcher
    if _launcher is None or _launcher.poll() is not None:
        _launcher = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "launcher.py")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
    return _launcher


def run_timed(args: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Timed:
    """Run ``args`` to completion; wall time from spawn to exit, and the peak RSS of that command alone.

    The command is spawned by a small helper process and reaped with ``os.wait4``, which gives the rusage
    of exactly this child. Spawned from this (large) process instead, the child's peak would start at this
    process's size, because Linux counts the moment between fork and exec.

    Raises:
        SystemExit: If the command fails, with its output, so a broken benchmark never reports a number.
    """
    full_env = {**os.environ, **(env or {})}
    with tempfile.TemporaryDirectory(prefix="prism-bench-io-") as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        request = {"args": list(args), "env": full_env, "cwd": str(cwd) if cwd else None, "stdout": str(out),
                   "stderr": str(err)}
        spawner = _spawner()
        assert spawner.stdin is not None and spawner.stdout is not None
        spawner.stdin.write(json.dumps(request) + "\n")
        spawner.stdin.flush()
        reply = json.loads(spawner.stdout.readline())
        stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
    if reply["code"] != 0:
        raise SystemExit(f"benchmark command failed ({reply['code']}): {' '.join(args)}\n{stdout[-2000:]}\n"
                         f"{stderr[-4000:]}")
    return Timed(reply["seconds"], reply["max_rss_kib"] / 1024, stdout, stderr,  # kibibytes on Linux
                 float(reply.get("cpu_seconds", 0.0)))


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
