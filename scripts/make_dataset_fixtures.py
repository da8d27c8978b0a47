"""Rebuild the MMLU, MMLU-Pro and CommonsenseQA fixture subsets under tests/data/ from full local copies.

Usage: ``python scripts/make_dataset_fixtures.py DIR`` where DIR holds ``mmlu/test.jsonl``,
``mmlu_pro/test.jsonl`` and ``commonsense_qa/validation.jsonl`` in the Hugging Face schemas. Every kept line
is copied byte for byte, in source order; the selection rules are in each subset's README.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "data"


def lines(path: Path) -> list[str]:
    """The non-blank lines of a JSONL file."""
    # split("\n"), never splitlines(): some strings hold U+0085, which splitlines() breaks on.
    return [line for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def mmlu(source: Path) -> list[str]:
    """The MMLU test rows kept (see tests/data/mmlu/README.md)."""
    rows = lines(source / "mmlu" / "test.jsonl")
    subjects = [json.loads(line)["subject"] for line in rows]
    first: dict[str, int] = {}
    keep = set()
    for number, subject in enumerate(subjects):
        first.setdefault(subject, number)
        if subject == "college_physics":
            keep.add(number)  # every row: 11 of them repeat an earlier one exactly
        elif subject in ("anatomy", "astronomy", "virology") and number - first[subject] < 20:
            keep.add(number)
    # 1-based line numbers: U+0085 in management and sociology, the prehistory pair with reordered options,
    # an exact repeat in public_relations, a repeated option in business_ethics.
    keep |= {n - 1 for n in (6987, 13474, 10325, 10326, 13053, 13062, 390)}
    return [rows[n] for n in sorted(keep)]


def mmlu_pro(source: Path) -> list[str]:
    """The MMLU-Pro test rows kept (see tests/data/mmlu_pro/README.md)."""
    rows = lines(source / "mmlu_pro" / "test.jsonl")
    keep, per_count = [], {}
    for line in rows:
        row = json.loads(line)
        qid, count = row["question_id"], len(row["options"])
        repeated = len({o.strip().casefold() for o in row["options"]}) != count
        around_gaps = 1501 <= qid <= 1507 or 8302 <= qid <= 8308
        per_count[count] = per_count.get(count, 0) + 1
        if qid == 5215 or around_gaps or per_count[count] <= 3 or (repeated and qid < 3000):
            keep.append(line)
    return keep


def commonsense_qa(source: Path) -> list[str]:
    """The CommonsenseQA validation rows kept (see tests/data/commonsense_qa/README.md)."""
    rows = lines(source / "commonsense_qa" / "validation.jsonl")
    keep = []
    for number, line in enumerate(rows):
        choices = json.loads(line)["choices"]["text"]
        if number < 50 or (len({c.strip().casefold() for c in choices}) != len(choices) and number < 300):
            keep.append(line)
    return keep


def main() -> None:
    """Write the three subsets from the full copies under the directory given as the argument."""
    source = Path(sys.argv[1])
    for name, split, pick in (("mmlu", "test", mmlu), ("mmlu_pro", "test", mmlu_pro),
                              ("commonsense_qa", "validation", commonsense_qa)):
        kept = pick(source)
        assert len(kept) <= 200, (name, len(kept))
        (OUT / name).mkdir(parents=True, exist_ok=True)
        (OUT / name / f"{split}.jsonl").write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        print(name, len(kept))


if __name__ == "__main__":
    main()
