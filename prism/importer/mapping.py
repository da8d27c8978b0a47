"""From a source log's ``doc`` to a question's parts: shipped mappings, a custom one, or recognition by fields.

A mapping names the doc fields of the stem, the options (one list field, a dotted path such as
``choices.text``, or a list of fields), the labels the dataset gives its options (optional), the answer
and its format (``label``: one of the labels; ``index``: 0-based; ``text``: the option's text), and
optionally the id and group. Shipped mappings are YAML files in ``prism/importer/mappings/`` (data, no
code); ``mapping=FILE.yaml`` names a custom one of the same shape. Without one, the task's name picks a
shipped mapping, else the doc's fields do (offline logs come from local task copies with other names).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import yaml

from prism.errors import PrismError

MAPPINGS_DIR = Path(__file__).with_name("mappings")
ANSWER_FORMATS = ("label", "index", "text")


class ImportLogError(PrismError, ValueError):
    """A source log, or a mapping, that cannot be imported; the message names file, line and fix."""


@dataclass(frozen=True)
class DocMapping:
    """Which doc fields hold a question's parts (see the module docstring)."""

    name: str
    question: str
    options: str | tuple[str, ...]
    answer: str
    answer_format: Literal["label", "index", "text"]
    labels: str | None = None
    id: str | None = None
    group: str | None = None
    tasks: tuple[str, ...] = ()
    task_prefix: str | None = None


@dataclass(frozen=True)
class DocItem:
    """A doc read through a mapping: its stem, options in doc order, their own labels, the key's index."""

    question: str
    options: tuple[str, ...]
    labels: tuple[str, ...] | None
    answer_index: int
    id: str | None
    group: str | None


def shipped_names() -> list[str]:
    """The shipped mappings' names."""
    return sorted(p.stem for p in MAPPINGS_DIR.glob("*.yaml"))


def load_mapping(name: str) -> DocMapping:
    """A shipped mapping by name, or a custom one from a YAML file.

    Raises:
        ImportLogError: If neither exists or the file is not a mapping of the documented shape.
    """
    path = MAPPINGS_DIR / f"{name}.yaml"
    if not path.is_file():
        path = Path(name).expanduser()
        if not (name.endswith((".yaml", ".yml")) and path.is_file()):
            raise ImportLogError(f"mapping={name!r} is neither a shipped mapping ({', '.join(shipped_names())}) nor a "
                               "YAML file; name one of those, or write a YAML file with question, options, answer and "
                               "answer_format (prism/importer/mappings/arc_challenge.yaml is an example).")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ImportLogError(f"mapping file {path} is not valid YAML ({exc}); fix it.") from exc
    return mapping_from_dict(data, path.stem, str(path))


def mapping_from_dict(data: Any, name: str, where: str) -> DocMapping:
    """A mapping from its YAML data, checked.

    Raises:
        ImportLogError: Naming ``where`` and the field that is missing or wrong.
    """
    if not isinstance(data, dict):
        raise ImportLogError(f"{where} must be a mapping with question, options, answer and answer_format.")
    missing = [k for k in ("question", "options", "answer", "answer_format") if not data.get(k)]
    if missing:
        raise ImportLogError(f"{where} lacks {', '.join(missing)}; a mapping names the doc fields of the question, the "
                           "options, the answer and the answer's format (label, index or text).")
    if data["answer_format"] not in ANSWER_FORMATS:
        raise ImportLogError(f"{where}: answer_format {data['answer_format']!r} is not one of "
                             f"{', '.join(ANSWER_FORMATS)}.")
    unknown = sorted(set(data) - {"question", "options", "answer", "answer_format", "labels", "id", "group", "tasks",
                                  "task_prefix"})
    if unknown:
        raise ImportLogError(f"{where} has unknown keys {unknown}; a mapping has question, options, answer, "
                           "answer_format, labels, id, group, tasks and task_prefix.")
    options = data["options"]
    return DocMapping(
        name=name, question=str(data["question"]),
        options=tuple(str(o) for o in options) if isinstance(options, list) else str(options),
        answer=str(data["answer"]), answer_format=cast(Literal["label", "index", "text"], data["answer_format"]),
        labels=data.get("labels"), id=data.get("id"), group=data.get("group"),
        tasks=tuple(data.get("tasks") or ()), task_prefix=data.get("task_prefix"),
    )


def _get(doc: Mapping[str, Any], path: str) -> Any:
    """A doc's value at a dotted path, or KeyError."""
    value: Any = doc
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise KeyError(path)
        value = value[part]
    return value


def _has(doc: Mapping[str, Any], *paths: str) -> bool:
    try:
        for path in paths:
            _get(doc, path)
    except KeyError:
        return False
    return True


def recognise(doc: Mapping[str, Any]) -> str | None:
    """The shipped mapping whose fields a doc has (ARC's, OpenBookQA's, MMLU's, SciQ's shape), or None."""
    if _has(doc, "choices.text", "choices.label", "answerKey"):
        return "openbookqa" if "question_stem" in doc and "question" not in doc else "arc_challenge"
    if _has(doc, "question", "choices", "answer") and isinstance(doc["choices"], list):
        return "mmlu"
    if _has(doc, "question", "distractor1", "distractor2", "distractor3", "correct_answer"):
        return "sciq"
    return None


def mapping_for(task: str, doc: Mapping[str, Any], chosen: str | None, where: str) -> DocMapping:
    """The mapping for a task's docs: ``chosen`` when given, else by the task's name, else by the doc's fields.

    Raises:
        ImportLogError: Naming ``where`` (the first sample) when none applies, with the fix.
    """
    if chosen:
        return load_mapping(chosen)
    for name in shipped_names():
        mapping = load_mapping(name)
        if task in mapping.tasks or (mapping.task_prefix and task.startswith(mapping.task_prefix)):
            return mapping
    recognised = recognise(doc)
    if recognised is None:
        raise ImportLogError(f"{where}: task {task!r} has no shipped mapping and its doc's fields "
                             f"({', '.join(doc)}) are not ARC's, MMLU's, SciQ's or OpenBookQA's; pass "
                             "mapping=FILE.yaml naming the doc fields of question, options, answer and answer_format "
                             "(see docs/guide/importing.md).")
    return load_mapping(recognised)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def read_doc(mapping: DocMapping, doc: Mapping[str, Any], where: str) -> DocItem:
    """A doc's question parts through ``mapping``.

    Raises:
        ImportLogError: Naming ``where``, the field and the fix: a missing field, fewer than two options, an
            answer that is none of them.
    """
    def field_(path: str) -> Any:
        try:
            return _get(doc, path)
        except KeyError:
            raise ImportLogError(f"{where}: the doc has no field {path!r} (mapping {mapping.name!r}; the doc has "
                               f"{', '.join(doc)}); pass mapping=FILE.yaml naming this task's fields.") from None

    question = _text(field_(mapping.question))
    if question is None:
        raise ImportLogError(f"{where}: the doc's {mapping.question!r} is empty; a question needs a stem.")
    raw_options: Any = ([field_(p) for p in mapping.options] if isinstance(mapping.options, tuple)
                        else field_(mapping.options))
    if not isinstance(raw_options, Sequence) or isinstance(raw_options, str):
        raise ImportLogError(f"{where}: the doc's options ({mapping.options!r}) are not a list; this doc carries no "
                           "options, so it is no multiple-choice question. Pass mapping=FILE.yaml naming its options.")
    options = tuple(_text(o) for o in raw_options)
    if len(options) < 2 or any(o is None for o in options):
        raise ImportLogError(f"{where}: the doc's options ({mapping.options!r}) must be at least two non-empty texts, "
                           f"not {list(raw_options)!r}.")
    texts = cast(tuple[str, ...], options)
    labels = tuple(str(label) for label in field_(mapping.labels)) if mapping.labels else None
    if labels is not None and len(labels) != len(texts):
        raise ImportLogError(f"{where}: {len(labels)} labels for {len(texts)} options; fix the doc or the mapping.")
    answer = field_(mapping.answer)
    index: int | None = None
    if mapping.answer_format == "index":
        index = answer if isinstance(answer, int) and not isinstance(answer, bool) else (
            int(answer) if isinstance(answer, str) and answer.strip().isdigit() else None)
    elif mapping.answer_format == "label":
        index = labels.index(str(answer).strip()) if labels and str(answer).strip() in labels else None
    else:
        index = texts.index(_text(answer) or "") if _text(answer) in texts else None
    if index is None or not 0 <= index < len(texts):
        raise ImportLogError(f"{where}: the answer {answer!r} ({mapping.answer!r}, answer_format "
                           f"{mapping.answer_format}) is none of the {len(texts)} options; fix the doc or the mapping.")
    return DocItem(question, texts, labels, index,
                   _text(field_(mapping.id)) if mapping.id else None,
                   _text(field_(mapping.group)) if mapping.group else None)
