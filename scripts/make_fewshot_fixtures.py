"""Rebuild the few-shot demonstration pools under tests/data/ from full local copies (issue 34).

Usage: ``python scripts/make_fewshot_fixtures.py DIR`` where DIR holds ``arc_challenge/train.jsonl``,
``mmlu/dev.jsonl``, ``mmlu/validation.jsonl`` and ``sciq/validation.jsonl`` in the Hugging Face schemas (the
layout of /work/shared/data). Every kept line is copied byte for byte, in source order:

- ``arc_challenge/train.jsonl``: the first 200 rows of the train split;
- ``mmlu/dev.jsonl`` and ``mmlu/validation.jsonl``: every row of the subjects the MMLU test fixture samples
  from (``anatomy``, ``astronomy``, ``college_physics``, ``virology``);
- ``sciq/validation.jsonl``: the first 200 rows of the validation split.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "data"
MMLU_SUBJECTS = ("anatomy", "astronomy", "college_physics", "virology")


def lines(path: Path) -> list[str]:
    """The non-blank lines of a JSONL file."""
    # split("\n"), never splitlines(): some strings hold U+0085, which splitlines() breaks on.
    return [line for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def write(path: Path, kept: list[str]) -> None:
    """Write the kept lines, LF-ended, and say how many."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    print(f"{path.relative_to(OUT)}: {len(kept)} rows")


def main(source: Path) -> None:
    """Write every pool fixture from the full data in ``source``."""
    write(OUT / "arc_challenge" / "train.jsonl", lines(source / "arc_challenge" / "train.jsonl")[:200])
    for split in ("dev", "validation"):
        rows = lines(source / "mmlu" / f"{split}.jsonl")
        write(OUT / "mmlu" / f"{split}.jsonl", [r for r in rows if json.loads(r)["subject"] in MMLU_SUBJECTS])
    write(OUT / "sciq" / "validation.jsonl", lines(source / "sciq" / "validation.jsonl")[:200])


if __name__ == "__main__":
    main(Path(sys.argv[1]))
