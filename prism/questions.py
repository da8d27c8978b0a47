"""Load ARC-Challenge and SciQ through Hugging Face ``datasets`` and freeze seeded samples of them.

The flow is ``load_questions`` (Hub or local JSONL in the Hub's schema -> eligible ``Question``s plus
drop counts) -> ``freeze`` (seeded, prefix-stable sample) -> ``freeze_question_set`` (canonical JSONL in
a cache directory, verified against a sidecar on every later use). ``datasets`` is imported lazily
because it costs about a second and most callers (tests of the pure core) never load data.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from prism.errors import PrismError
from prism.types import Question, canonical_json, sha256_text

LETTERS = "ABCDEFGHIJ"
N_OPTIONS = 4  # the PRISM protocol compares four-option questions only
DROP_REASONS = ("not_four_options", "repeated_options", "answer_not_in_labels")
DEFAULT_CACHE_DIR = Path(".prism") / "frozen"
_OFFLINE_HINT = (
    "Point PRISM at local JSONL files in the Hub's schema instead: set dataset.data_dir=DIR (Hydra "
    "override) or the environment variable PRISM_DATA_DIR=DIR, where DIR holds <dataset>/<split>.jsonl "
    "(the test suite's fixtures, tests/data/, are such a directory)."
)


class DataError(PrismError, ValueError):
    """A dataset could not be loaded or a frozen set could not be trusted; the message says why."""


@dataclass(frozen=True)
class _Source:
    hub_path: str
    hub_config: str | None
    required: tuple[str, ...]  # string fields every row must carry


DATASETS: dict[str, _Source] = {
    "arc_challenge": _Source("allenai/ai2_arc", "ARC-Challenge", ("id", "question", "answerKey")),
    "sciq": _Source(
        "allenai/sciq", None, ("question", "correct_answer", "distractor1", "distractor2", "distractor3")
    ),
}


@dataclass(frozen=True)
class LoadedQuestions:
    """The eligible questions of one split, in source order.

    Attributes:
        questions: Questions that passed every eligibility rule.
        dropped: Number of source questions dropped, per reason in ``DROP_REASONS``.
        dataset_version: ``sha256:<hex>`` of a local source file, or ``<hub repo>@<revision>``.
        source: The file path or Hub repository the rows came from.
    """

    questions: tuple[Question, ...]
    dropped: dict[str, int]
    dataset_version: str
    source: str


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


def _int_seed(text: str) -> int:
    # str hashing is randomized per process, so integer seeds come from sha256 instead.
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> Path | None:
    """Return the data directory to read: the argument, else ``PRISM_DATA_DIR``, else None (the Hub)."""
    chosen = os.fspath(data_dir) if data_dir else os.environ.get("PRISM_DATA_DIR", "")
    if not chosen:
        return None
    path = Path(chosen).expanduser()
    if not path.is_dir():
        raise DataError(f"data directory {path} does not exist (from dataset.data_dir or PRISM_DATA_DIR)")
    return path


def _row_problem(name: str, row: Any) -> str | None:
    """Say what is wrong with one source row, or None when it has the fields normalization reads."""
    if not isinstance(row, dict):
        return f"expected a JSON object, got {type(row).__name__}"
    for key in DATASETS[name].required:
        if not isinstance(row.get(key), str):
            return f"field {key!r} is missing or not a string"
    if name == "arc_challenge":
        choices = row.get("choices")
        if not isinstance(choices, dict) or not all(
            isinstance(choices.get(k), list) and all(isinstance(v, str) for v in choices[k])
            for k in ("text", "label")
        ):
            return "field 'choices' must be {'text': [str], 'label': [str]}"
        if len(choices["text"]) != len(choices["label"]):
            return "'choices.text' and 'choices.label' differ in length"
    return None


def _normalize(name: str, row: dict[str, Any], seed: int) -> tuple[str, str, tuple[str, ...], int | None]:
    """Return (question id, stem, options in frozen order, index of the answer or None)."""
    if name == "arc_challenge":
        labels = list(row["choices"]["label"])
        # Canonical labels are positional (A, B, ...), so numeric labels 1-4 map to A-D by position.
        answer = labels.index(row["answerKey"]) if row["answerKey"] in labels else None
        return row["id"], row["question"], tuple(row["choices"]["text"]), answer
    texts = [row["correct_answer"], row["distractor1"], row["distractor2"], row["distractor3"]]
    # SciQ has no ids: hash the stem and the options as a set, which no shuffle or re-release changes.
    digest = sha256_text(canonical_json({"options": sorted(texts), "question": row["question"]}))
    qid = f"sciq-{digest[:16]}"
    # The correct answer always comes first in SciQ, so shuffle it per question, seeded by value only.
    order = list(range(len(texts)))
    random.Random(_int_seed(f"{seed}:{qid}")).shuffle(order)
    return qid, row["question"], tuple(texts[i] for i in order), order.index(0)


def _hub_reachable(timeout: float = 2.0) -> bool:
    """Probe the Hub with a short TCP connect, so an offline machine fails in seconds, not ~23 s."""
    if any(os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True  # a direct connect proves nothing behind a proxy; let datasets try
    url = urlsplit(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    result: list[bool] = []

    def probe() -> None:
        try:
            socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout).close()
            result.append(True)
        except OSError:
            result.append(False)

    # A thread bounds DNS resolution too, which socket timeouts do not cover.
    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(result and result[0])


def _read_local(path: Path, name: str) -> tuple[list[dict[str, Any]], Callable[[int], str], str]:
    """Load a local JSONL file through ``datasets`` after checking each line, so errors name the line."""
    if not path.is_file():
        found = sorted(p.name for p in path.parent.glob("*.jsonl")) if path.parent.is_dir() else []
        raise DataError(f"expected the file {path}, which does not exist (found: {found or 'nothing'})")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw.count(b"\n", 0, exc.start) + 1
        raise DataError(f"malformed row at {path}:{bad}: not valid UTF-8") from exc
    line_numbers: list[int] = []
    # split("\n"), not splitlines(): JSON strings may hold U+2028 or \x85, which splitlines() breaks on.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue  # the JSON loader skips blank lines too, so row indices stay aligned
        try:
            problem = _row_problem(name, json.loads(line))
        except json.JSONDecodeError as exc:
            problem = f"invalid JSON ({exc.msg})"
        except RecursionError:
            problem = "invalid JSON (nested too deeply to read)"
        if problem:
            raise DataError(f"malformed row at {path}:{number}: {problem}")
        line_numbers.append(number)
    if not line_numbers:
        raise DataError(f"{path} holds no rows: it is empty or blank. Expected one JSON object per line.")
    # Nothing here needs the network; without these flags datasets may still try and retry for ~23 s.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    import datasets

    # The rows were already checked line by line; datasets' "Generating train split" bar is noise here.
    datasets.disable_progress_bars()
    try:
        rows: list[dict[str, Any]] = datasets.load_dataset("json", data_files=str(path), split="train").to_list()
    except Exception as exc:  # pyarrow's reader raises several types, e.g. for a field typed differently by row
        raise DataError(f"datasets cannot read {path} although each line is a valid row: {exc}. Give every "
                        "field the same type on every line.") from exc
    if len(rows) != len(line_numbers):
        raise DataError(f"{path}: datasets read {len(rows)} rows from {len(line_numbers)} non-blank lines")
    return rows, lambda i: f"{path}:{line_numbers[i]}", f"sha256:{hashlib.sha256(raw).hexdigest()}"


def _read_hub(name: str, split: str) -> tuple[list[dict[str, Any]], Callable[[int], str], str]:
    """Load a split from the Hub pinned to the repository's current revision."""
    source = DATASETS[name]
    where = f"{source.hub_path} ({source.hub_config or 'default'}) split {split!r}"
    flags = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    offline = any(os.environ.get(k, "").lower() in ("1", "true", "yes", "on") for k in flags)
    if offline or not _hub_reachable():
        reason = "offline mode is set (HF_HUB_OFFLINE)" if offline else "the Hugging Face Hub is unreachable"
        raise DataError(f"cannot load {where}: {reason} and no data directory was given. {_OFFLINE_HINT}")
    import datasets
    from huggingface_hub import HfApi

    try:
        revision = HfApi().dataset_info(source.hub_path).sha
        ds = datasets.load_dataset(source.hub_path, source.hub_config, split=split, revision=revision)
    except Exception as exc:  # datasets raises many types; the caller needs one, with the cause kept
        raise DataError(f"cannot load {where} from the Hub: {exc}. {_OFFLINE_HINT}") from exc
    version = f"{source.hub_path}@{revision or 'fingerprint:' + str(ds._fingerprint)}"
    rows: list[dict[str, Any]] = ds.to_list()
    for index, row in enumerate(rows):
        if problem := _row_problem(name, row):
            raise DataError(f"malformed row {index} of {where}: {problem}")
    return rows, lambda i: f"{where} row {i}", version


def load_questions(
    dataset: str, split: str = "test", *, seed: int = 0, data_dir: str | os.PathLike[str] | None = None
) -> LoadedQuestions:
    """Load one split and keep the questions the PRISM protocol can use.

    Args:
        dataset: ``arc_challenge`` or ``sciq`` (see ``DATASETS``).
        split: Split name, e.g. ``test``.
        seed: Sample seed; SciQ's option order is shuffled per question from it.
        data_dir: Directory holding ``<dataset>/<split>.jsonl``; None falls back to ``PRISM_DATA_DIR``,
            then to the Hub.

    Returns:
        The eligible questions in source order, drop counts per reason and the source's version.

    Raises:
        DataError: Unknown dataset, missing file, malformed row, duplicate id, or no way to reach the data.
    """
    if dataset not in DATASETS:
        raise DataError(f"unknown dataset {dataset!r}; known datasets: {', '.join(sorted(DATASETS))}")
    if not re.fullmatch(r"\w+", split):
        raise DataError(f"split must be a plain name such as 'test', got {split!r}")
    directory = resolve_data_dir(data_dir)
    if directory is None:
        rows, where, version = _read_hub(dataset, split)
        source = DATASETS[dataset].hub_path
    else:
        path = directory / dataset / f"{split}.jsonl"
        rows, where, version = _read_local(path, dataset)
        source = str(path)
    dropped = dict.fromkeys(DROP_REASONS, 0)
    first_seen: dict[str, int] = {}
    questions: list[Question] = []
    for index, row in enumerate(rows):
        qid, stem, options, answer = _normalize(dataset, row, seed)
        if qid in first_seen:
            first = where(first_seen[qid])
            raise DataError(f"duplicate question id {qid!r} at {where(index)} (first at {first})")
        first_seen[qid] = index
        if len(options) != N_OPTIONS:
            reason = "not_four_options"
        elif len({o.strip().casefold() for o in options}) != len(options):
            reason = "repeated_options"  # e.g. ARC's "R, rr, Rr, RR": a case-insensitive reader sees three
        elif answer is None:
            reason = "answer_not_in_labels"
        else:
            labels = tuple(LETTERS[: len(options)])
            questions.append(Question(qid, stem, options, labels, labels[answer], dataset, split))
            continue
        dropped[reason] += 1
    return LoadedQuestions(tuple(questions), dropped, version, source)


def freeze(questions: Sequence[Question], n: int, seed: int) -> list[Question]:
    """Draw ``n`` questions with ``seed`` so that a larger ``n`` extends the smaller sample.

    Each question's rank is the sha256 of ``seed:question_id``, so the order depends on neither the source
    order nor the rest of the pool, and the first ``n`` of the ranking are the sample.

    Raises:
        DataError: ``n`` is not between 1 and the pool size.
    """
    if not 0 < n <= len(questions):
        raise DataError(
            f"cannot draw n={n} questions: n must be between 1 and the pool of {len(questions)} "
            "eligible questions"
        )
    ranked = sorted(questions, key=lambda q: (sha256_text(f"{seed}:{q.question_id}"), q.question_id))
    return ranked[:n]


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


def freeze_question_set(
    dataset: str,
    split: str = "test",
    n: int = 100,
    seed: int = 0,
    data_dir: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> FrozenSet:
    """Build the frozen set, or verify the cached one; a cached file is never silently rebuilt.

    The frozen file ``<dataset>-<split>-n<n>-seed<seed>.jsonl`` sits next to a ``.meta.json`` sidecar
    recording its sha256 and the source's version. Every call rebuilds the sample in memory and checks
    that the file, the record and the rebuild agree, so edits, changed source data or a changed
    normalization are all caught. Missing pieces are written only when they match what is recorded.

    Args:
        dataset: Dataset name (see ``DATASETS``).
        split: Split name.
        n: Sample size.
        seed: Sample seed (also seeds SciQ's option order).
        data_dir: Local data directory, else ``PRISM_DATA_DIR``, else the Hub.
        cache_dir: Where frozen files live; default ``.prism/frozen`` under the working directory.

    Returns:
        The frozen set.

    Raises:
        DataError: Loading failed, ``n`` is out of range, or the cache disagrees with the rebuild.
    """
    loaded = load_questions(dataset, split, seed=seed, data_dir=data_dir)
    sample = freeze(loaded.questions, n, seed)
    data = frozen_bytes(sample)
    digest = hashlib.sha256(data).hexdigest()
    directory = Path(cache_dir) if cache_dir is not None else DEFAULT_CACHE_DIR
    path = directory / f"{dataset}-{split}-n{n}-seed{seed}.jsonl"
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
    pool = len(loaded.questions)
    frozen = FrozenSet(
        tuple(sample), digest, path, dataset, split, n, seed, loaded.dataset_version, loaded.dropped, pool
    )
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
