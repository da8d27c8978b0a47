"""The two-readings section of report.html and of the site's run pages, read back as a person would read it.

Scripted replay runs whose lines carry label probabilities: ``probs`` on 4 ARC-Challenge questions under P0-P4
always answers the key in its text while its first token prefers label A (70%), so the readings part on
every question whose key is not A under a condition that shows the key elsewhere; ``text`` is the same
file run without ``generation.label_probs`` (no likelihood reading); ``survey`` answers 3 synthetic items
without an answer key. One ``probs`` response carries markup, which must reach the page as text. Every page
is parsed as strict HTML5 and its numbers checked against the tables and MLflow metrics they come from.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import html5lib
import pytest
from conftest import compose_config, run_overrides
from test_survey import survey_overrides, write_items

from compare.test_compare import compose_compare
from prism.compare import compare
from prism.conditions import condition_set_from_config, render
from prism.formatting import NO_KEY, percent
from prism.questions import freeze_question_set
from prism.run.pipeline import run

N = 4
MARKUP = '\n\n<script>alert("x")</script> & <b>bold</b>'
MEASURES = ("accuracy", "likelihood_accuracy", "reading_agreement", "mean_label_mass", "mean_prob_tv")


def probabilities(labels: tuple[str, ...]) -> dict[str, float]:
    """The first token's habit: 0.7 on the first displayed label, the rest shared."""
    rest = 0.3 / (len(labels) - 1)
    return {label: 0.7 if i == 0 else rest for i, label in enumerate(labels)}


def replay_lines(prompts: list[tuple[str, str, Any]], answer: Any) -> str:
    """One line per (question id, condition, prompt): the response from ``answer(prompt, qid)``, the habit's probs."""
    lines = []
    for qid, condition, prompt in prompts:
        lines.append({"question_id": qid, "condition": condition, "response": answer(prompt, qid, condition),
                      "label_probs": probabilities(prompt.displayed_labels), "label_mass": 0.8})
    return "".join(json.dumps(line) + "\n" for line in lines)


def arc_prompts(root: Path, data_dir: Path) -> tuple[list[tuple[str, str, Any]], dict[str, str]]:
    cfg = compose_config([*run_overrides(root, data_dir), f"dataset.n={N}"])
    cs = condition_set_from_config(cfg.conditions)
    frozen = freeze_question_set("arc_challenge", "test", N, 0, data_dir, root / "frozen").questions
    return ([(q.question_id, c.name, render(q, c, cs)) for q in frozen for c in cs.conditions],
            {q.question_id: q.answer for q in frozen})


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("two_readings")
    prompts, keys = arc_prompts(root, data_dir)
    # The markup goes to the first cell (in the page's order) where the readings part: the key not shown first.
    first = min((qid, condition) for qid, condition, prompt in prompts
                if prompt.displayed_labels[prompt.canonical_labels.index(keys[qid])] != prompt.displayed_labels[0])

    def keyed(prompt: Any, qid: str, condition: str) -> str:
        label = prompt.displayed_labels[prompt.canonical_labels.index(keys[qid])]
        return label + (MARKUP if (qid, condition) == first else "")

    arc = root / "arc.jsonl"
    arc.write_text(replay_lines(prompts, keyed), encoding="utf-8")
    common = [*run_overrides(root, data_dir), "model=replay", f"model.path={arc}", f"dataset.n={N}"]
    probs = run(compose_config([*common, "model.name=probs", "generation.label_probs=true"]), output_dir=root / "a")
    text = run(compose_config([*common, "model.name=text"]), output_dir=root / "b")

    items = write_items(root)
    survey_cfg = compose_config([*run_overrides(root, data_dir), *survey_overrides(items), "model=replay",
                                 f"model.path={root / 'survey.replay.jsonl'}", "model.name=survey",
                                 "generation.label_probs=true"])
    cs = condition_set_from_config(survey_cfg.conditions, subjective=True)
    from prism.questions import dataset_config, load_questions

    spec = dataset_config({"name": "custom", "path": str(items), "answer_format": "none",
                                    "type": "subjective",
                                    "fields": {"id": "id", "question": "statement", "options": "options"}})
    survey_prompts = [(q.question_id, c.name, render(q, c, cs)) for q in load_questions(spec).questions
                      for c in cs.conditions]
    (root / "survey.replay.jsonl").write_text(
        replay_lines(survey_prompts, lambda prompt, qid, condition: prompt.displayed_labels[-1]), encoding="utf-8")
    survey = run(survey_cfg, output_dir=root / "c")

    uri = f"sqlite:///{root}/mlflow.db"
    both = compare(compose_compare([f"tracking.uri={uri}", "bootstrap=50", "permutations=50",
                                    f"runs=[{probs.run_id},{text.run_id}]"]), output_dir=root / "cmp")
    keyless = compare(compose_compare([f"tracking.uri={uri}", "bootstrap=50", "permutations=50",
                                       f"runs=[{survey.run_id}]"]), output_dir=root / "cmp-survey")
    out = root / "site"
    done = subprocess.run([sys.executable, "-m", "prism.publish", f"tracking.uri={uri}", f"publish.out={out}",
                           "bootstrap=50", f"hydra.run.dir={root / 'hydra'}"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return {"probs": probs, "text": text, "survey": survey, "both": both, "keyless": keyless, "site": out,
            "keys": keys, "first": first}


def parse(path: Path) -> Any:
    """The page as an element tree; html5lib in strict mode raises on any HTML5 parse error."""
    return html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parse(path.read_text(encoding="utf-8"))


def text_of(element: Any) -> str:
    return " ".join("".join(element.itertext()).split())


def section(tree: Any) -> Any:
    (found,) = [s for s in tree.iter("section") if any(h.get("id") == "answer-readings" for h in s.iter("h2"))]
    return found


def table_rows(element: Any, kind: str) -> list[Any]:
    (table,) = [t for t in element.iter("table") if kind in (t.get("class") or "").split()]
    return list(table.iter("tr"))[1:]


def test_the_report_shows_both_readings_per_model_and_condition(made: dict[str, Any]) -> None:
    result = made["both"]
    tree = parse(result.output_dir / "comparison" / "report.html")
    assert any(a.get("href") == "#answer-readings" for a in tree.iter("a"))
    rows = table_rows(section(tree), "readings")
    readings = result.tables.readings.set_index(["model", "condition"])
    # Only the run with probabilities has rows, one per condition.
    assert [(r.get("data-model"), r.get("data-condition")) for r in rows] == [("probs", c) for c in
                                                                             ("P0", "P1", "P2", "P3", "P4")]
    for row in rows:
        expected = readings.loc[(row.get("data-model"), row.get("data-condition"))]
        for cell in row.iter("td"):
            measure = cell.get("data-measure")
            if measure:
                value = expected[measure]
                assert text_of(cell) == ("–" if value != value else percent(value, 1)), (measure, text_of(cell))
    p0 = readings.loc[("probs", "P0")]
    assert p0["accuracy"] == 1.0 and p0["likelihood_accuracy"] < 1.0  # the text always names the key


def test_the_report_lists_where_the_readings_part_with_the_raw_responses(made: dict[str, Any]) -> None:
    result = made["both"]
    parted = result.tables.reading_disagreements
    assert len(parted) and (parted["likelihood_answer"] == "A").all()  # the habit prefers A, the text the key
    tree = parse(result.output_dir / "comparison" / "report.html")
    part = section(tree)
    rows = table_rows(part, "parted")
    assert len(rows) == min(len(parted), 12)
    expected = {(r.question_id, r.condition): r for r in parted.itertuples()}
    for row in rows:
        cell = expected[(row.get("data-question"), row.get("data-condition"))]
        (parsed,) = [td for td in row.iter("td") if td.get("data-reading") == "parsed"]
        (likely,) = [td for td in row.iter("td") if td.get("data-reading") == "likelihood"]
        assert text_of(parsed) == f"{cell.answer} ({cell.p_answer:.2f})"
        assert text_of(likely) == f"A ({cell.p_likelihood:.2f})"
        assert " ".join(str(cell.response).split()) in text_of(row)
    assert made["first"] in {(r.get("data-question"), r.get("data-condition")) for r in rows}
    html = (result.output_dir / "comparison" / "report.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert" in html and "<script>" not in html


def test_a_run_without_an_answer_key_has_no_accuracy_in_either_reading(made: dict[str, Any]) -> None:
    result = made["keyless"]
    readings = result.tables.readings
    assert readings["accuracy"].isna().all() and readings["likelihood_accuracy"].isna().all()
    assert readings["reading_agreement"].notna().all()
    rows = table_rows(section(parse(result.output_dir / "comparison" / "report.html")), "readings")
    for row in rows:
        cells = {td.get("data-measure"): text_of(td) for td in row.iter("td") if td.get("data-measure")}
        assert cells["accuracy"] == NO_KEY and cells["likelihood_accuracy"] == NO_KEY
        assert cells["reading_agreement"].endswith("%")


def test_a_comparison_without_probabilities_has_no_such_section(made: dict[str, Any], tmp_path: Path) -> None:
    text = made["text"]
    uri = f"sqlite:///{Path(text.output_dir).parent}/mlflow.db"
    result = compare(compose_compare([f"tracking.uri={uri}", "bootstrap=20", "permutations=20",
                                      f"runs=[{text.run_id}]"]), output_dir=tmp_path / "cmp")
    tree = parse(result.output_dir / "comparison" / "report.html")
    assert not any(h.get("id") == "answer-readings" for h in tree.iter("h2"))
    assert not any(a.get("href") == "#answer-readings" for a in tree.iter("a"))


def run_page(made: dict[str, Any], name: str) -> Any:
    return parse(made["site"] / "runs" / f"{made[name].run_id}.html")


def test_the_site_shows_both_readings_as_the_logged_metrics(made: dict[str, Any]) -> None:
    import mlflow

    for name in ("probs", "survey"):
        result = made[name]
        logged = mlflow.tracking.MlflowClient(result.tracking_uri).get_run(result.run_id).data.metrics
        tree = run_page(made, name)
        assert any(a.get("href") == "#answer-readings" for a in tree.iter("a"))
        rows = table_rows(section(tree), "readings")
        assert [r.get("data-condition") for r in rows] == ["P0", "P1", "P2", "P3", "P4"]
        checked = 0
        for row in rows:
            for cell in row.iter("td"):
                metric = cell.get("data-metric")
                if not metric:
                    continue
                assert cell.get("data-run") == result.run_id
                shown = text_of(cell)
                if name == "survey" and cell.get("data-measure") in ("accuracy", "likelihood_accuracy"):
                    assert shown == NO_KEY and metric not in logged
                elif metric in logged:
                    assert shown == percent(logged[metric], 1), (metric, shown)
                    checked += 1
                else:
                    assert shown == "–" and metric == "mean_prob_tv/P0", metric
        assert checked >= (5 * 4 - 1 if name == "probs" else 5 * 2 - 1)


def test_the_site_lists_where_the_readings_part_and_a_run_without_them_has_no_section(made: dict[str, Any]) -> None:
    tree = run_page(made, "probs")
    rows = table_rows(section(tree), "parted")
    parted = made["both"].tables.reading_disagreements
    assert len(rows) == min(len(parted), 12)
    assert {(r.get("data-question"), r.get("data-condition")) for r in rows} <= set(
        zip(parted["question_id"], parted["condition"], strict=True))
    assert made["first"] in {(r.get("data-question"), r.get("data-condition")) for r in rows}
    page = (made["site"] / "runs" / f"{made['probs'].run_id}.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert" in page and "<script>" not in page
    text = run_page(made, "text")
    assert not any(h.get("id") == "answer-readings" for h in text.iter("h2"))
    assert not any(a.get("href") == "#answer-readings" for a in text.iter("a"))
