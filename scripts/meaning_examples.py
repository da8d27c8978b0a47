"""Where meaning moves and the answer does not, and the reverse: pairs of responses from one run, printed.

Usage (the ``[meaning]`` extra installed; embeddings come from the cache a comparison filled)::

    python scripts/meaning_examples.py RUN_OUTPUT_DIR [--baseline P0] [--top 3] [--cache .prism/embeddings.sqlite]

Each observed variant response is paired with the baseline response of the same question and repetition (as
the consistency tables pair them). Printed: how the pairs' embedding distance is spread when the answer is
the same and when it differs, then the pairs with the SAME answer and the LARGEST distance (meaning moved,
answer did not) and those with a DIFFERENT answer and the SMALLEST distance (answer moved, meaning did not).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from prism.compare import embedding
from prism.stats.shifts import cosine_distances


def main() -> None:
    """Print the spread and the examples."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--baseline", default="P0")
    parser.add_argument("--top", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=None)
    args = parser.parse_args()
    records = [json.loads(line) for line in
               (args.run_dir / "results" / "scored.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    observed = [r for r in records if not r.get("error")]
    base = {(r["question_id"], r["repetition"]): r for r in observed if r["condition"] == args.baseline}
    pairs = [(base[(r["question_id"], r["repetition"])], r) for r in observed
             if r["condition"] != args.baseline and (r["question_id"], r["repetition"]) in base]
    texts = [str(r.get("response") or "") for pair in pairs for r in pair]
    identity = embedding.model_identity()
    cache = embedding.EmbeddingCache(args.cache or embedding.default_cache_path())
    vectors, made = embedding.embed_texts(texts, cache, identity.weights_sha256)
    rows = []
    for a, b in pairs:
        ta, tb = str(a.get("response") or ""), str(b.get("response") or "")
        distance = float(cosine_distances(vectors([ta, tb]), [ta, tb])[0, 1])
        rows.append((distance, a.get("answer") == b.get("answer"), a, b))
    print(f"{len(rows)} pairs (variant vs {args.baseline}, same question and repetition); {made} texts embedded now")
    for same in (True, False):
        values = np.asarray([d for d, s, _, _ in rows if s == same])
        if values.size:
            q = np.percentile(values, [10, 50, 90])
            print(f"answer {'same' if same else 'differs'}: {values.size} pairs, distance p10 {q[0]:.3f}, "
                  f"median {q[1]:.3f}, p90 {q[2]:.3f}")

    def show(title: str, chosen: list[tuple[float, bool, dict[str, object], dict[str, object]]]) -> None:
        print(f"\n## {title}")
        for distance, _, a, b in chosen:
            print(f"- {a['question_id']} rep {a['repetition']}, {args.baseline} -> {b['condition']}: distance "
                  f"{distance:.3f}, answer {a.get('answer')} -> {b.get('answer')}\n"
                  f"  {args.baseline}: {json.dumps(a.get('response'))}\n"
                  f"  {b['condition']}: {json.dumps(b.get('response'))}")

    # Only pairs where both answers were recovered: UNKNOWN on both sides is "the same answer" to the answer
    # measure, but not an answer that stayed.
    answered = [r for r in rows if r[2].get("answer") is not None and r[3].get("answer") is not None]
    show("Meaning moves, the answer does not (same recovered answer, largest distance)",
         sorted((r for r in answered if r[1]), key=lambda r: -r[0])[: args.top])
    show("The answer moves, the meaning does not (different recovered answers, smallest distance)",
         sorted((r for r in answered if not r[1]), key=lambda r: r[0])[: args.top])


if __name__ == "__main__":
    main()
