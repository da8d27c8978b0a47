"""comparison/report.html: every item a reader needs, read back from the page with html.parser.

Two scripted replay models in one temporary MLflow store: alpha answers right under every condition (but
one question always wrong), beta gives the same wrong answer almost everywhere, and once answers with
markup, which must reach the page as text. Each value on the page is checked against what MLflow holds.
"""

from __future__ import annotations

import dataclasses
import json
import math
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import compose, compose_config, run_overrides

from prism.compare.core import compare
from prism.compare.readings import (
    ACCURATE_AND_STABLE,
    CONSISTENTLY_WRONG,
    INACCURATE_AND_UNSTABLE,
    PROMPT_DEPENDENT,
    ModelNumbers,
    read_patterns,
)
from prism.questions import Question, freeze_question_set
from prism.run.pipeline import run
from prism.stats.basics import Estimate

N = 8
CONDITIONS = ["P0", "P1", "P2", "P3", "P4"]
MARKUP = 'I refuse. <script>alert("x")</script> & <b>bold</b>'
# One letter per question: K the key, W a wrong option, M the markup response (UNKNOWN).
ALPHA = {c: "KKKKKKKW" for c in CONDITIONS}
BETA = {"P0": "MWWWWWKK", "P1": "WWWWWWKK", "P2": "WWWWWWWK", "P3": "WWWWWWKK", "P4": "WWWWWWKK"}


def replay(questions: list[Question], script: dict[str, str]) -> str:
    lines = []
    for condition, codes in script.items():
        for q, code in zip(questions, codes, strict=True):
            wrong = next(label for label in q.labels if label != q.answer)
            response = {"K": q.answer, "W": wrong, "M": MARKUP}[code]
            lines.append(json.dumps({"question_id": q.question_id, "condition": condition, "response": response}))
    return "\n".join(lines) + "\n"


class Page(HTMLParser):
    """The report's text, and the text of every element carrying a data- attribute, by that attribute."""

    def __init__(self, source: str) -> None:
        super().__init__()
        self.stack: list[dict[str, str]] = []
        self.by_attrs: list[tuple[dict[str, str], list[str]]] = []
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(source)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        self.tags.append((tag, found))
        if tag in ("meta", "img", "br"):  # void elements: no end tag follows
            return
        self.stack.append(found)
        if any(k.startswith("data-") for k in found):
            self.by_attrs.append((found, []))

    def handle_endtag(self, tag: str) -> None:
        if self.stack:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        open_ = [id(a) for a in self.stack]
        for attrs, parts in self.by_attrs:
            if id(attrs) in open_:
                parts.append(data)

    def find(self, **wanted: str) -> list[str]:
        """Text of the elements whose attributes include ``wanted`` (``data_run`` for ``data-run``)."""
        keys = {k.replace("_", "-"): v for k, v in wanted.items()}
        return [" ".join("".join(parts).split()) for attrs, parts in self.by_attrs
                if all(attrs.get(k) == v for k, v in keys.items())]

    def cell(self, run_id: str, item: str) -> str:
        (value,) = self.find(data_run=run_id, data_item=item)
        return value

    @property
    def all_text(self) -> str:
        return " ".join("".join(self.text).split())


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, Any]:
    from prism.config import CompareConfig, to_schema

    root = tmp_path_factory.mktemp("report")
    questions = list(freeze_question_set("arc_challenge", "test", N, 3, data_dir, root / "frozen").questions)
    ids = {}
    for name, script in (("alpha", ALPHA), ("beta", BETA)):
        path = root / f"{name}.jsonl"
        path.write_text(replay(questions, script), encoding="utf-8")
        cfg = compose_config([*run_overrides(root, data_dir), "model=replay", f"model.path={path}",
                              f"model.name={name}", f"dataset.n={N}", "seed=3"])
        ids[name] = run(cfg, output_dir=root / f"run-{name}").run_id
    cfg = to_schema(compose("compare", [f"tracking.uri=sqlite:///{root}/mlflow.db", "bootstrap=200", "seed=5"]),
                    CompareConfig)
    result = compare(cfg, output_dir=root / "cmp")
    path = result.output_dir / "comparison" / "report.html"
    source = path.read_text(encoding="utf-8")
    import mlflow

    client = mlflow.tracking.MlflowClient(f"sqlite:///{root}/mlflow.db")
    return {"root": root, "result": result, "ids": ids, "source": source, "page": Page(source), "client": client,
            "cfg": cfg}


def test_report_is_an_artifact_of_the_comparison_run(report: dict[str, Any]) -> None:
    import mlflow.artifacts

    result, client = report["result"], report["client"]
    assert result.files[-1].name == "report.html"
    assert "comparison/report.html" in {a.path for a in client.list_artifacts(result.run_id, "comparison")}
    local = mlflow.artifacts.download_artifacts(run_id=result.run_id, artifact_path="comparison/report.html",
                                                dst_path=str(report["root"] / "dl"),
                                                tracking_uri=f"sqlite:///{report['root']}/mlflow.db")
    assert Path(local).read_text(encoding="utf-8") == report["source"]
    assert "comparison/report.html" in client.get_run(result.run_id).data.tags["mlflow.note.content"]


def test_page_is_self_contained_and_escapes_data(report: dict[str, Any]) -> None:
    source, page = report["source"], report["page"]
    assert "<script" not in source.lower() and "<link" not in source.lower()
    images = [attrs["src"] for tag, attrs in page.tags if tag == "img"]
    # Accuracy, flip rate, divergence and the profile of the instruction axis.
    assert len(images) == 4 and all(src.startswith("data:image/png;base64,") for src in images)
    assert not [attrs for _, attrs in page.tags if any(v.startswith(("http:", "https:", "//"))
                                                       for k, v in attrs.items() if k in ("src", "href"))]
    # The model's markup is shown as the text it is (the parser's data is the unescaped text).
    # (Jinja2 writes the quote as &#34;, html.escape as &quot;: either is the escaped text.)
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in source
    assert MARKUP in page.all_text


def test_every_reproduction_item_is_on_the_page(report: dict[str, Any]) -> None:
    page, client, ids = report["page"], report["client"], report["ids"]
    for name, run_id in ids.items():
        data = client.get_run(run_id).data
        params, tags = data.params, data.tags
        expected = {
            "run_id": run_id, "model": name, "backend": "replay",
            "model_digest": tags["prism.model_digest"],
            "dataset": "arc_challenge / test",
            "dataset_version": tags["prism.dataset_version"],
            "question_set_sha256": tags["prism.question_set_sha256"],
            "question_set_size": str(N), "sample_seed": "3",
            "condition_set": "prism", "conditions": ", ".join(CONDITIONS),
            "template_version": params["conditions.template_version"],
            "temperature": "0.0", "max_tokens": params["generation.max_tokens"], "generation_seed": "3",
            "top_p": "null", "top_k": "null", "repetitions": "1",
            "parser_version": params["parser_version"], "scorer_version": params["scorer_version"],
            "protocol_version": params["protocol_version"], "prism_version": tags["prism.version"],
            "reproduce": f"python -m prism.reproduce {run_id}",
        }
        for item, value in expected.items():
            assert page.cell(run_id, item) == value, (name, item)
        assert page.cell(run_id, "git_commit").startswith(tags["prism.git_commit"])
        assert len(tags["prism.model_digest"]) == 64 and tags["prism.dataset_version"].startswith("sha256:")
    assert ids["alpha"] != ids["beta"]
    text = page.all_text
    assert f"{ids['alpha']},{ids['beta']}" in text  # the compared run ids, in order
    assert report["result"].run_id in text
    assert "bootstrap=200 seed=5" in text and "baseline=P0" in text


def test_templates_come_from_the_runs_prompts_artifact(report: dict[str, Any]) -> None:
    import mlflow.artifacts

    page = report["page"]
    folder = mlflow.artifacts.download_artifacts(run_id=report["ids"]["alpha"], artifact_path="prompts",
                                                 dst_path=str(report["root"] / "prompts"),
                                                 tracking_uri=f"sqlite:///{report['root']}/mlflow.db")
    logged = yaml.safe_load((Path(folder) / "prism.yaml").read_text(encoding="utf-8"))
    for condition in logged["conditions"]:
        # One block per condition: both runs logged the same file, so it is shown once.
        assert page.find(data_condition=condition["name"]) == [" ".join(condition["template"].split())]
    assert "Return only the letter of the correct option." in page.all_text
    assert f"template version {logged['template_version']}" in page.all_text


def test_a_reading_per_model_from_its_logged_metrics(report: dict[str, Any]) -> None:
    page, client, ids = report["page"], report["client"], report["ids"]
    patterns = {attrs["data-model"]: attrs["data-patterns"] for attrs, _ in page.by_attrs if "data-model" in attrs}
    assert patterns == {"alpha": ACCURATE_AND_STABLE, "beta": CONSISTENTLY_WRONG}
    for name, run_id in ids.items():
        metrics = client.get_run(run_id).data.metrics
        (card,) = page.find(data_model=name)
        for metric in ("question_majority_accuracy", "mean_agreement", "prompt_invariant_incorrect_rate"):
            assert f"{metrics[metric]:.2f} [" in card, (name, metric)
    assert client.get_run(ids["alpha"]).data.metrics["question_majority_accuracy"] == pytest.approx(7 / 8)
    assert client.get_run(ids["beta"]).data.metrics["prompt_invariant_incorrect_rate"] == pytest.approx(5 / 8)
    text = page.all_text
    for rule in ("question-majority accuracy ≥ 0.60", "mean agreement ≥ 0.80", "incorrect rate ≥ 0.20"):
        assert rule in text


def test_what_prism_does_not_claim(report: dict[str, Any]) -> None:
    claims = {attrs["data-claim"] for attrs, _ in report["page"].by_attrs if "data-claim" in attrs}
    assert claims == {"general reliability", "trustworthiness", "safety", "hallucination rate",
                      "stochastic reliability", "arbitrary prompts"}
    text = report["page"].all_text
    for phrase in ("General reliability", "Trustworthiness", "Safety", "Hallucination rate",
                   "Stochastic reliability across repeated runs", "Behaviour under arbitrary prompts"):
        assert phrase in text


def test_tables_and_summary_are_on_the_page(report: dict[str, Any]) -> None:
    text, tables = report["page"].all_text, report["result"].tables
    for heading in ("Summary", "Condition sensitivity against P0", "Divergence between models",
                    "Where the models differ most", "Reproduce and compare", "Prompt templates"):
        assert heading in text
    pooled = tables.divergence[tables.divergence["condition"] == "all"].iloc[0]
    assert (f"{pooled['disagreement']:.2f} [{pooled['disagreement_ci_low']:.2f}, "
            f"{pooled['disagreement_ci_high']:.2f}]") in text
    assert "With 8 questions the 95% intervals are wide" in text


def test_one_run_still_gets_a_page(report: dict[str, Any]) -> None:
    cfg = dataclasses.replace(report["cfg"], runs=[report["ids"]["alpha"]])
    result = compare(cfg, output_dir=report["root"] / "one")
    page = Page((result.output_dir / "comparison" / "report.html").read_text(encoding="utf-8"))
    assert "there is no other model to diverge from" in page.all_text
    assert page.cell(report["ids"]["alpha"], "model") == "alpha"
    # Every section the navigation links to is on the page (a single run has no differences section).
    anchors = {attrs["id"] for _, attrs in page.tags if "id" in attrs}
    links = [attrs["href"][1:] for tag, attrs in page.tags if tag == "a" and attrs.get("href", "").startswith("#")]
    assert links and set(links) <= anchors and "differences" not in links


def test_every_link_of_the_two_run_page_resolves(report: dict[str, Any]) -> None:
    page = report["page"]
    anchors = {attrs["id"] for _, attrs in page.tags if "id" in attrs}
    links = [attrs["href"][1:] for tag, attrs in page.tags if tag == "a" and attrs.get("href", "").startswith("#")]
    assert "differences" in links and set(links) <= anchors


def estimate(value: float, low: float | None = None, high: float | None = None) -> Estimate:
    return Estimate(value, value if low is None else low, value if high is None else high)


@pytest.mark.parametrize(("accuracy", "agreement", "wrong", "expected"), [
    (0.9, 0.95, 0.05, (ACCURATE_AND_STABLE,)),
    (0.7, 0.6, 0.1, (PROMPT_DEPENDENT,)),
    (0.2, 0.95, 0.7, (CONSISTENTLY_WRONG,)),
    (0.3, 0.5, 0.05, (INACCURATE_AND_UNSTABLE,)),
    (0.4, 0.6, 0.25, (INACCURATE_AND_UNSTABLE, CONSISTENTLY_WRONG)),
    (0.5, 0.9, 0.1, ()),  # stable, not accurate, yet not invariantly wrong: no pattern is forced on it
])
def test_pattern_rules(accuracy: float, agreement: float, wrong: float, expected: tuple[str, ...]) -> None:
    reading = read_patterns(ModelNumbers("m", estimate(accuracy), estimate(agreement), estimate(wrong), 1.0))
    assert reading.patterns == expected and reading.borderline == () and reading.cautions == ()
    assert bool(reading.gap) == (not expected)


def test_the_gap_between_the_patterns_is_described() -> None:
    # SmolLM2-like: mostly wrong, agreeing among the answers it gives, half of its responses unrecovered.
    reading = read_patterns(ModelNumbers("m", estimate(0.15), estimate(0.87), estimate(0.0), 0.54))
    assert reading.patterns == ()
    assert "None of the four patterns fits" in reading.gap and "only 54% of responses" in reading.gap
    assert any("Only 54% of responses had a recoverable answer" in c for c in reading.cautions)


def test_borderline_and_cautions_are_said() -> None:
    reading = read_patterns(ModelNumbers("m", estimate(0.65, 0.45, 0.8), estimate(0.9, 0.85, 0.95),
                                         estimate(math.nan, math.nan, math.nan), 0.5))
    assert reading.patterns == (ACCURATE_AND_STABLE,)
    assert len(reading.borderline) == 1 and "[0.45, 0.80]" in reading.borderline[0]
    assert any("50% of responses" in c for c in reading.cautions)
    assert any("The prompt-invariant incorrect rate is undefined" in c for c in reading.cautions)


def test_low_recovery_names_the_rules_that_left_responses_unknown() -> None:
    from prism.compare.report import unknown_methods

    metrics = {"parse_method/none": 0.12, "parse_method/enumeration": 0.3, "parse_method/statement": 0.5,
               "parse_method/truncated": 0.0, "answer_recovery_rate": 0.58}
    assert unknown_methods(metrics) == "; UNKNOWN as enumeration 30%, none 12%"
    assert unknown_methods({"answer_recovery_rate": 0.5}) == ""  # a run logged before these metrics


def test_the_setup_rows_say_what_a_run_asked_and_what_it_cost() -> None:
    from types import SimpleNamespace

    from prism.compare.report_sections import setup_rows
    from prism.names import LoggedRun

    def evidence(metrics: dict[str, float]) -> SimpleNamespace:
        run = LoggedRun("r", "FINISHED", 0)
        return SimpleNamespace(run=run, metrics=metrics)

    priced = evidence({"tokens_prompt": 12345.0, "tokens_completion": 678.0, "tokens_from_store_prompt": 10.0,
                       "tokens_from_store_completion": 2.0, "tokens_provider_cached": 4096.0, "cost_usd": 0.04716})
    unpriced = evidence({"tokens_prompt": 5.0, "tokens_completion": 1.0, "tokens_from_store_prompt": 0.0,
                         "tokens_from_store_completion": 0.0, "tokens_provider_cached": 0.0})
    rows = {row.key: row.values for row in setup_rows([priced, unpriced, evidence({})])}  # type: ignore[list-item]
    assert rows["tokens_asked"] == ["12,345 prompt + 678 completion", "5 prompt + 1 completion", "–"]
    assert rows["tokens_from_store"] == ["10 prompt + 2 completion", "0 prompt + 0 completion", "–"]
    assert rows["tokens_provider_cached"] == ["4,096", "0", "–"]
    assert rows["cost_usd"] == ["$0.0472", "no model.pricing", "–"]
