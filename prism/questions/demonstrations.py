"""Few-shot demonstrations: the pool a dataset names, one seeded draw per question, frozen beside the question set.

``dataset.demonstrations`` names the pool (:class:`prism.config.DemonstrationsConfig`): other splits of the
dataset's own source in order of preference (ARC: ``train``; SciQ: ``validation``; MMLU: the subject's ``dev``
items, then its ``validation`` items), or one local file, read through the dataset's mapping and rules unless it
gives its own ``fields``. A split the data at hand does not have is refused before anything is asked, naming
the file to provide.

Each frozen question gets one seeded draw (:func:`draw`): the pool's items that have the question's option
count (so each is shown under exactly the question's labels), its group when ``same_group`` is set, and are
none of the run's frozen questions (by id and by normalised text), ranked by sha256 of the sample seed, the
question id and the item id, split by split in the configured order, the first ``need`` kept. Every few-shot
condition takes its demonstrations from that draw (``shots_k`` its first ``k``), so the levels nest.

The draw is frozen as ``<frozen set stem>.demos<need>-<12 hex>.jsonl`` beside the frozen set: one line per
question (its id and its demonstrations, each written as a frozen question), verified against a rebuild on
every use like the frozen set itself (a changed file or pool is an error, never a silent rebuild), and logged
with the run as ``questions/demonstrations.jsonl``, so a reproduction asks the same prompts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from prism.config import DatasetConfig, DatasetFields, DemonstrationsConfig
from prism.questions.load import load_questions
from prism.questions.sources import data_dir_file
from prism.questions.spec import DataError
from prism.types import Question, canonical_json

#: Bumped whenever the draw could pick other demonstrations for the same inputs; part of the file's digest.
DRAW_VERSION = "1"

#: The split name recorded with demonstrations read from ``dataset.demonstrations.path``.
FILE_SPLIT = "demonstrations"


@dataclass(frozen=True)
class DemonstrationDraw:
    """Every frozen question's demonstrations, as frozen on disk.

    Attributes:
        by_question: Question id -> its demonstrations in draw order (``need`` of them).
        sha256: Hex sha256 of the frozen draw file's bytes.
        path: Where the frozen draw lives.
        need: How many demonstrations each question has.
        pool_size: How many items the pool held (every split, before the per-question filters).
        splits: The pool's splits in order (``demonstrations`` for a file).
    """

    by_question: Mapping[str, tuple[Question, ...]]
    sha256: str
    path: Path
    need: int
    pool_size: int
    splits: tuple[str, ...]


def normalised(text: str) -> str:
    """A question's text for the overlap check: case folded, runs of white space one space, edges trimmed."""
    return " ".join(text.casefold().split())


def pool_specs(spec: DatasetConfig, demo: DemonstrationsConfig) -> list[DatasetConfig]:
    """The spec of each part of the pool: the dataset's own source and mapping at another split, or one file.

    The sample's own selection (``subjects``, ``stratify``, ``exclude``) does not apply to the pool.

    Raises:
        DataError: The dataset names no pool, or its ``fields`` cannot be used.
    """
    base = replace(spec, subjects=[], stratify=None, exclude=[])
    if demo.fields is not None:
        base = replace(base, fields=_field_map(demo.fields))
    if demo.path:
        specs = [replace(base, path=str(demo.path), format=None, split=FILE_SPLIT)]
    elif demo.splits:
        specs = [replace(base, split=str(split)) for split in demo.splits]
    else:
        raise DataError(f"the condition set shows few-shot demonstrations, but dataset {spec.name!r} names no pool to "
                        "draw them from: set dataset.demonstrations.splits=[SPLIT] (another split of the same source, "
                        "e.g. train) or dataset.demonstrations.path=FILE (JSONL, CSV or Parquet, mapped like the "
                        "dataset unless dataset.demonstrations.fields says otherwise). No model was asked anything.")
    for part in specs:
        part.check()
    return specs


def _field_map(fields: DatasetFields | Mapping[str, Any]) -> DatasetFields:
    """The pool's own mapping: the schema's, or one written in code (a part it does not name is unmapped)."""
    if isinstance(fields, DatasetFields):
        return fields
    raw = dict(fields)
    return DatasetFields(id=raw.get("id"), question=str(raw.get("question") or ""), options=raw.get("options") or "",
                         answer=raw.get("answer"), group=raw.get("group"))


def _missing_split(spec: DatasetConfig, splits: Sequence[str], why: str) -> None:
    """Refuse a pool split the data directory does not hold, naming the file to provide."""
    path = data_dir_file(spec)
    if path is not None and not path.is_file():
        raise DataError(
            f"{why} need few-shot demonstrations from split {spec.split!r} of {spec.name} "
            f"(dataset.demonstrations.splits={list(splits)}), but the data at hand has no such split: {path} does not "
            f"exist. Provide {path} (one JSON object per line, in the schema of the dataset's other splits), point "
            "dataset.demonstrations.path at a file of demonstrations, or use a condition set without demonstrations. "
            "No model was asked anything."
        )


def load_pool(spec: DatasetConfig, demo: DemonstrationsConfig, seed: int,
              why: str = "the few-shot conditions") -> list[tuple[str, tuple[Question, ...], str]]:
    """Load every part of the pool: (split, its eligible questions in source order, its source version).

    Raises:
        DataError: A split the data at hand lacks (naming the file to provide), items without a key, or bad
            data in a row (as for the dataset itself).
    """
    if spec.keyless:
        raise DataError(f"{why} show each demonstration answered with its key, but dataset {spec.name!r} has items "
                        "without an answer key (dataset.answer_format=none / dataset.type=subjective), so it has "
                        "no demonstrations to show. Use a condition set without demonstrations for survey items. "
                        "No model was asked anything.")
    parts = []
    specs = pool_specs(spec, demo)
    for part in specs:
        _missing_split(part, list(demo.splits), why)
        try:
            loaded = load_questions(part, seed=seed)
        except DataError as exc:
            raise DataError(f"{why}: the demonstrations' pool (split {part.split!r} of {part.name}) cannot be read: "
                            f"{exc}") from exc
        keyless = [q.question_id for q in loaded.questions if q.answer is None]
        if keyless:
            raise DataError(f"{why}: {len(keyless)} item(s) of the demonstrations' pool (split {part.split!r}, e.g. "
                            f"{keyless[0]!r}) have no answer key, and a demonstration is shown answered. Map the "
                            "pool's answer column with dataset.demonstrations.fields.answer. No model was asked "
                            "anything.")
        parts.append((loaded.split, loaded.questions, loaded.dataset_version))
    return parts


def _rank(seed: int, question_id: str, item_id: str) -> str:
    return hashlib.sha256(f"{seed}|demonstrations|{question_id}|{item_id}".encode()).hexdigest()


def draw(questions: Sequence[Question], pool: Sequence[tuple[str, Sequence[Question]]], need: int, seed: int,
         same_group: bool = False, why: str = "the few-shot conditions") -> dict[str, tuple[Question, ...]]:
    """Each question's ``need`` demonstrations: the eligible pool items in seeded order, split by split.

    An item is eligible for a question when it has the question's option count, its group (with
    ``same_group``), and is none of ``questions`` (by id, or by normalised question text); an item that
    repeats one already drawn (same id or text) is skipped.

    Raises:
        DataError: A question has fewer than ``need`` eligible items (the message gives the counts), or
            ``same_group`` is set for questions without a group.
    """
    frozen_ids = {q.question_id for q in questions}
    frozen_texts = {normalised(q.question) for q in questions}
    if same_group and any(q.group is None for q in questions):
        raise DataError(f"{why}: dataset.demonstrations.same_group=true draws from the question's own group, but "
                        "the frozen questions have no group (dataset.fields.group); set same_group=false.")
    by_question: dict[str, tuple[Question, ...]] = {}
    short: list[str] = []
    for question in questions:
        chosen: list[Question] = []
        seen_ids: set[str] = set()
        seen_texts: set[str] = set()
        counts = {"pool": 0, "group": 0, "options": 0, "frozen": 0, "repeated": 0}
        for _split, items in pool:
            ranked = sorted(items, key=lambda item: _rank(seed, question.question_id, item.question_id))
            for item in ranked:
                counts["pool"] += 1
                text = normalised(item.question)
                if same_group and item.group != question.group:
                    counts["group"] += 1
                elif len(item.options) != len(question.options):
                    counts["options"] += 1
                elif item.question_id in frozen_ids or text in frozen_texts:
                    counts["frozen"] += 1
                elif item.question_id in seen_ids or text in seen_texts:
                    counts["repeated"] += 1
                elif len(chosen) < need:
                    chosen.append(item)
                    seen_ids.add(item.question_id)
                    seen_texts.add(text)
        if len(chosen) < need:
            short.append(f"question {question.question_id!r}{f' ({question.group})' if question.group else ''} has "
                         f"{len(chosen)} (of a pool of {counts['pool']}: {counts['group']} of another group, "
                         f"{counts['options']} with another option count, {counts['frozen']} frozen questions of "
                         f"this run by id or text, {counts['repeated']} repeats)")
        by_question[question.question_id] = tuple(chosen)
    if short:
        raise DataError(f"{why} need {need} demonstrations per question, but {len(short)} of {len(questions)} "
                        f"question(s) have fewer eligible ones: {'; '.join(short[:3])}"
                        f"{'; ...' if len(short) > 3 else ''}. Add items to the pool (dataset.demonstrations), "
                        "leave those questions out, or use fewer shots. No model was asked anything.")
    return by_question


def draw_bytes(questions: Sequence[Question], by_question: Mapping[str, Sequence[Question]]) -> bytes:
    """The frozen draw: per question in frozen order, ``{"question_id", "demonstrations": [...]}``, canonical."""
    lines = [canonical_json({"question_id": q.question_id,
                             "demonstrations": [d.to_dict() for d in by_question[q.question_id]]})
             for q in questions]
    return "".join(line + "\n" for line in lines).encode("utf-8")


def read_draw(path: str | os.PathLike[str]) -> dict[str, tuple[Question, ...]]:
    """Read a frozen draw file (``questions/demonstrations.jsonl``) back: question id -> demonstrations.

    Raises:
        DataError: A line that is not a frozen draw's, naming the file and line.
    """
    found: dict[str, tuple[Question, ...]] = {}
    lines = Path(path).read_bytes().split(b"\n")
    for number, line in enumerate(lines[:-1] if lines[-1] == b"" else lines, start=1):
        try:
            record = json.loads(line.decode("utf-8"))
            found[str(record["question_id"])] = tuple(Question.from_dict(d) for d in record["demonstrations"])
        except (ValueError, KeyError, TypeError) as exc:
            raise DataError(f"malformed demonstrations line at {path}:{number}: {exc!r}") from exc
    return found


def freeze_demonstrations(spec: DatasetConfig, demo: DemonstrationsConfig, questions: Sequence[Question],
                          frozen_path: Path, seed: int, need: int,
                          why: str = "the few-shot conditions") -> DemonstrationDraw:
    """Draw (or verify the frozen draw of) ``need`` demonstrations per question, beside the frozen set.

    Args:
        spec: The dataset's spec (its source and mapping; the pool is read from it).
        demo: ``dataset.demonstrations``.
        questions: The frozen questions, in frozen order.
        frozen_path: The frozen set's file; the draw is written beside it.
        seed: The sample seed (the draw is frozen with the question set).
        need: Demonstrations per question (the most any condition of the set shows, offsets included).
        why: Who needs them, for messages (the condition set and its conditions).

    Raises:
        DataError: The pool cannot be read or is too small, or the frozen draw on disk differs from the rebuild.
    """
    pool = load_pool(spec, demo, seed, why)
    by_question = draw(questions, [(split, items) for split, items, _ in pool], need, seed, demo.same_group, why)
    data = draw_bytes(questions, by_question)
    digest = hashlib.sha256(data).hexdigest()
    identity = canonical_json({"version": DRAW_VERSION, "need": need, "same_group": bool(demo.same_group),
                               # The splits, not their versions: a changed pool keeps the name, so it is caught.
                               "pool": [split for split, _, _ in pool],
                               "fields": dataclasses.asdict(pool_specs(spec, demo)[0].fields)})
    name_digest = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:12]
    path = frozen_path.with_name(f"{frozen_path.stem}.demos{need}-{name_digest}.jsonl")
    if path.exists():
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
        if actual != digest:
            raise DataError(f"the frozen demonstrations {path} have sha256 {actual}, but drawing them again gives "
                            f"{digest}: the file or the way demonstrations are drawn changed. Delete {path} to draw "
                            "them again (runs logged with the old draw keep it as questions/demonstrations.jsonl).")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    return DemonstrationDraw(by_question, digest, path, need, sum(len(items) for _, items, _ in pool),
                             tuple(split for split, _, _ in pool))


def attach(questions: Sequence[Question], by_question: Mapping[str, tuple[Question, ...]]) -> tuple[Question, ...]:
    """The questions, each carrying its demonstrations (:attr:`prism.types.Question.demonstrations`)."""
    return tuple(replace(q, demonstrations=tuple(by_question.get(q.question_id, ()))) for q in questions)
