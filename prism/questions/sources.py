"""Where rows come from: a local file (JSONL, CSV, Parquet) or the Hugging Face Hub, all through ``datasets``.

``datasets`` is imported lazily because it costs about a second and most callers never load data. Every
reader returns :class:`Rows`: the rows as dicts, a function that names a row's place for messages (a
JSONL line, a CSV or Parquet data row, a Hub row), the source's version and the columns it has.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from prism.config import DatasetConfig
from prism.questions.spec import DataError

_OFFLINE_HINT = (
    "Point PRISM at local files instead: set dataset.data_dir=DIR (Hydra override) or the environment variable "
    "PRISM_DATA_DIR=DIR, where DIR holds <dataset>/<split>.jsonl in the Hub's schema, or give one file with "
    "dataset.path=FILE (JSONL, CSV or Parquet)."
)


@dataclass(frozen=True)
class Rows:
    """The rows of one source, in source order.

    Attributes:
        rows: One dict per row.
        where: Row index -> its place for messages (``file.jsonl:12``, ``file.csv, data row 3``).
        version: ``sha256:<hex>`` of a local file, or ``<hub repo>@<revision>``.
        source: The file path or Hub repository, as shown to a person.
        source_id: What identifies the source in the frozen file's name (see ``DatasetConfig.mapping_digest``).
        columns: The column names the rows have.
        dataset: The dataset's name (``dataset.name``) these rows belong to, stamped on each question.
        split: The split they were read from (``dataset.split``), stamped on each question.
    """

    rows: list[dict[str, Any]]
    where: Callable[[int], str]
    version: str
    source: str
    source_id: str
    columns: tuple[str, ...]
    dataset: str = ""
    split: str = ""


def resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> Path | None:
    """Return the data directory to read: the argument, else ``PRISM_DATA_DIR``, else None (the Hub)."""
    chosen = os.fspath(data_dir) if data_dir else os.environ.get("PRISM_DATA_DIR", "")
    if not chosen:
        return None
    path = Path(chosen).expanduser()
    if not path.is_dir():
        raise DataError(f"data directory {path} does not exist (from dataset.data_dir or PRISM_DATA_DIR)")
    return path


def read_rows(spec: DatasetConfig) -> Rows:
    """Read the spec's source: ``dataset.path``, else ``<data_dir>/<name>/<split>.jsonl``, else the Hub.

    Raises:
        DataError: Missing file, malformed row, unreadable file, or no way to reach the data.
    """
    # The rows carry the name and split on, so the loader and the freezer read them from the data they
    # describe, not from the config a second time.
    return replace(_read_source(spec), dataset=spec.name, split=spec.split)


def data_dir_file(spec: DatasetConfig) -> Path | None:
    """The file of the data directory ``read_rows`` reads for ``spec`` (``<data_dir>/<name>/<split>.jsonl``).

    None when the spec reads a file of its own (``dataset.path``) or no data directory is set (the Hub).
    """
    if spec.path is not None:
        return None
    directory = resolve_data_dir(spec.data_dir)
    return None if directory is None else directory / (spec.folder or spec.name) / f"{spec.split}.jsonl"


def _read_source(spec: DatasetConfig) -> Rows:
    if spec.path is not None:
        path = Path(spec.path).expanduser()
        return read_file(path, spec.file_format(), str(path.resolve()))
    local = data_dir_file(spec)
    if local is not None:
        # The layout, not the directory, names the source: the same data on another machine is the same set.
        return read_file(local, "json", f"data_dir:{spec.folder or spec.name}/{spec.split}.jsonl")
    return read_hub(spec)


def _offline_flags() -> None:
    # Nothing here needs the network; without these flags datasets may still try and retry for ~23 s.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"


def _jsonl_lines(path: Path, raw: bytes) -> list[int]:
    """Check each line is a JSON object, so an error names the line; return the non-blank line numbers."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw.count(b"\n", 0, exc.start) + 1
        raise DataError(f"malformed row at {path}:{bad}: not valid UTF-8") from exc
    numbers: list[int] = []
    # split("\n"), never splitlines(): strings may hold U+2028 or U+0085 (MMLU, MMLU-Pro), which it breaks on.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue  # the JSON loader skips blank lines too, so row indices stay aligned
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"malformed row at {path}:{number}: invalid JSON ({exc.msg})") from exc
        except RecursionError as exc:
            raise DataError(f"malformed row at {path}:{number}: invalid JSON (nested too deeply to read)") from exc
        if not isinstance(row, dict):
            raise DataError(f"malformed row at {path}:{number}: expected a JSON object, got {type(row).__name__}")
        numbers.append(number)
    return numbers


def _csv_options(path: Path, raw: bytes) -> dict[str, Any]:
    """Read every CSV column as a string, exactly as written: no type guessing, no ``NA`` -> missing.

    The records are counted here first, because pandas (under ``datasets``) quietly turns a first data row
    with one cell too many into an index column, shifting every field.
    """
    import csv
    import io

    from datasets import Features, Value

    try:
        records = list(csv.reader(io.StringIO(raw.decode("utf-8-sig"), newline="")))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"cannot read {path} as CSV: {exc}. Save it as UTF-8 CSV with a header row.") from exc
    header = records[0] if records else []
    if not header or len(set(header)) != len(header) or not all(name.strip() for name in header):
        raise DataError(f"{path} needs a header row of unique, non-empty column names; it has {header}.")
    data = [record for record in records[1:] if record]  # pandas skips blank lines too
    if not data:
        raise DataError(f"{path} holds no rows: expected a header and one row per question.")
    for number, record in enumerate(data, start=1):
        if len(record) != len(header):
            raise DataError(f"malformed row at {path}, data row {number}: {len(record)} cells, but the header has "
                            f"{len(header)} ({header}). Give every row one cell per column (empty cells allowed).")
    features = Features({name: Value("string") for name in header})
    return {"features": features, "keep_default_na": False, "na_filter": False}


def read_file(path: Path, loader: str, source_id: str) -> Rows:
    """Read one local file with ``datasets``' ``json``, ``csv`` or ``parquet`` loader.

    CSV cells are read as text exactly as written (no type guessing, no ``NA`` -> missing), so an option
    such as ``007`` or ``None`` stays what the file says.
    """
    if not path.is_file():
        found = sorted(p.name for p in path.parent.iterdir() if p.is_file()) if path.parent.is_dir() else []
        raise DataError(f"expected the file {path}, which does not exist (found: {found or 'nothing'})")
    raw = path.read_bytes()
    line_numbers = _jsonl_lines(path, raw) if loader == "json" else []
    if loader == "json" and not line_numbers:
        raise DataError(f"{path} holds no rows: it is empty or blank. Expected one JSON object per line.")
    _offline_flags()
    import datasets

    # The rows are checked here, row by row; datasets' "Generating train split" bar is noise.
    datasets.disable_progress_bars()
    options = _csv_options(path, raw) if loader == "csv" else {}
    try:
        table = datasets.load_dataset(loader, data_files=str(path), split="train", **options)
    except Exception as exc:  # pyarrow and pandas raise many types, e.g. for a field typed differently by row
        raise DataError(f"datasets cannot read {path} as {loader}: {exc}. Give every field the same type on "
                        "every row (and, for CSV, the same number of cells as the header).") from exc
    rows: list[dict[str, Any]] = table.to_list()
    if loader == "json":
        if len(rows) != len(line_numbers):
            raise DataError(f"{path}: datasets read {len(rows)} rows from {len(line_numbers)} non-blank lines")

        def where(i: int) -> str:
            return f"{path}:{line_numbers[i]}"
    else:
        if not rows:
            raise DataError(f"{path} holds no rows: expected a header and one row per question.")

        def where(i: int) -> str:
            return f"{path}, data row {i + 1}"
    version = f"sha256:{hashlib.sha256(raw).hexdigest()}"
    return Rows(rows, where, version, str(path), source_id, tuple(table.column_names))


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


def read_hub(spec: DatasetConfig) -> Rows:
    """Load a split from the Hub pinned to the repository's current revision."""
    if spec.hub is None:
        raise DataError(f"dataset {spec.name!r} has no source: set dataset.path=FILE (JSONL, CSV or Parquet), "
                        "dataset.data_dir=DIR (holding <name>/<split>.jsonl) or dataset.hub=<Hub dataset id>.")
    where_text = f"{spec.hub} ({spec.hub_config or 'default'}) split {spec.split!r}"
    flags = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    offline = any(os.environ.get(k, "").lower() in ("1", "true", "yes", "on") for k in flags)
    if offline or not _hub_reachable():
        reason = "offline mode is set (HF_HUB_OFFLINE)" if offline else "the Hugging Face Hub is unreachable"
        raise DataError(f"cannot load {where_text}: {reason} and no data directory was given. {_OFFLINE_HINT}")
    import datasets
    from huggingface_hub import HfApi

    try:
        revision = HfApi().dataset_info(spec.hub).sha
        table = datasets.load_dataset(spec.hub, spec.hub_config, split=spec.split, revision=revision)
    except Exception as exc:  # datasets raises many types; the caller needs one, with the cause kept
        raise DataError(f"cannot load {where_text} from the Hub: {exc}. {_OFFLINE_HINT}") from exc
    version = f"{spec.hub}@{revision or 'fingerprint:' + str(table._fingerprint)}"
    rows: list[dict[str, Any]] = table.to_list()
    columns = tuple(getattr(table, "column_names", None) or (rows[0] if rows else ()))

    def where(i: int) -> str:
        return f"{where_text} row {i}"

    return Rows(rows, where, version, spec.hub, f"hub:{spec.hub}:{spec.hub_config or ''}", columns)
