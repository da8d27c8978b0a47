"""The differences table streamed to its file: the bytes the in-memory table writes, exact counts, same readers.

Synthetic runs (no MLflow) built to stress the CSV: responses with commas, quotes, newlines and accents,
missing responses, a run without an answer key, repetitions, conditions one run lacks, failed cells.
The reference is :func:`prism.compare.tables.differences` written as :func:`prism.compare.core.write_tables`
writes it; the counts are checked against a count made cell by cell.
"""

from __future__ import annotations

import random
from itertools import combinations
from pathlib import Path

import pandas as pd
import pytest

from prism.compare.build import build_tables
from prism.compare.comparison_plan import ComparisonPlan
from prism.compare.core import write_tables
from prism.compare.differences_file import HEAD_ROWS, listed_count, stream_differences, written_to
from prism.compare.report_sections import TOP_DIFFERENCES as REPORT_TOP
from prism.compare.report_sections import difference_groups
from prism.compare.tables import ModelCells, cap_note, differences, model_pairs
from prism.compare.terminal import TOP_DIFFERENCES as TERMINAL_TOP
from prism.compare.terminal import format_differences

LABELS = "ABCD"
TEXTS = ["plain", "a, comma", 'a "quote"', "two\nlines", "café ünïcode", "", None]


def synthetic(index: int, conditions: tuple[str, ...], n_questions: int = 30, repetitions: int = 2,
              keyless: bool = False) -> ModelCells:
    """A seeded run: answers right with its own skill, UNKNOWN now and then, a few cells failed (absent)."""
    rng = random.Random(index)
    skill = rng.uniform(0.2, 0.9)
    rows = []
    for q in rng.sample(range(n_questions), n_questions):  # each run lists its questions in its own order
        key = None if keyless else LABELS[q % 4]
        for condition in conditions:
            for rep in range(repetitions):
                if rng.random() < 0.05:
                    continue  # a failed request: no cell
                roll = rng.random()
                answer = LABELS[q % 4] if roll < skill else (None if roll > 0.9 else rng.choice(LABELS))
                text = rng.choice(TEXTS)
                rows.append((f"q{q:03d}", condition, rep, answer, key,
                             None if text is None else f"{text} says {answer}"))
    frame = pd.DataFrame(rows, columns=["question_id", "condition", "repetition", "answer", "correct_answer",
                                        "response"])
    frame["category"] = frame["answer"].where(frame["answer"].notna(), "UNKNOWN")
    frame["correct"] = frame["answer"] == frame["correct_answer"]
    frame["recovered"] = frame["answer"].notna()
    frame["prompt_sha256"] = frame["question_id"] + frame["condition"]
    prompts = {sha: f"Prompt {sha},\n\"{index}\"" for sha in frame["prompt_sha256"].unique()[::2]}
    return ModelCells(f"m{index}", f"run{index}", conditions, frame, prompts, model=f"m{index}")


MODELS = [synthetic(1, ("P0", "P1", "P2")), synthetic(2, ("P0", "P2", "P1")), synthetic(3, ("P0", "P1")),
          synthetic(4, ("P0", "P1", "P2"), keyless=True), synthetic(5, ("P0", "P1", "P2"), repetitions=1)]


def reference_csv(table: pd.DataFrame, tmp_path: Path) -> bytes:
    """The bytes the comparison wrote for the in-memory table."""
    out = tmp_path / "reference"
    write_tables(out, {"differences": table})
    return (out / "differences.csv").read_bytes()


def cell_by_cell_counts(a: ModelCells, b: ModelCells) -> tuple[int, int]:
    """(paired, differing) counted one cell at a time."""
    shared = set(a.conditions) & set(b.conditions)
    answers = {(r.question_id, r.condition, r.repetition): r.category for r in b.cells.itertuples()}
    paired = differing = 0
    for r in a.cells.itertuples():
        other = answers.get((r.question_id, r.condition, r.repetition))
        if r.condition in shared and other is not None:
            paired += 1
            differing += other != r.category
    return paired, differing


@pytest.mark.parametrize("cap", [None, 0, 3, 10_000])
@pytest.mark.parametrize("pairs", ["all", "reference"])
def test_the_streamed_file_is_the_in_memory_tables_csv(tmp_path: Path, cap: int | None, pairs: str) -> None:
    chosen = model_pairs(MODELS, pairs)
    table, counts = differences(MODELS, chosen, cap)
    path = tmp_path / "comparison" / "differences.csv"
    head, streamed_counts = stream_differences(path, MODELS, chosen, cap)
    assert path.read_bytes() == reference_csv(table, tmp_path)
    pd.testing.assert_frame_equal(streamed_counts, counts)
    pd.testing.assert_frame_equal(head, table.head(HEAD_ROWS), check_dtype=False)
    assert written_to(head) == path
    assert [p.name for p in path.parent.iterdir()] == ["differences.csv"], "the spool file is left behind"
    if cap is None and pairs == "all":
        assert len(table) > HEAD_ROWS, "the synthetic runs must list more cells than the head keeps"


@pytest.mark.parametrize("cap", [None, 2])
def test_the_counts_are_exact(tmp_path: Path, cap: int | None) -> None:
    path = tmp_path / "differences.csv"
    _, counts = stream_differences(path, MODELS, None, cap)
    assert len(counts) == len(list(combinations(MODELS, 2)))
    for row, (a, b) in zip(counts.itertuples(), combinations(MODELS, 2), strict=True):
        paired, differing = cell_by_cell_counts(a, b)
        assert (row.model_a, row.model_b, row.paired, row.differing) == (a.label, b.label, paired, differing)
        assert row.listed == (differing if cap is None else min(differing, cap))
    assert len(pd.read_csv(path)) == int(counts["listed"].sum()) == counts["listed"].sum()


def test_no_differing_cell_writes_the_header_alone(tmp_path: Path) -> None:
    same = [MODELS[0], ModelCells("twin", "run-twin", MODELS[0].conditions, MODELS[0].cells)]
    table, _ = differences(same, None, None)
    head, counts = stream_differences(tmp_path / "differences.csv", same, None, None)
    assert (tmp_path / "differences.csv").read_bytes() == reference_csv(table, tmp_path)
    assert head.empty and list(head.columns) == list(table.columns) and counts["differing"].tolist() == [0]


def test_build_tables_streams_when_given_a_file_and_the_readers_show_what_they_showed(tmp_path: Path) -> None:
    plan = ComparisonPlan(baseline="P0", n_boot=20, seed=0, pairs="all")
    whole = build_tables(MODELS, plan)
    path = tmp_path / "comparison" / "differences.csv"
    streamed = build_tables(MODELS, plan, differences_csv=path)
    names = [name for name, _ in whole.items()]
    assert [name for name, _ in streamed.items()] == names
    assert whole.differences is not None
    assert path.read_bytes() == reference_csv(whole.differences, tmp_path)
    # write_tables keeps the streamed file (it does not overwrite it with the head) and lists it in its place.
    out = tmp_path / "comparison"
    written = write_tables(out, streamed)
    assert [p.name for p in written] == [f"{name}.csv" for name in names]
    assert path.read_bytes() == reference_csv(whole.differences, tmp_path)
    assert max(REPORT_TOP, TERMINAL_TOP) <= HEAD_ROWS
    assert listed_count(streamed) == listed_count(whole) == len(whole.differences)
    assert cap_note(streamed) == cap_note(whole)
    assert streamed.differences is not None
    assert format_differences(streamed.differences) == format_differences(whole.differences)
    assert difference_groups(streamed.differences, {}) == difference_groups(whole.differences, {})
