"""prism.importer.inspect_log on the real inspect_ai log of tests/data/imports/ (needs the [inspect] extra).

The expected values are read from the log with inspect_ai's own reader here, sample by sample.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from conftest import FIXTURE_DATA

from prism.importer.mapping import ImportLogError

# inspect-ai caps fsspec below what the test environment resolves, so CI runs this file in a venv of its own
# (tests/data/imports/README.md); elsewhere it skips.
pytest.importorskip("inspect_ai", reason="format=inspect needs the [inspect] extra (pip install -e '.[inspect]'), "
                    "in a venv of its own: see tests/data/imports/README.md")

EVAL = FIXTURE_DATA / "imports" / "inspect_arc.eval"


def test_each_sample_gives_its_prompt_response_and_the_scorer_s_answer() -> None:
    from inspect_ai.log import read_eval_log

    from prism.importer.inspect_log import read_inspect

    log = read_eval_log(str(EVAL))
    got = read_inspect(EVAL)
    assert (got.task, got.scorer, got.version) == ("arc_local", "choice", log.eval.packages["inspect_ai"])
    assert len(got.cells) == len(log.samples)
    for cell, sample in zip(got.cells, log.samples, strict=True):
        assert cell.question.question_id == str(sample.id)
        assert cell.question.options == tuple(sample.choices)
        assert cell.question.answer == sample.target
        assert cell.response == sample.output.completion
        assert cell.text == sample.messages[0].content
        # inspect relabels every question A, B, C, ... (ARC's 1-4 included) in the doc's order.
        assert cell.displayed_labels == tuple("ABCDE"[: len(sample.choices)])
        answer = sample.scores["choice"].answer
        assert cell.source_extracted == (answer or "")
        assert cell.source_answer == (answer if answer else None)


def test_a_truncated_or_foreign_file_is_refused(tmp_path: Path) -> None:
    from prism.importer.inspect_log import read_inspect

    cut = tmp_path / "cut.eval"
    cut.write_bytes(EVAL.read_bytes()[:2000])
    with pytest.raises(ImportLogError, match=rf"{cut} could not be read by inspect_ai's log reader.*truncated"):
        read_inspect(cut)
    empty = tmp_path / "other.eval"
    with zipfile.ZipFile(empty, "w") as archive:
        archive.writestr("hello.txt", "not a log")
    with pytest.raises(ImportLogError, match="could not be read by inspect_ai's log reader"):
        read_inspect(empty)
    with pytest.raises(ImportLogError, match="does not exist"):
        read_inspect(tmp_path / "missing.eval")


def test_an_inspect_log_imports_as_a_run_beside_its_lm_eval_twin(tmp_path: Path, mlflow_template: Path) -> None:
    from conftest import compose, fresh_mlflow

    from prism.config import ImportConfig, to_schema
    from prism.importer.run import import_log

    uri = f"sqlite:///{fresh_mlflow(mlflow_template, tmp_path)}"
    cfg = to_schema(compose("import", [f"tracking.uri={uri}", "format=inspect", f"path={EVAL}",
                                       "dataset.name=arc_challenge"]), ImportConfig)
    result = import_log(cfg, tmp_path / "out")
    assert result.imported.tags["prism.imported_from"] == "inspect_ai"
    metrics = result.imported.metrics
    assert metrics["import_agreement/source_accuracy"] == pytest.approx(metrics["source/score"])
    assert metrics["import_agreement/prism_accuracy"] == pytest.approx(metrics["accuracy"])
