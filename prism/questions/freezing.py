"""Frozen sets: a seeded sample written as canonical JSONL in a cache, verified against a sidecar on every use.

The frozen file ``<dataset>-<split>-n<n>-seed<seed>-<digest>.jsonl`` sits next to a ``.meta.json``
sidecar recording its sha256 and the source's version; ``<digest>`` is 12 hex digits of the source and the
mapping (``DatasetConfig.mapping_digest``), so two datasets with the same ``n`` and seed never share a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from prism.config import DatasetConfig
from prism.questions.load import LoadedQuestions, load_questions
from prism.questions.sampling import freeze, freeze_stratified
from prism.questions.spec import DataError, builtin_dataset, dataset_config
from prism.types import Question, canonical_json, safe_filename

DEFAULT_CACHE_DIR = Path(".prism") / "frozen"


@dataclass(frozen=True)
class FrozenSet:
    """A frozen sample on disk, identified by the sha256 of its canonical bytes.

    Attributes:
        questions: The sample in frozen order (a prefix of any larger sample with the same seed).
        sha256: Hex sha256 of the frozen file's bytes.
        path: Where the frozen JSONL lives.
        dataset: Dataset name.
        split: Split name.
        n: Sample size.
        seed: Sample seed.
        dataset_version: Version of the source the sample was drawn from.
        dropped: Source questions dropped as ineligible, per reason.
        pool_size: Number of eligible questions the sample was drawn from.
        mapping_digest: Digest of the source and the mapping (part of the file name).
    """

    questions: tuple[Question, ...]
    sha256: str
    path: Path
    dataset: str
    split: str
    n: int
    seed: int
    dataset_version: str
    dropped: dict[str, int]
    pool_size: int
    mapping_digest: str = ""


def frozen_bytes(questions: Sequence[Question]) -> bytes:
    """Serialize questions the one canonical way: one ``canonical_json`` object per line, LF-ended."""
    return "".join(canonical_json(q.to_dict()) + "\n" for q in questions).encode("utf-8")


def read_frozen(path: str | os.PathLike[str]) -> list[Question]:
    """Read a frozen JSONL file back into questions; a bad line is an error naming the file and line."""
    questions = []
    lines = Path(path).read_bytes().split(b"\n")  # not splitlines(): canonical_json keeps U+2028 raw
    for number, line in enumerate(lines[:-1] if lines[-1] == b"" else lines, start=1):
        try:
            questions.append(Question.from_dict(json.loads(line.decode("utf-8"))))
        except (ValueError, KeyError, TypeError, RecursionError) as exc:  # ValueError: bad UTF-8 or JSON
            raise DataError(f"malformed frozen question at {path}:{number}: {exc!r}") from exc
    return questions


def _write_atomic(path: Path, data: bytes) -> None:
    # Parallel sweep jobs may freeze the same set at once; replace() makes each writer's file whole.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _read_meta(meta_path: Path, fix: str) -> dict[str, Any]:
    """Read a frozen file's sidecar; an absent one is empty, an unreadable one an error."""
    if not meta_path.exists():
        return {}
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read the frozen set record {meta_path}: {exc}. {fix}") from exc
    if not isinstance(meta, dict) or not isinstance(meta.get("sha256"), str):
        raise DataError(f"the frozen set record {meta_path} has no sha256. {fix}")
    return meta


def frozen_cache_dir(spec: DatasetConfig) -> Path:
    """Where the spec's frozen sets live: ``dataset.cache_dir``, else ``.prism/frozen`` under the working directory."""
    return Path(spec.cache_dir) if spec.cache_dir else DEFAULT_CACHE_DIR


def freeze_dataset(cfg: DatasetConfig | Mapping[str, Any]) -> FrozenSet:
    """Freeze the sample the ``dataset`` config names (``name``, ``split``, ``n``, ``sample_seed``, ...).

    Raises:
        DataError: The config, the source, a row or the cache cannot be used.
    """
    spec = dataset_config(cfg)
    return freeze_question_set(spec, n=spec.n, seed=spec.sample_seed, cache_dir=frozen_cache_dir(spec))


def freeze_question_set(
    dataset: str | DatasetConfig,
    split: str = "test",
    n: int = 100,
    seed: int = 0,
    data_dir: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> FrozenSet:
    """Build the frozen set, or verify the cached one; a cached file is never silently rebuilt.

    Every call rebuilds the sample in memory and checks that the file, the record and the rebuild agree,
    so edits, changed source data or a changed normalization are all caught. Missing pieces are written
    only when they match what is recorded.

    Args:
        dataset: A built-in dataset's name, or a spec (which carries its own split and source).
        split: Split name (when ``dataset`` is a name).
        n: Sample size (a total across the groups when the spec stratifies).
        seed: Sample seed (also seeds rules that shuffle).
        data_dir: Local data directory when ``dataset`` is a name, else ``PRISM_DATA_DIR``, else the Hub.
        cache_dir: Where frozen files live; default ``.prism/frozen`` under the working directory.

    Returns:
        The frozen set.

    Raises:
        DataError: Loading failed, ``n`` is out of range, or the cache disagrees with the rebuild.
    """
    if isinstance(dataset, DatasetConfig):
        spec = dataset
    else:
        spec = builtin_dataset(dataset, split=split, data_dir=None if data_dir is None else os.fspath(data_dir))
    loaded: LoadedQuestions = load_questions(spec, seed=seed)
    sample = (freeze_stratified if spec.stratify else freeze)(loaded.questions, n, seed)
    data = frozen_bytes(sample)
    digest = hashlib.sha256(data).hexdigest()
    mapping = spec.mapping_digest(loaded.source_id)
    directory = Path(cache_dir) if cache_dir is not None else DEFAULT_CACHE_DIR
    path = directory / f"{safe_filename(loaded.dataset)}-{loaded.split}-n{n}-seed{seed}-{mapping[:12]}.jsonl"
    meta_path = path.with_suffix(".meta.json")
    fix = f"Delete {path} and {meta_path} to rebuild it (runs logged with the old set keep its hash)."
    meta = _read_meta(meta_path, fix)
    expected = meta.get("sha256", digest)  # an unrecorded file must at least match the rebuild
    if path.exists() and (actual := hashlib.sha256(path.read_bytes()).hexdigest()) != expected:
        raise DataError(
            f"frozen file {path} has sha256 {actual}, not the expected {expected}: it changed. {fix}"
        )
    if meta and meta.get("dataset_version") != loaded.dataset_version:
        raise DataError(
            f"the source of frozen file {path} changed: recorded dataset version "
            f"{meta.get('dataset_version')}, now {loaded.dataset_version} ({loaded.source}). {fix}"
        )
    if expected != digest:
        raise DataError(
            f"rebuilding {path} gives sha256 {digest}, not the recorded {expected}: the question "
            f"normalization changed since it was frozen. {fix}"
        )
    frozen = FrozenSet(tuple(sample), digest, path, loaded.dataset, loaded.split, n, seed, loaded.dataset_version,
                       loaded.dropped, len(loaded.questions), mapping)
    directory.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        _write_atomic(path, data)
    if not meta:
        record = {
            f.name: getattr(frozen, f.name) for f in fields(frozen) if f.name not in ("questions", "path")
        }
        record["source"] = loaded.source
        _write_atomic(meta_path, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    return frozen
