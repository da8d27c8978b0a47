"""prism.importer.run: real lm-eval logs imported as ordinary runs that compare, publish and export.

The numbers checked are recomputed here from the fixture logs themselves (lm-eval's own per-sample
``acc``/``acc_norm``/``exact_match``, PRISM's parser on each response), never written in by hand.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURE_DATA, compose, fresh_mlflow

from prism.config import CompareConfig, ImportConfig, to_schema
from prism.importer.build import AGREEMENT_ARTIFACT, CLOZE_ONLY, verdict
from prism.importer.mapping import ImportLogError
from prism.importer.run import import_log
from prism.parsing import parse_response

GEN = FIXTURE_DATA / "imports" / "samples_arc_local_gen.jsonl"
MC = FIXTURE_DATA / "imports" / "samples_arc_local.jsonl"


def settings(uri: str, *overrides: str) -> ImportConfig:
    return to_schema(compose("import", [f"tracking.uri={uri}", *overrides]), ImportConfig)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory, mlflow_template: Path) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("import")
    uri = f"sqlite:///{fresh_mlflow(mlflow_template, root)}"
    runs = {name: import_log(settings(uri, "format=lm_eval", f"path={path}", f"model.name={model}"), root / name)
            for name, path, model in (("gen", GEN, "smollm2"), ("gen_b", GEN, "smollm2-again"),
                                      ("mc", MC, "smollm2"))}
    return {"uri": uri, "root": root, "runs": runs}


def test_a_generative_log_is_a_finished_run_tagged_with_its_source(imported: dict[str, Any]) -> None:
    from mlflow.tracking import MlflowClient

    result = imported["runs"]["gen"]
    run = MlflowClient(imported["uri"]).get_run(result.run_id)
    assert run.info.status == "FINISHED"
    tags = run.data.tags
    assert tags["prism.imported_from"] == "lm_eval" and tags["prism.import.tool_version"] == "0.4.13"
    assert tags["prism.import.source_sha256"] == result.source.sha256 and tags["prism.kind"] == "run"
    assert run.data.params["conditions.names"] == "arc_local_gen"
    assert run.data.params["conditions.template_version"].startswith("import.lm_eval.")
    names = {a.path for a in MlflowClient(imported["uri"]).list_artifacts(result.run_id, "results")}
    assert AGREEMENT_ARTIFACT in names and "results/scored.jsonl" in names


def test_the_agreement_table_is_lm_eval_s_answer_beside_prism_s_parse(imported: dict[str, Any]) -> None:
    result = imported["runs"]["gen"]
    rows = list(csv.DictReader((result.imported.out / AGREEMENT_ARTIFACT).open(encoding="utf-8")))
    source = lines(GEN)
    assert len(rows) == len(source)
    for row, line in zip(rows, source, strict=True):
        labels, texts = line["doc"]["choices"]["label"], line["doc"]["choices"]["text"]
        ours = parse_response(line["resps"][0][0], tuple(labels), tuple(texts))
        prism = None if ours.displayed is None else "ABCDE"[labels.index(ours.displayed)]
        theirs = line["filtered_resps"][0]
        theirs = "ABCDE"[labels.index(theirs)] if theirs in labels else None
        assert (row["prism_answer"], row["source_answer"]) == (prism or "UNKNOWN", theirs or "UNKNOWN")
        assert row["verdict"] == verdict(theirs, prism) and row["response"] == line["resps"][0][0]
    metrics = result.imported.metrics
    assert metrics["source/exact_match"] == pytest.approx(sum(x["exact_match"] for x in source) / len(source))
    assert metrics["import_agreement/source_accuracy"] == pytest.approx(metrics["source/exact_match"])
    assert metrics["import_agreement/prism_accuracy"] == pytest.approx(metrics["accuracy"])


def test_a_log_likelihood_log_gives_lm_eval_s_acc_and_acc_norm(imported: dict[str, Any]) -> None:
    result = imported["runs"]["mc"]
    source = lines(MC)
    metrics = result.imported.metrics
    assert metrics["cloze_accuracy"] == pytest.approx(sum(x["acc"] for x in source) / len(source))
    assert metrics["cloze_norm_accuracy"] == pytest.approx(sum(x["acc_norm"] for x in source) / len(source))
    raw = lines(result.imported.out / "responses" / "responses.jsonl")
    assert all(r["error"] == CLOZE_ONLY and r["response"] is None and r["cloze_source"] == "lm_eval" for r in raw)
    assert [r["cloze_logprobs"] for r in raw] == [{"ABCDE"[i]: float(v[0][0]) for i, v in enumerate(x["resps"])}
                                                  for x in source]


def test_a_bad_log_leaves_no_run(imported: dict[str, Any], tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(imported["uri"])
    before = len(client.search_runs([e.experiment_id for e in client.search_experiments()]))
    bad = tmp_path / "samples_arc_local_gen.jsonl"
    bad.write_bytes(GEN.read_bytes()[:-100])
    with pytest.raises(ImportLogError, match="looks truncated"):
        import_log(settings(imported["uri"], "format=lm_eval", f"path={bad}"), tmp_path / "out")
    assert len(client.search_runs([e.experiment_id for e in client.search_experiments()])) == before


def test_imported_runs_compare_and_publish(imported: dict[str, Any]) -> None:
    from prism.compare.core import compare
    from prism.publish.config import PublishConfig, register
    from prism.publish.site import publish

    a, b = imported["runs"]["gen"].run_id, imported["runs"]["gen_b"].run_id
    cfg = to_schema(compose("compare", [f"tracking.uri={imported['uri']}", "bootstrap=50", "permutations=50",
                                        f"runs=[{a},{b}]", "baseline=arc_local_gen"]), CompareConfig)
    result = compare(cfg, output_dir=imported["root"] / "cmp")
    assert (imported["root"] / "cmp" / "comparison" / "report.html").is_file()
    assert set(result.tables.scorecard["model"]) == {"smollm2", "smollm2-again"}
    register()
    site = publish(to_schema(compose("publish", [f"tracking.uri={imported['uri']}",
                                                 f"publish.out={imported['root'] / 'site'}", f"runs=[{a},{b}]"]),
                             PublishConfig))
    assert f"runs/{a}.html" in site.pages and f"runs/{b}.html" in site.pages
    # A comparison exports every compared run, one row per cell of each.
    import datasets

    from prism.importer.export_main import export

    out, _ = export(result.run_id, imported["root"] / "cmp-dataset", imported["uri"])
    # A cache of its own: with the shared cache, load_dataset of this folder returned the rows of an earlier
    # session's export to a folder of the same name (seen here), not these.
    rows = datasets.load_dataset(str(out), cache_dir=str(imported["root"] / "hf-cache"))["train"]
    assert sorted(set(rows["run_id"])) == sorted({a, b})
    assert rows.num_rows == 2 * len(lines(GEN))


def test_an_export_loads_back_with_the_run_s_scored_records(imported: dict[str, Any], tmp_path: Path) -> None:
    import datasets

    from prism.importer.export_main import export

    result = imported["runs"]["gen"]
    out, pushed = export(result.run_id, tmp_path / "ds", imported["uri"])
    assert pushed is None
    scored = lines(result.imported.out / "results" / "scored.jsonl")
    loaded = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf-cache"))["train"]
    for dataset in (datasets.load_from_disk(str(out / "disk")), loaded):
        assert dataset.num_rows == len(scored)
        for row, record in zip(dataset, scored, strict=True):
            for name, value in record.items():
                assert (json.loads(row[name]) if isinstance(value, dict | list) else row[name]) == value, name
    card = (out / "README.md").read_text(encoding="utf-8")
    assert result.imported.tags["prism.model_digest"] in card and "cc-by-sa-4.0" in card
    assert "prism.imported_from" in card and result.source.sha256 in card
