"""Write the test fixtures ``tests/data/{arc_challenge,sciq}/test.jsonl`` from full local copies of the datasets.

Usage: ``python scripts/make_test_fixtures.py SOURCE_DIR`` where ``SOURCE_DIR`` holds
``arc_challenge/test.jsonl`` and ``sciq/test.jsonl`` in the Hugging Face schema (the layout ``dataset.data_dir``
reads).

The selection rule (documented in ``tests/data/README.md``): rank every source row by PRISM's own freezing
rule at seed 0 (sha256 of ``"0:" + question_id``, ties by id) and keep the first 200, written as the source's
own lines, unchanged and in source order. The fixture therefore contains every question of any seed-0
sample of up to ~190 questions of the full test split, so such a frozen set built from the fixture is
byte-identical to the one built from the full dataset.
"""

from __future__ import annotations

import sys
from pathlib import Path

from prism.questions import _normalize
from prism.types import sha256_text

SIZE = 200
SEED = 0
DATASETS = ("arc_challenge", "sciq")
TARGET = Path(__file__).resolve().parent.parent / "tests" / "data"


def select_lines(source: Path, dataset: str) -> list[str]:
    """Return the lines of ``source`` kept by the seeded rule, in source order."""
    import json

    # Split on "\n" only: a few dataset strings hold U+0085, which str.splitlines() would break on.
    lines = [line for line in source.read_text(encoding="utf-8").split("\n") if line]
    ids = [_normalize(dataset, json.loads(line), SEED)[0] for line in lines]
    ranked = sorted(range(len(lines)), key=lambda i: (sha256_text(f"{SEED}:{ids[i]}"), ids[i]))
    return [lines[i] for i in sorted(ranked[:SIZE])]


def main() -> None:
    """Write both fixtures from ``sys.argv[1]``."""
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/make_test_fixtures.py SOURCE_DIR")
    source_dir = Path(sys.argv[1])
    for dataset in DATASETS:
        kept = select_lines(source_dir / dataset / "test.jsonl", dataset)
        out = TARGET / dataset / "test.jsonl"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        print(f"{out}: {len(kept)} questions")


if __name__ == "__main__":
    main()
