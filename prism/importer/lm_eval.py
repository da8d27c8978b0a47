"""lm-evaluation-harness sample logs (``--log_samples``: ``samples_<task>_<time>.jsonl``) as :class:`SourceCell`s.

Each line is one doc under one filter: ``doc``, ``arguments`` (per request, the context and either the
generation kwargs (``generate_until``) or the continuation (``loglikelihood``)), ``resps`` (per request its
responses), ``filtered_resps`` (after the task's filter), ``target``, ``doc_hash``, ``prompt_hash`` and the
sample's metrics. A generative line gives one cell per repeat, its response the raw text and the source's
answer the filtered one; a log-likelihood line gives one cell whose options' log-likelihoods become
``cloze_logprobs`` per canonical label, unchanged. A chat model's context is the JSON list of its messages.
Read facts of the format: lm-eval 0.4 (``arguments`` as ``{"gen_args_<i>": {"arg_0", "arg_1"}}``, or the
older list of pairs).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prism.importer.cells import SourceCell, canonical_answer, displayed, question_of
from prism.importer.mapping import DocMapping, ImportLogError, mapping_for, read_doc
from prism.types import Turn

log = logging.getLogger(__name__)

TOOL = "lm_eval"
REQUIRED = ("doc", "arguments", "resps", "filtered_resps")
_NAME = re.compile(r"^samples_(?P<task>.+?)(?:_\d{4}-\d{2}-\d{2}T[\d.\-]+)?$")


@dataclass(frozen=True)
class LmEvalLog:
    """What one sample log held: its task, the cells, the filter read, and the tool's facts beside it."""

    task: str
    cells: tuple[SourceCell, ...]
    kind: str  # "generate_until" or "loglikelihood"
    filter: str | None
    mapping: str
    version: str
    generation: dict[str, Any]
    model: str | None


def task_name(path: Path, given: str | None) -> str:
    """The task: ``given``, else from the file name ``samples_<task>_<time>.jsonl``, else the file's stem."""
    if given:
        return given
    match = _NAME.match(path.stem)
    return match.group("task") if match else path.stem


def results_beside(path: Path) -> dict[str, Any]:
    """The run's ``results_*.json`` lm-eval wrote beside the samples (its version, model), or ``{}``."""
    candidates = sorted(path.parent.glob("results_*.json")) + sorted(path.parent.glob(f"{path.stem}.results.json"))
    for candidate in reversed(candidates):
        try:
            data = json.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            return data
    return {}


def _requests(arguments: Any, where: str) -> list[tuple[Any, Any]]:
    """``arguments`` as (context, second argument) pairs, either layout lm-eval has written."""
    if isinstance(arguments, dict):
        pairs = [arguments[k] for k in sorted(arguments, key=lambda k: int(k.rsplit("_", 1)[-1])
                                              if k.rsplit("_", 1)[-1].isdigit() else 0)]
        out = [(p.get("arg_0"), p.get("arg_1")) for p in pairs if isinstance(p, dict)]
    elif isinstance(arguments, list):
        out = [(p[0], p[1] if len(p) > 1 else None) for p in arguments if isinstance(p, list | tuple) and p]
    else:
        out = []
    # A chat model's context is written as a one-element list holding the JSON of its messages.
    out = [(ctx[0] if isinstance(ctx, list) and len(ctx) == 1 else ctx, second) for ctx, second in out]
    if not out or any(not isinstance(ctx, str) for ctx, _ in out):
        raise ImportLogError(f"{where}: 'arguments' is not lm-eval's list of (context, ...) requests; this is not a "
                             "sample log of a version PRISM reads (lm-eval 0.4, --log_samples).")
    return out


def _turns(context: str) -> tuple[tuple[Turn, ...], str]:
    """A context as (earlier turns, last user turn): a chat model's JSON messages, else the text itself."""
    if context.startswith("[{"):
        try:
            messages = json.loads(context)
        except ValueError:
            return (), context
        if (isinstance(messages, list) and messages and all(isinstance(m, dict) and isinstance(m.get("content"), str)
                                                            and m.get("role") in ("system", "user", "assistant")
                                                            for m in messages) and messages[-1]["role"] == "user"):
            return tuple(Turn(m["role"], m["content"]) for m in messages[:-1]), messages[-1]["content"]
    return (), context


def _generation(kwargs: Any, seed: Any) -> dict[str, Any]:
    """lm-eval's generation kwargs as PRISM's canonical parameters (unknown ones null)."""
    kw = kwargs if isinstance(kwargs, dict) else {}
    greedy = not kw.get("do_sample", False)
    temperature = kw.get("temperature", 0.0 if greedy else None)
    return {"temperature": float(temperature) if isinstance(temperature, int | float) else None,
            "max_tokens": kw.get("max_gen_toks"), "seed": seed if isinstance(seed, int) else None,
            "top_p": kw.get("top_p"), "top_k": kw.get("top_k")}


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every non-blank line as a JSON object, numbered; a bad one (a truncated last line) is an error."""
    if not path.is_file():
        raise ImportLogError(f"{path} does not exist; pass an lm-eval sample log (samples_<task>_<time>.jsonl, "
                             "written by lm_eval --log_samples) as path=FILE.")
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as exc:
                ending = "" if raw.endswith(b"\n") else " (the line has no end: the file looks truncated)"
                raise ImportLogError(f"{where} is not a JSON object{ending} ({exc}); an lm-eval sample log has "
                                     "one JSON object per line. Re-copy the whole file, or remove the broken "
                                     "line.") from exc
            if not isinstance(record, dict) or any(k not in record for k in REQUIRED):
                have = ", ".join(record) if isinstance(record, dict) else type(record).__name__
                raise ImportLogError(f"{where} is not an lm-evaluation-harness sample line (it needs "
                                     f"{', '.join(REQUIRED)}; it has {have}); pass a samples_<task>_<time>.jsonl file "
                                     "written by lm_eval --log_samples, or format=inspect for an inspect_ai log.")
            yield number, record


def read_lm_eval(path: Path, *, task: str | None = None, mapping: str | None = None, dataset: str | None = None,
                 split: str = "test", filter_name: str | None = None) -> LmEvalLog:
    """Read a whole sample log into cells, checking every line first.

    Args:
        path: The ``samples_<task>_<time>.jsonl`` file.
        task: The task's name when the file's name does not say it.
        mapping: A shipped mapping's name or a YAML file; None picks one by task name, then by doc fields.
        dataset: The frozen questions' dataset name (default: the mapping's).
        split: Their split.
        filter_name: Which of the task's filters to read (lm-eval writes a line per doc and filter); default
            the first in the file.

    Raises:
        ImportLogError: Naming the file and line of anything that cannot be read, with the fix.
    """
    name = task_name(path, task)
    results = results_beside(path)
    seed = (results.get("config") or {}).get("random_seed") if isinstance(results.get("config"), dict) else None
    cells: list[SourceCell] = []
    chosen: DocMapping | None = None
    kind: str | None = None
    first_filter: str | None = filter_name
    generation: dict[str, Any] = {}
    skipped: set[str] = set()
    seen: dict[str, int] = {}
    for number, record in _lines(path):
        where = f"{path}:{number}"
        line_filter = record.get("filter")
        if first_filter is None:
            first_filter = line_filter
        if line_filter != first_filter:
            skipped.add(str(line_filter))
            continue
        doc = record["doc"]
        if not isinstance(doc, dict):
            raise ImportLogError(f"{where}: 'doc' is not an object, so it carries no question or options; PRISM "
                                 "imports multiple-choice tasks whose docs hold them.")
        if chosen is None:
            chosen = mapping_for(name, doc, mapping, where)
        item = read_doc(chosen, doc, where)
        question = question_of(dataset or chosen.name, split, item.id, item.question, item.options,
                               item.answer_index, item.group)
        requests = _requests(record["arguments"], where)
        line_kind = "generate_until" if all(isinstance(b, dict) or b is None for _, b in requests) else "loglikelihood"
        if kind is None:
            kind = line_kind
        elif kind != line_kind:
            raise ImportLogError(f"{where} is a {line_kind} sample, earlier lines were {kind}; one log is one task.")
        earlier, text = _turns(requests[0][0])
        shown, canonical, options = displayed(text, question.options, item.labels, question.labels)
        metrics = {k: float(v) for k, v in record.items() if k not in REQUIRED and isinstance(v, int | float)
                   and not isinstance(v, bool) and k not in ("doc_id",)}
        if kind == "generate_until":
            generation = generation or _generation(requests[0][1], seed)
            cells.extend(_generated(record, where, question, shown, canonical, options, earlier, text, metrics))
        else:
            cells.append(_cloze(record, where, requests, question, shown, canonical, options, earlier, text, metrics))
        if question.question_id in seen:
            raise ImportLogError(f"{where} asks question {question.question_id!r} again (first at line "
                                 f"{seen[question.question_id]}); each doc once per filter. Pass filter=NAME if the "
                                 "log mixes filters under one name.")
        seen[question.question_id] = number
    if not cells or chosen is None or kind is None:
        raise ImportLogError(f"{path} holds no samples{' of filter ' + repr(filter_name) if filter_name else ''}; "
                             "pass a non-empty lm-eval sample log.")
    if skipped:
        log.info("%s: read filter %r; lines of the other filters (%s) were left out (filter=NAME reads one of them)",
                 path, first_filter, ", ".join(sorted(skipped)))
    version = str(results.get("lm_eval_version") or (results.get("config") or {}).get("lm_eval_version")
                  or "unknown")
    model = results.get("model_name") if isinstance(results.get("model_name"), str) else None
    return LmEvalLog(name, tuple(cells), kind, first_filter, chosen.name, version, generation, model)


def _generated(record: Mapping[str, Any], where: str, question: Any, shown: tuple[str, ...],
               canonical: tuple[str, ...], options: tuple[str, ...], earlier: tuple[Turn, ...], text: str,
               metrics: dict[str, float]) -> Iterator[SourceCell]:
    """A generate_until line's cells: one per repeat."""
    resps = record["resps"]
    if not (isinstance(resps, list) and resps and isinstance(resps[0], list)
            and all(isinstance(r, str) for r in resps[0])):
        raise ImportLogError(f"{where}: 'resps' is not lm-eval's [[response, ...]] of a generate_until sample.")
    filtered = record["filtered_resps"]
    for repetition, response in enumerate(resps[0]):
        extracted = filtered[repetition] if isinstance(filtered, list) and len(filtered) > repetition else ""
        if isinstance(extracted, list):  # a filter that kept every repeat
            extracted = extracted[0] if extracted else ""
        yield SourceCell(where=where, question=question, displayed_labels=shown, canonical_labels=canonical,
                         displayed_options=options, text=text, earlier_turns=earlier, repetition=repetition,
                         response=response, source_answer=canonical_answer(extracted, shown, canonical),
                         source_extracted=str(extracted), source_metrics=metrics)


def _number(value: Any, where: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ImportLogError(f"{where}: a log-likelihood {value!r} is not a number; the line is damaged.") from None


def _cloze(record: Mapping[str, Any], where: str, requests: list[tuple[Any, Any]], question: Any,
           shown: tuple[str, ...], canonical: tuple[str, ...], options: tuple[str, ...], earlier: tuple[Turn, ...],
           text: str, metrics: dict[str, float]) -> SourceCell:
    """A loglikelihood line's one cell: every option's log-likelihood per canonical label, unchanged."""
    resps = record["resps"]
    if not isinstance(resps, list) or len(resps) != len(question.options) or len(requests) != len(question.options):
        raise ImportLogError(f"{where}: {len(requests)} log-likelihood requests for {len(question.options)} options "
                             "of the doc; the mapping's options must be the task's choices (pass mapping=FILE.yaml).")
    values = []
    for resp in resps:
        first = resp[0] if isinstance(resp, list) and resp else resp
        values.append(_number(first[0] if isinstance(first, list) else first, where))
    logprobs = dict(zip(question.labels, values, strict=True))
    best = max(range(len(values)), key=lambda i: (values[i], -i))  # lm-eval's argmax: the first of a tie
    return SourceCell(where=where, question=question, displayed_labels=shown, canonical_labels=canonical,
                      displayed_options=options, text=text, earlier_turns=earlier,
                      source_answer=question.labels[best], source_extracted=str(best),
                      cloze_logprobs=logprobs, cloze_chars={label: len(option) for label, option
                                                            in zip(question.labels, question.options, strict=True)},
                      source_metrics=metrics)
