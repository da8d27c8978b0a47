"""The meaning measure: embeddings against sentence-transformers' reference, the cache, the refusal, end to end.

The model tests need the ``[meaning]`` extra (``pip install -e '.[meaning]'``, which CI installs) and skip
without it; the refusal is tested either way. The reference vectors are
``tests/data/embedding_reference.json`` (``scripts/make_embedding_reference.py``: each text encoded alone by
``SentenceTransformer.encode``); PRISM encodes in batches, through its cache.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import REPO_ROOT

from compare.test_compare import compose_compare
from compare.test_readouts import make_runs
from prism.compare import embedding
from prism.compare.core import compare
from prism.stats.shifts import difference_matrix

REFERENCE = json.loads((REPO_ROOT / "tests" / "data" / "embedding_reference.json").read_text(encoding="utf-8"))
HAVE_EXTRA = all(importlib.util.find_spec(m) is not None for m in ("sentence_transformers", embedding.WEIGHTS_MODULE))
needs_extra = pytest.mark.skipif(not HAVE_EXTRA, reason=f"the [meaning] extra is not installed: {embedding.INSTALL}")


@pytest.fixture(scope="module")
def encoder() -> embedding.Encoder:
    return embedding.Encoder()


@needs_extra
def test_the_installed_weights_are_the_reference_fixture_s() -> None:
    identity = embedding.model_identity()
    assert identity.weights_sha256 == REFERENCE["weights_sha256"], (
        "the installed weights are not the ones the fixture was made from: remake it with "
        "scripts/make_embedding_reference.py")
    assert identity.name == REFERENCE["model"]
    assert identity.package == f"{embedding.WEIGHTS_PACKAGE}=={REFERENCE['versions'][embedding.WEIGHTS_PACKAGE]}"
    params = identity.params()
    assert set(params) == {embedding.MODEL_PARAM, embedding.PACKAGE_PARAM, embedding.WEIGHTS_SHA256_PARAM,
                           embedding.RUNTIME_PARAM}
    assert "sentence-transformers==" in params[embedding.RUNTIME_PARAM]


@needs_extra
@pytest.mark.parametrize("batch_size", [1, 4, 64])
def test_batched_cached_vectors_equal_the_reference_to_1e_5(tmp_path: Path, encoder: embedding.Encoder,
                                                            batch_size: int) -> None:
    cache = embedding.EmbeddingCache(tmp_path / "e.sqlite")
    texts = REFERENCE["texts"]
    vectors, made = embedding.embed_texts(texts, cache, "m", lambda t: encoder(t, batch_size), batch_size)
    assert made == len(set(texts))
    got, want = vectors(texts), np.asarray(REFERENCE["vectors"], dtype=np.float64)
    assert got.shape == want.shape == (len(texts), 384)
    assert float(np.abs(got - want).max()) <= 1e-5
    assert np.linalg.norm(got, axis=1) == pytest.approx(1.0, abs=1e-5)  # the model's Normalize step
    # Read back from the file by another cache object: the same float32 vectors, nothing encoded.
    again, made = embedding.embed_texts(texts, embedding.EmbeddingCache(tmp_path / "e.sqlite"), "m",
                                        lambda t: pytest.fail("a cached text was encoded again"))
    assert made == 0 and np.array_equal(again(texts), got)


@needs_extra
def test_identical_texts_give_zero_and_other_wordings_of_one_meaning_are_closer_than_another_meaning(
        tmp_path: Path, encoder: embedding.Encoder) -> None:
    texts = ["The answer is B because plants need sunlight.", "The answer is B because plants need sunlight.",
             "B: plants make their food from light, so B.", "The answer is B because rocks are made of metal."]
    vectors, _ = embedding.embed_texts(texts, embedding.EmbeddingCache(tmp_path / "e.sqlite"), "m", encoder)
    matrix = difference_matrix(texts, "embedding_cosine", vectors)
    assert matrix[0, 1] == 0.0 and np.all(np.diag(matrix) == 0.0) and np.array_equal(matrix, matrix.T)
    assert 0 < matrix[0, 2] < matrix[0, 3]


def test_the_cache_embeds_each_distinct_text_once_and_keys_by_model(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def encode(texts: Any) -> np.ndarray:  # a deterministic stand-in for the model: the cache is under test
        calls.append(list(texts))
        return np.asarray([[len(t), t.count("a"), 1.0] for t in texts], dtype=np.float32)

    cache = embedding.EmbeddingCache(tmp_path / "sub" / "e.sqlite")
    vectors, made = embedding.embed_texts(["a", "bb", "a", "ccc", "a"], cache, "m1", encode, batch_size=2)
    assert made == 3 and calls == [["a", "bb"], ["ccc"]] and len(cache) == 3
    assert vectors(["bb"]).tolist() == [[2.0, 0.0, 1.0]]
    _, made = embedding.embed_texts(["bb", "dddd"], cache, "m1", encode)
    assert made == 1 and calls[-1] == ["dddd"]
    _, made = embedding.embed_texts(["bb"], cache, "m2", encode)  # other weights: never the first model's vectors
    assert made == 1
    with pytest.raises(KeyError):
        vectors(["never embedded"])
    with pytest.raises(embedding.EmbeddingError, match="batch_size must be at least 1"):
        embedding.embed_texts(["a"], cache, "m1", encode, batch_size=0)
    assert embedding.default_cache_path() == Path(".prism") / "embeddings.sqlite"


def test_without_the_extra_the_measure_is_refused_with_the_install_command(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "sentence_transformers" else real(name, *a))
    with pytest.raises(embedding.EmbeddingError, match=r"pip install -e '\.\[meaning\]'"):
        embedding.require()
    # compare refuses it before any run is read: the tracking store here holds none.
    cfg = compose_compare([f"tracking.uri=sqlite:///{tmp_path}/mlflow.db", "measures=[answer,embedding_cosine]"])
    with pytest.raises(embedding.EmbeddingError, match="sentence_transformers is not installed"):
        compare(cfg, output_dir=tmp_path / "cmp")


@needs_extra
def test_compare_runs_the_measure_everywhere_the_others_go_and_logs_the_model(tmp_path: Path,
                                                                              data_dir: Path) -> None:
    import mlflow

    runs = make_runs(tmp_path, data_dir, 3, "")
    ids = ",".join(runs[m].run_id for m in ("alpha", "twin", "other"))
    cache = tmp_path / "cache" / "emb.sqlite"
    cfg = compose_compare([f"tracking.uri=sqlite:///{tmp_path}/mlflow.db", f"runs=[{ids}]", "bootstrap=100",
                           "permutations=200", "measures=[answer,token_jaccard,embedding_cosine]", "pairs=all",
                           f"embedding.cache={cache}", "embedding.batch_size=16"])
    result = compare(cfg, output_dir=tmp_path / "cmp")
    shifts = result.tables.shifts
    alpha = shifts[shifts["model"] == "alpha"].pivot(index="to_condition", columns="measure", values="shift")
    # P1 changes the answers (and so the texts), P2 only adds a sentence, P3 and P4 nothing: the meaning
    # measure sees what the wording measure sees on these planted steps.
    assert alpha["embedding_cosine"].to_dict() == {"P1": True, "P2": True, "P3": False, "P4": False}
    assert alpha["embedding_cosine"].to_dict() == alpha["token_jaccard"].to_dict()
    agreement = result.tables.measure_agreement
    pair = agreement[(agreement["model"] == "alpha") & (agreement["measure_a"] == "answer")
                     & (agreement["measure_b"] == "embedding_cosine")]
    assert pair[["both", "only_a", "only_b", "neither"]].values.tolist() == [[1, 0, 1, 2]]
    for name in ("profile", "roles", "divergence_noise", "sensitivity_axes"):
        table = getattr(result.tables, name)
        assert "embedding_cosine" in set(table["measure"]), name
    noise = result.tables.divergence_noise
    assert noise.loc[noise["measure"] == "embedding_cosine", "excess"].notna().all()
    page = (result.output_dir / "comparison" / "report.html").read_text(encoding="utf-8")
    assert "embedding_cosine" in page
    assert pd.read_csv(result.output_dir / "comparison" / "shifts.csv")["measure"].eq("embedding_cosine").sum() == 12
    # The model's identity and the cache are logged with the comparison; every distinct text was cached once.
    params = mlflow.tracking.MlflowClient(result.tracking_uri).get_run(result.run_id).data.params
    identity = embedding.model_identity().params()
    assert {k: params[k] for k in identity} == identity and params[embedding.CACHE_PARAM] == str(cache)
    assert result.embedding == {**identity, embedding.CACHE_PARAM: str(cache)}
    texts = {str(t) for m in ("alpha", "twin", "other")
             for t in pd.read_json(runs[m].output_dir / "results" / "scored.jsonl", lines=True)["response"]}
    assert len(embedding.EmbeddingCache(cache)) == len(texts)
