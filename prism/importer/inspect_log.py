"""inspect_ai eval logs (``.eval`` or ``.json``) as :class:`SourceCell`s, read with inspect_ai's own reader.

inspect_ai is an optional extra (``pip install -e '.[inspect]'``), imported only here and only when a log is
read. A ``multiple_choice`` sample gives its input (the stem), choices, target (a letter), the messages
sent (the user turn inspect's template rendered, any system turn before it), the model's output and, per
scorer, the answer the scorer extracted (``choice``: ``ANSWER: X``; empty when it found none). Epochs are
repetitions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prism.importer.cells import SourceCell, canonical_answer, displayed, question_of
from prism.importer.mapping import ImportLogError
from prism.types import Turn

TOOL = "inspect_ai"
# inspect's stop reasons in PRISM's (the OpenAI-style) finish reasons; others are kept as inspect says them.
_STOP = {"stop": "stop", "max_tokens": "length", "model_length": "length"}


@dataclass(frozen=True)
class InspectLog:
    """What one eval log held: its task, the cells, the scorer read, the tool's facts."""

    task: str
    cells: tuple[SourceCell, ...]
    scorer: str
    version: str
    generation: dict[str, Any]
    model: str | None
    dataset_name: str | None


def _reader() -> Any:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError as exc:
        raise ImportLogError("format=inspect reads logs with inspect_ai's own log reader, which is not installed; "
                             "install the extra: pip install -e '.[inspect]' (or pip install inspect-ai).") from exc
    return read_eval_log


def _text(content: Any) -> str:
    """A message's content as text (inspect keeps either a string or a list of content parts)."""
    if isinstance(content, str):
        return content
    return "".join(str(getattr(part, "text", "")) for part in content or [])


def read_inspect(path: Path, *, dataset: str | None = None, split: str = "test",
                 scorer: str | None = None) -> InspectLog:
    """Read a whole eval log into cells.

    Raises:
        ImportLogError: Naming the file (and sample) of anything that cannot be read, with the fix: not an
            inspect log, an unfinished eval, a sample without choices (not a multiple_choice task).
    """
    if not path.is_file():
        raise ImportLogError(f"{path} does not exist; pass an inspect_ai eval log (.eval or .json, in inspect's "
                             "log directory) as path=FILE.")
    read_eval_log = _reader()
    try:
        log = read_eval_log(str(path))
    except Exception as exc:  # inspect's reader raises zip, JSON and validation errors of every kind
        raise ImportLogError(f"{path} could not be read by inspect_ai's log reader ({type(exc).__name__}: "
                             f"{str(exc)[:300]}); it is not an inspect_ai eval log, or it is truncated. Pass a "
                             "complete .eval or .json log, or format=lm_eval for an lm-eval sample log.") from exc
    if log.status != "success":
        raise ImportLogError(f"{path}: the eval's status is {log.status!r}, not 'success', so its samples are not "
                             "all there; import a finished log (inspect eval-retry completes one).")
    if not log.samples:
        raise ImportLogError(f"{path} holds no samples; pass a log written with samples (not --no-log-samples).")
    name = dataset or (log.eval.dataset.name if log.eval.dataset and log.eval.dataset.name else log.eval.task)
    config = log.eval.model_generate_config or log.plan.config
    generation = {"temperature": config.temperature, "max_tokens": config.max_tokens, "seed": config.seed,
                  "top_p": config.top_p, "top_k": config.top_k}
    cells: list[SourceCell] = []
    chosen = scorer
    for position, sample in enumerate(log.samples, start=1):
        where = f"{path}, sample {sample.id!r} (#{position})"
        if not sample.choices:
            raise ImportLogError(f"{where} has no choices, so it is no multiple_choice sample; PRISM imports "
                                 "inspect tasks solved with multiple_choice().")
        stem = sample.input if isinstance(sample.input, str) else _text(
            next((m.content for m in sample.input if m.role == "user"), ""))
        options = tuple(str(c).strip() for c in sample.choices)
        target = sample.target if isinstance(sample.target, str) else ",".join(sample.target)
        key = ord(target.strip()) - ord("A") if len(target.strip()) == 1 else -1
        if not 0 <= key < len(options):
            raise ImportLogError(f"{where}: target {target!r} is not one letter among the {len(options)} choices; "
                                 "PRISM imports single-answer multiple_choice samples.")
        question = question_of(name, split, str(sample.id), stem.strip(), options, key)
        users = [i for i, m in enumerate(sample.messages) if m.role == "user"]
        if not users:
            raise ImportLogError(f"{where} has no user message; the log holds no prompt to import.")
        last = users[-1]
        earlier = tuple(Turn(m.role, _text(m.content)) for m in sample.messages[:last] if m.role in ("system", "user",
                                                                                                    "assistant"))
        text = _text(sample.messages[last].content)
        shown, canonical, shown_options = displayed(text, options, None, question.labels)
        scores = sample.scores or {}
        if chosen is None:
            chosen = next(iter(scores), "")
        score = scores.get(chosen)
        if score is None:
            raise ImportLogError(f"{where} has no score of scorer {chosen!r} (it has {', '.join(scores) or 'none'}); "
                                 "pass scorer=NAME, or score the log first (inspect score).")
        extracted = score.answer or ""
        output = sample.output
        response = output.completion if output is not None else None
        reason = None
        if output is not None and output.choices:
            stop = str(output.choices[0].stop_reason)
            reason = _STOP.get(stop, stop)
        metrics = {"score": 1.0 if score.value == "C" else 0.0} if score.value in ("C", "I") else {}
        cells.append(SourceCell(
            where=where, question=question, displayed_labels=shown, canonical_labels=canonical,
            displayed_options=shown_options, text=text, earlier_turns=earlier, repetition=int(sample.epoch) - 1,
            response=response, finish_reason=reason,
            source_answer=canonical_answer(extracted, shown, canonical), source_extracted=extracted,
            source_metrics=metrics))
    version = str((log.eval.packages or {}).get("inspect_ai", "unknown"))
    return InspectLog(log.eval.task, tuple(cells), chosen or "", version, generation, log.eval.model, name)
