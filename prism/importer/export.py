"""A finished run, or a comparison's runs, as a Hugging Face dataset on disk (``prism-export``).

One row per cell: the run and model, the question (stem, options, canonical labels, key), the condition and
repetition, the prompt as sent (its turns), the raw response, and every field of the cell's scored record
(parsed answer, method, correctness, and whatever readings the run has: label probabilities, the cloze
reading). Fields that are mappings or lists (``option_probs``, ``cloze_logprobs``, ``generation``, ...) are
JSON text, so every row has one schema whatever its option count. The folder holds the rows as Parquet
under ``data/`` and a dataset card ``README.md`` whose YAML header points at them (``datasets.load_dataset(out)``,
the Hub's layout), and the same dataset as ``save_to_disk`` writes it under ``disk/``
(``datasets.load_from_disk(out / "disk")``). The card
holds the provenance: model digest, config, versions, PRISM commit, the question source's
licence, and for an imported run where it came from. ``push=REPO`` uploads the folder with
``huggingface_hub`` (needs a token and network; tested against a loopback stand-in of the Hub's API,
``tests/importer/hub_server.py``, on the git-lfs upload path, not the Xet one).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prism.errors import PrismError
from prism.names import (
    CONFIG_ARTIFACT,
    KIND_COMPARISON,
    KIND_REPRODUCTION,
    KIND_RUN,
    PARAM_CONDITIONS_NAME,
    PARAM_DATASET_NAME,
    PARAM_DATASET_SPLIT,
    PARAM_MODEL_BACKEND,
    PARAM_MODEL_NAME,
    PARAM_PARSER_VERSION,
    PARAM_PROTOCOL_VERSION,
    PARAM_SCORER_VERSION,
    PARAM_TEMPLATE_VERSION,
    QUESTIONS_ARTIFACT,
    RESPONSES_ARTIFACT,
    SCORED_ARTIFACT,
    TAG_DATASET_VERSION,
    TAG_GIT_COMMIT,
    TAG_GIT_DIRTY,
    TAG_IMPORT_SOURCE_SHA256,
    TAG_IMPORT_TASK,
    TAG_IMPORT_TOOL_VERSION,
    TAG_IMPORTED_FROM,
    TAG_MODEL_DIGEST,
    TAG_QUESTION_SET,
    TAG_VERSION,
    LoggedRun,
)

# Licences of the shipped datasets' question sources (/work/shared/data/README.md, tests/data/README.md).
LICENCES = {"arc_challenge": "cc-by-sa-4.0", "arc_easy": "cc-by-sa-4.0", "sciq": "cc-by-nc-3.0", "mmlu": "mit",
            "mmlu_pro": "mit", "commonsense_qa": "mit", "openbookqa": "unknown"}
CARD = "README.md"
DISK = "disk"
PARQUET = "data/train-00000-of-00001.parquet"
# The MLflow tags whose values the card shows as provenance, in this order.
PROVENANCE_TAGS = (TAG_MODEL_DIGEST, TAG_QUESTION_SET, TAG_DATASET_VERSION, TAG_VERSION, TAG_GIT_COMMIT, TAG_GIT_DIRTY,
                   TAG_IMPORTED_FROM, TAG_IMPORT_TOOL_VERSION, TAG_IMPORT_SOURCE_SHA256, TAG_IMPORT_TASK)
PROVENANCE_PARAMS = (PARAM_MODEL_NAME, PARAM_MODEL_BACKEND, PARAM_DATASET_NAME, PARAM_DATASET_SPLIT,
                     PARAM_CONDITIONS_NAME, PARAM_TEMPLATE_VERSION, PARAM_PARSER_VERSION, PARAM_SCORER_VERSION,
                     PARAM_PROTOCOL_VERSION)


class ExportError(PrismError, RuntimeError):
    """A run that cannot be exported, or a folder that cannot be written."""


@dataclass(frozen=True)
class RunFiles:
    """One run as logged (params and tags) and the artifacts the rows are made of, downloaded."""

    logged: LoggedRun
    scored: Path
    responses: Path
    frozen: Path
    resolved: Path | None


    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.logged.run_id


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def rows_of(run: RunFiles) -> list[dict[str, Any]]:
    """The run's rows: one per scored record, in the scored file's order, with its question and prompt."""
    questions = {q["question_id"]: q for q in _jsonl(run.frozen)}
    prompts: dict[tuple[str, str, int], dict[str, Any]] = {}
    for raw in _jsonl(run.responses):
        prompts[(raw["question_id"], raw["condition"], int(raw.get("repetition", 0)))] = raw
    rows = []
    for record in _jsonl(run.scored):
        key = (record["question_id"], record["condition"], int(record.get("repetition", 0)))
        raw = prompts.get(key, {})
        question = questions.get(record["question_id"], {})
        turns = [*(raw.get("turns") or []), {"role": "user", "content": raw.get("prompt", "")}]
        row: dict[str, Any] = {
            "run_id": run.run_id, "model": run.logged.model,
            "question": question.get("question"), "options": list(question.get("options") or []),
            "labels": list(question.get("labels") or []), "prompt": raw.get("prompt"),
            "prompt_turns": json.dumps(turns, ensure_ascii=False),
        }
        for name, value in record.items():
            nested = isinstance(value, dict | list)
            row[name] = json.dumps(value, ensure_ascii=False, sort_keys=True) if nested else value
        rows.append(row)
    return rows


def scored_fields(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every scored-record field the rows hold (their union, in first-seen order)."""
    own = {"run_id", "model", "question", "options", "labels", "prompt", "prompt_turns"}
    return list(dict.fromkeys(name for row in rows for name in row if name not in own))


def card(runs: Sequence[RunFiles], n_rows: int, kind: str, source_id: str) -> str:
    """The dataset card: a YAML header ``load_dataset`` reads, then the provenance of every run."""
    import yaml

    datasets_ = sorted({r.logged.dataset for r in runs})
    licences = sorted({LICENCES.get(d, "unknown") for d in datasets_})
    header = {"license": licences[0] if len(licences) == 1 and licences[0] != "unknown" else "other",
              "tags": ["prism", "evaluation", "multiple-choice"],
              "configs": [{"config_name": "default", "data_files": [{"split": "train", "path": PARQUET}]}]}
    lines = ["---", yaml.safe_dump(header, sort_keys=False).rstrip(), "---", "",
             f"# PRISM {kind} {source_id}", "",
             f"{n_rows} cells (one row per question x condition x repetition) of {len(runs)} run(s), exported by "
             f"prism-export from the runs' MLflow artifacts (`{SCORED_ARTIFACT}`, `{RESPONSES_ARTIFACT}`, "
             f"`{QUESTIONS_ARTIFACT}`). Fields that are mappings or lists are JSON text.", "",
             "## Licence of the questions", ""]
    lines += [f"- `{d}`: {LICENCES.get(d, 'unknown (see the source dataset)')}" for d in datasets_]
    lines += ["", "The responses are model outputs; the question text keeps its source's licence.", ""]
    for run in runs:
        lines += [f"## Run {run.run_id}", "", "| key | value |", "| --- | --- |"]
        params, tags = run.logged.params, run.logged.tags
        lines += [f"| {k} | `{params[k]}` |" for k in PROVENANCE_PARAMS if k in params]
        lines += [f"| {k} | `{tags[k]}` |" for k in PROVENANCE_TAGS if k in tags]
        if run.resolved is not None:
            lines += ["", "Config (`config/resolved.yaml`):", "", "```yaml",
                      run.resolved.read_text(encoding="utf-8").rstrip(), "```"]
        lines.append("")
    return "\n".join(lines)


def write_dataset(runs: Sequence[RunFiles], out: Path, kind: str, source_id: str, overwrite: bool = False) -> Path:
    """Write the runs' rows to ``out``: ``data/*.parquet``, the card, and ``save_to_disk``'s files in ``disk/``.

    Raises:
        ExportError: If ``out`` is a non-empty folder and ``overwrite`` is false.
    """
    import datasets

    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise ExportError(f"{out} is not empty; pass out=ANOTHER_FOLDER, or overwrite=true to replace it.")
        shutil.rmtree(out)
    rows = [row for run in runs for row in rows_of(run)]
    if not rows:
        raise ExportError(f"{kind} {source_id} has no scored records to export.")
    names = list(dict.fromkeys(name for row in rows for name in row))
    table = {name: [row.get(name) for row in rows] for name in names}
    dataset = datasets.Dataset.from_dict(table)
    # Beside the Hub layout, not over it: load_dataset refuses a folder that save_to_disk wrote.
    dataset.save_to_disk(str(out / DISK))
    (out / PARQUET).parent.mkdir(parents=True, exist_ok=True)
    dataset.to_parquet(str(out / PARQUET))
    (out / CARD).write_text(card(runs, len(rows), kind, source_id), encoding="utf-8")
    return out


def push(out: Path, repo: str) -> str:
    """Upload the folder as a Hub dataset repo (token from the environment or ``huggingface-cli login``).

    Raises:
        ExportError: If the Hub refuses or cannot be reached.
    """
    try:
        from huggingface_hub import HfApi

        api = HfApi()
        api.create_repo(repo, repo_type="dataset", exist_ok=True)
        info = api.upload_folder(folder_path=str(out), repo_id=repo, repo_type="dataset",
                                 commit_message="PRISM export", ignore_patterns=[f"{DISK}/*"])
    except Exception as exc:  # HfHubHTTPError, connection errors, a missing token
        raise ExportError(f"could not push {out} to the Hub as {repo!r} ({type(exc).__name__}: {exc}); the dataset "
                          "is on disk. Log in (huggingface-cli login, or HF_TOKEN) and check the network.") from exc
    return str(getattr(info, "commit_url", repo))


def fetch(run_id: str, tracking_uri: str | None, work: Path) -> tuple[str, list[RunFiles]]:
    """Download a run's artifacts, or each compared run's for a comparison.

    Returns:
        The kind (``run`` or ``comparison``) and the runs' files.

    Raises:
        ExportError: If the id is unknown, the run is not FINISHED, or an artifact is missing.
    """
    from mlflow.tracking import MlflowClient

    from prism.compare.select import CompareError, download

    client = MlflowClient(tracking_uri=tracking_uri)
    try:
        run = client.get_run(run_id)
    except Exception as exc:  # MlflowException for an unknown id
        raise ExportError(f"run {run_id} is not in the tracking store {tracking_uri or '(default)'} "
                          f"({type(exc).__name__}); pass run=ID of a finished run or comparison.") from exc
    logged = LoggedRun.from_mlflow(run)
    kind = logged.kind
    ids = [run_id]
    if kind == KIND_COMPARISON:
        ids = list(logged.compared_runs)
    elif kind not in (KIND_RUN, KIND_REPRODUCTION):
        raise ExportError(f"run {run_id} is of kind {kind!r}; prism-export takes a run or a comparison.")
    found = []
    for one in ids:
        summary = client.get_run(one)
        if summary.info.status != "FINISHED":
            raise ExportError(f"run {one} is {summary.info.status}, not FINISHED; export a finished run.")
        dst = work / one
        try:
            paths = {name: download(one, name, tracking_uri, dst, summary.info.artifact_uri)
                     for name in (SCORED_ARTIFACT, RESPONSES_ARTIFACT, QUESTIONS_ARTIFACT)}
        except CompareError as exc:
            raise ExportError(str(exc)) from exc
        try:
            resolved: Path | None = download(one, CONFIG_ARTIFACT, tracking_uri, dst, summary.info.artifact_uri)
        except CompareError:
            resolved = None
        found.append(RunFiles(LoggedRun.from_mlflow(summary), paths[SCORED_ARTIFACT], paths[RESPONSES_ARTIFACT],
                              paths[QUESTIONS_ARTIFACT], resolved))
    return kind, found
