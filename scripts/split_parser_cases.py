"""Write the public parser cases as one file per source, ``tests/data/parser_cases/<source>.jsonl``, at most 200 each.

Usage: ``python scripts/split_parser_cases.py CASES.jsonl [MORE.jsonl ...]``: every case of the given files (a
new collection round, or the files of ``tests/data/parser_cases/`` themselves) is written to the file of its
source, the part of its ``id`` before the first ``-`` (``mmlupro-gpt4o-law-12`` -> ``mmlupro.jsonl``). Each line
is written as read, unchanged (every provenance field kept), in the order read.

A source with more than 200 cases keeps 200, chosen by a fixed rule that keeps every answer style it has
(documented in ``tests/data/README.md``). Cases are ranked by the sha256 of their ``id``; kept, in this order:

1. every case with a ``parser_known_miss`` (each is an accepted miss someone wrote down why);
2. for each answer style, the first ranked case of that style, a style being the parse method today's parser
   gives (``prism.parsing``), the person's outcome (``person_reason``, or answered) and ``person_clear``;
3. for each model and each results file (``path``), the first ranked case, so none disappears;
4. the remaining places shared among the styles in proportion to how many cases of each are left (largest
   remainder, ties by style), each style's filled in rank order.

Run it from the repository root with ``PYTHONPATH=.``; it prints how many cases each source kept.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from prism.parsing import parse_response

LIMIT = 200
TARGET = Path(__file__).resolve().parent.parent / "tests" / "data" / "parser_cases"


def source_of(case: dict[str, Any]) -> str:
    """The source a case belongs to: its ``id`` up to the first ``-``."""
    return str(case["id"]).split("-", 1)[0]


def style_of(case: dict[str, Any]) -> tuple[str, str, bool]:
    """(parse method of today's parser, the person's outcome, whether the person is sure)."""
    method = parse_response(case["response"], case["labels"], case["options"]).method
    return method, case["person_reason"] or "answered", bool(case["person_clear"])


def select(cases: list[dict[str, Any]], limit: int = LIMIT) -> set[int]:
    """Indices of the cases of one source that are kept (all of them when there are at most ``limit``)."""
    if len(cases) <= limit:
        return set(range(len(cases)))
    ranked = sorted(range(len(cases)), key=lambda i: hashlib.sha256(cases[i]["id"].encode()).hexdigest())
    styles = [style_of(case) for case in cases]
    kept = [i for i in ranked if cases[i].get("parser_known_miss")]
    for key in (lambda i: styles[i], lambda i: cases[i]["model"], lambda i: cases[i]["path"]):
        covered = {key(i) for i in kept}
        for i in ranked:
            if key(i) not in covered:
                kept.append(i)
                covered.add(key(i))
    if len(kept) > limit:
        raise SystemExit(f"{source_of(cases[0])}: {len(kept)} cases are needed to keep every known miss, answer "
                         f"style, model and results file, more than {limit}; split the source by model instead.")
    chosen = set(kept)
    left: dict[tuple[str, str, bool], list[int]] = defaultdict(list)
    for i in ranked:
        if i not in chosen:
            left[styles[i]].append(i)
    places = limit - len(chosen)
    total = sum(len(v) for v in left.values())
    shares = {style: places * len(v) / total for style, v in left.items()}
    quota = {style: int(share) for style, share in shares.items()}
    by_remainder = sorted(shares, key=lambda s: (-(shares[s] - quota[s]), s))
    for style in by_remainder[: places - sum(quota.values())]:
        quota[style] += 1
    for style, members in left.items():
        chosen.update(members[: quota[style]])
    return chosen


def main() -> None:
    """Split the files named on the command line into ``tests/data/parser_cases/``."""
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    lines: dict[str, list[str]] = defaultdict(list)
    for name in sys.argv[1:]:
        # Split on "\n" only: a response may hold U+2028 or U+0085, which str.splitlines() would break on.
        for line in Path(name).read_text(encoding="utf-8").split("\n"):
            if line.strip():
                lines[source_of(json.loads(line))].append(line)
    TARGET.mkdir(parents=True, exist_ok=True)
    for source, source_lines in sorted(lines.items()):
        cases = [json.loads(line) for line in source_lines]
        kept = select(cases)
        (TARGET / f"{source}.jsonl").write_text("".join(source_lines[i] + "\n" for i in sorted(kept)),
                                                encoding="utf-8")
        styles = Counter(style_of(cases[i]) for i in kept)
        print(f"{source}: kept {len(kept)} of {len(cases)}, {len(styles)} answer styles")


if __name__ == "__main__":
    main()
