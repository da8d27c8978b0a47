"""The commands: each console script is its ``python -m`` module, and ``--help`` imports nothing heavy."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib

import pytest
from conftest import REPO_ROOT

# Console script -> the module ``python -m`` runs for it.
COMMANDS = {
    "prism": "prism",
    "prism-compare": "prism.compare",
    "prism-reproduce": "prism.reproduce",
    "prism-upload": "prism.upload",
    "prism-publish": "prism.publish",
    "prism-plan": "prism.plan",
    "prism-import": "prism.importer",
    "prism-export": "prism.importer.export_main",
}
HEAVY = ("mlflow", "llama_cpp", "datasets", "ollama", "openai", "pandas", "matplotlib", "scipy", "statsmodels")
PROBE = (
    "import runpy, sys\n"
    "module = sys.argv[1]\n"
    "sys.argv = [module, *sys.argv[2:]]\n"
    "try:\n    runpy.run_module(module, run_name='__main__', alter_sys=True)\nexcept SystemExit as exc:\n"
    "    code = exc.code\nelse:\n    code = 0\n"
    f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
    "print('EXIT', code, 'HEAVY', heavy, file=sys.stderr)\n"
)


def test_console_scripts_are_the_python_m_entry_points() -> None:
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert set(scripts) == set(COMMANDS)
    for command, target in scripts.items():
        module_name, _, function = target.partition(":")
        entry = getattr(importlib.import_module(module_name), function)
        runs = importlib.import_module(COMMANDS[command])
        if hasattr(runs, "__path__"):  # a package: python -m runs its __main__
            runs = importlib.import_module(f"{COMMANDS[command]}.__main__")
        assert entry is runs.main, f"{command} runs {target}, not what python -m {COMMANDS[command]} runs"


@pytest.mark.parametrize(("module", "flag"), [
    *((module, "--help") for module in COMMANDS.values()),
    ("prism", "--cfg=job"), ("prism.compare", "--cfg=job"),
])
def test_help_does_not_import_heavy_modules(module: str, flag: str) -> None:
    out = subprocess.run([sys.executable, "-c", PROBE, module, flag], cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=120)
    assert "EXIT 0 HEAVY []" in out.stderr, (module, flag, out.stderr[-2000:])
    assert out.stdout.strip(), "the help (or config) is printed"
