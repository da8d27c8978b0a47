"""What the meaning measure costs: loading the model, embedding 1,000 responses, and the cache's saving.

Point it at a run's output directory (its ``responses/responses.jsonl`` supplies real response texts):

    python benchmarks/embedding_runtime.py outputs/<date>/<time> --n 1000

Needs the ``[meaning]`` extra. It prints, as Markdown: the import and load time of the model, the time to
embed ``--n`` distinct response texts (the run's texts, cycled with a numbered suffix when the run has fewer,
so none is a cache hit) with an empty cache, the time to read them back from the cache, and the largest
difference from the committed reference vectors (``tests/data/embedding_reference.json``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

REFERENCE = Path(__file__).resolve().parent.parent / "tests" / "data" / "embedding_reference.json"


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, help="output directory of a PRISM run")
    parser.add_argument("--n", type=int, default=1000, help="distinct texts to embed")
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    lines = (args.run_dir / "responses" / "responses.jsonl").read_text(encoding="utf-8").splitlines()
    seen = list(dict.fromkeys(str(json.loads(line).get("response") or "") for line in lines if line.strip()))
    texts = [seen[i % len(seen)] + ("" if i < len(seen) else f" ({i // len(seen)})") for i in range(args.n)]

    started = time.perf_counter()
    from prism.compare import embedding

    encoder = embedding.Encoder()
    loaded = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        cache = embedding.EmbeddingCache(Path(tmp) / "e.sqlite")
        started = time.perf_counter()
        _, made = embedding.embed_texts(texts, cache, "bench", lambda t: encoder(t, args.batch_size), args.batch_size)
        cold = time.perf_counter() - started
        started = time.perf_counter()
        _, again = embedding.embed_texts(texts, cache, "bench", lambda t: encoder(t, args.batch_size))
        warm = time.perf_counter() - started
    reference = json.loads(REFERENCE.read_text(encoding="utf-8"))
    vectors = encoder(reference["texts"], args.batch_size).astype(np.float64)
    worst = float(np.abs(vectors - np.asarray(reference["vectors"], dtype=np.float64)).max())
    mean_chars = sum(map(len, texts)) / len(texts)
    print("| what | value |\n| --- | --- |")
    print(f"| import + load (sentence-transformers, torch, all-MiniLM-L6-v2) | {loaded:.1f} s |")
    print(f"| embed {made} distinct responses (mean {mean_chars:.0f} characters), empty cache, batch "
          f"{args.batch_size} | {cold:.1f} s ({1000 * cold / max(made, 1):.1f} s per 1,000) |")
    print(f"| the same {len(texts)} again, from the cache ({again} embedded) | {warm:.2f} s |")
    print(f"| largest difference from sentence-transformers' own encode (fixture) | {worst:.1e} |")


if __name__ == "__main__":
    main()
