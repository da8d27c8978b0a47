"""prism.publish: the static site, read back as a person (and a browser) would read it.

Scripted replay runs in one temporary MLflow store: alpha and beta on ARC-Challenge, alpha on SciQ, gamma on
ARC-Challenge with another max_tokens (not directly comparable), and one run logged by hand with scripted
metrics only: items without an answer key, the likelihood reading's metrics, and none of the newer tags.
Beta once answers with markup, which must reach the page as text. Every page is parsed as HTML5, every
internal link and anchor followed, and every number checked against the MLflow metric it comes from.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import html5lib
import pytest
from conftest import CONF_DIR, compose, compose_config, run_overrides

from prism.formatting import NO_KEY, percent
from prism.questions import freeze_question_set
from prism.run.pipeline import run

N = 6
CONDITIONS = ["P0", "P1", "P2", "P3", "P4"]
MARKUP = 'I refuse. <script>alert("x")</script> & <b>bold</b>'
SCRIPTS = {  # K the key, W a wrong option, M the markup response (UNKNOWN)
    "alpha": {c: "KKKKKW" for c in CONDITIONS},
    "beta": {"P0": "WMWWWK", "P1": "WKWWWK", "P2": "WWKWWK", "P3": "WWWWWK", "P4": "WWWKWK"},
    "gamma": {"P0": "KWKWKW", "P1": "KKKWKW", "P2": "WWKWKW", "P3": "KWKWKK", "P4": "KWKWKW"},
}
LIKELIHOOD = {"likelihood_accuracy": 0.5, "reading_agreement": 0.75, "mean_label_mass": 0.9}


def replay(questions: list[Any], script: dict[str, str]) -> str:
    lines = []
    for condition, codes in script.items():
        for q, code in zip(questions, codes, strict=True):
            wrong = next(label for label in q.labels if label != q.answer)
            lines.append(json.dumps({"question_id": q.question_id, "condition": condition,
                                     "response": {"K": q.answer, "W": wrong, "M": MARKUP}[code]}))
    return "\n".join(lines) + "\n"


def scripted_run(uri: str) -> str:
    """A run logged by hand: survey items without a key, likelihood metrics, no digest or version tags."""
    import mlflow

    client = mlflow.tracking.MlflowClient(uri)
    experiment = client.get_experiment_by_name("prism")
    assert experiment is not None
    made = client.create_run(experiment.experiment_id, tags={"prism.kind": "run"})
    run_id = made.info.run_id
    for key, value in {"model.name": "delta", "dataset.name": "survey", "dataset.type": "subjective",
                       "conditions.name": "prism", "conditions.names": ",".join(CONDITIONS)}.items():
        client.log_param(run_id, key, value)
    metrics = {"answer_recovery_rate": 0.8, "instruction_compliance_rate": 0.6, "mean_agreement": 0.7,
               "mean_prompt_sensitivity": 0.3, "answer_unanimous_rate": 0.25, "n_questions": 4.0,
               "consistency/instruction": 0.625, **LIKELIHOOD}
    for key, value in metrics.items():
        client.log_metric(run_id, key, value)
    client.set_terminated(run_id, "FINISHED")
    return run_id


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("publish")
    ids = {}
    for name, dataset, extra in (("alpha", "arc_challenge", []), ("beta", "arc_challenge", []),
                                 ("gamma", "arc_challenge", ["generation.max_tokens=17"]),
                                 ("alpha", "sciq", [])):
        questions = list(freeze_question_set(dataset, "test", N, 3, data_dir, root / "frozen").questions)
        path = root / f"{name}-{dataset}.jsonl"
        path.write_text(replay(questions, SCRIPTS[name]), encoding="utf-8")
        cfg = compose_config([*run_overrides(root, data_dir), "model=replay", f"model.path={path}",
                              f"model.name={name}", f"dataset={dataset}", f"dataset.n={N}", "seed=3", *extra])
        ids[f"{name}/{dataset}"] = run(cfg, output_dir=root / f"run-{name}-{dataset}").run_id
    uri = f"sqlite:///{root}/mlflow.db"
    ids["delta/survey"] = scripted_run(uri)
    out = root / "site"
    done = subprocess.run([sys.executable, "-m", "prism.publish", f"tracking.uri={uri}", f"publish.out={out}",
                           "bootstrap=200", "seed=5", f"hydra.run.dir={root / 'hydra'}"], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    import mlflow

    client = mlflow.tracking.MlflowClient(uri)
    metrics = {run_id: client.get_run(run_id).data.metrics for run_id in ids.values()}
    return {"root": root, "out": out, "ids": ids, "metrics": metrics, "stdout": done.stdout, "client": client,
            "uri": uri}


def settings(uri: str, *overrides: str) -> Any:
    """``publish.yaml`` composed with ``overrides``, as ``python -m prism.publish`` makes its config."""
    from prism.config import to_schema
    from prism.publish.config import PublishConfig, register

    register()
    return to_schema(compose("publish", [f"tracking.uri={uri}", *overrides]), PublishConfig)


def pages(out: Path) -> list[Path]:
    return sorted(out.rglob("*.html"))


def parse(path: Path) -> Any:
    """The page as an element tree; html5lib in strict mode raises on any HTML5 parse error."""
    parser = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False)
    return parser.parse(path.read_text(encoding="utf-8"))


def text_of(element: Any) -> str:
    return " ".join("".join(element.itertext()).split())


def test_every_page_parses_as_html5_with_a_csp_and_nothing_from_another_host(site: dict[str, Any]) -> None:
    found = pages(site["out"])
    assert len(found) > 10 and (site["out"] / "index.html").is_file() and (site["out"] / "style.css").is_file()
    for path in found:
        tree = parse(path)
        assert not tree.findall(".//script") and not tree.findall(".//iframe"), path
        (csp,) = [m.get("content") for m in tree.iter("meta") if m.get("http-equiv") == "Content-Security-Policy"]
        assert "default-src 'none'" in csp and "http" not in csp, path
        for element in tree.iter():
            for attribute in ("src", "href"):
                value = element.get(attribute) or ""
                if element.tag == "a":
                    continue  # a link loads nothing until followed (and with a SQLite store there is none out)
                assert not value.startswith(("http:", "https:", "//")), (path, element.tag, value)
        assert not re.search(r"https?://", " ".join(e.get("href", "") for e in tree.iter("a"))), path


def test_every_internal_link_and_anchor_resolves(site: dict[str, Any]) -> None:
    out = site["out"]
    ids = {path: {e.get("id") for e in parse(path).iter() if e.get("id")} for path in pages(out)}
    checked = 0
    for path in pages(out):
        for element in parse(path).iter():
            target = element.get("href") if element.tag in ("a", "link") else element.get("src")
            if not target:
                continue
            parts = urlsplit(target)
            assert not parts.scheme, (path, target)
            page = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            assert page.is_file(), (path, target)
            if parts.fragment:
                assert parts.fragment in ids[page], (path, target)
            checked += 1
    assert checked > 100


def test_every_number_shown_is_its_mlflow_metric(site: dict[str, Any]) -> None:
    metrics, shown = site["metrics"], 0
    for path in pages(site["out"]):
        for element in parse(path).iter():
            run_id, metric = element.get("data-run"), element.get("data-metric")
            if not (run_id and metric):
                continue
            text = text_of(element)
            logged = metrics[run_id].get(metric)
            if logged is None:
                assert text in (NO_KEY, "not recorded", "–"), (path, metric, text)
            else:
                assert text.split(" [")[0] == percent(logged, 1), (path, run_id, metric, text, logged)
                shown += 1
    assert shown > 50


def test_index_leaderboard_groups_intervals_and_markers(site: dict[str, Any]) -> None:
    tree = parse(site["out"] / "index.html")
    ids = site["ids"]
    boards = {e.get("id"): e for e in tree.iter("section") if e.get("class") == "board"}
    assert set(boards) == {"board-arc_challenge-prism", "board-sciq-prism", "board-survey-prism"}
    arc = boards["board-arc_challenge-prism"]
    assert [text_of(th) for th in arc.iter("th") if th.get("scope") == "row"] == ["alpha", "beta", "gamma"]
    (accuracy,) = [td for td in arc.iter("td") if td.get("data-run") == ids["alpha/arc_challenge"]
                   and td.get("data-metric") == "accuracy"]
    assert re.fullmatch(r"\d+\.\d% \[\d+\.\d%, \d+\.\d%\]", text_of(accuracy))  # one decimal, with an interval
    rows = {text_of(tr.find("th")): text_of(tr) for tr in arc.iter("tr") if tr.find("th") is not None
            and tr.find("th").get("scope") == "row"}
    assert "not directly comparable" in rows["gamma"] and "generation.max_tokens" in rows["gamma"]
    # The odd run is marked, not all the others.
    assert "comparable" in rows["alpha"] and "not directly" not in rows["alpha"]
    survey = text_of(boards["board-survey-prism"])
    assert NO_KEY in survey and "likelihood accuracy" in survey and "50.0%" in survey
    assert "likelihood" not in text_of(arc)  # its runs recorded no likelihood reading


def test_sorted_orders_are_pre_rendered_and_reachable_by_keyboard(site: dict[str, Any]) -> None:
    out, metrics, ids = site["out"], site["metrics"], site["ids"]
    tree = parse(out / "by-accuracy-desc.html")
    (arc,) = [e for e in tree.iter("section") if e.get("id") == "board-arc_challenge-prism"]
    order = [td.get("data-run") for td in arc.iter("td") if td.get("data-metric") == "accuracy"]
    values = [metrics[r]["accuracy"] for r in order]
    assert values == sorted(values, reverse=True) and len(order) == 3
    (active,) = [th for th in arc.iter("th") if th.get("aria-sort")]
    assert active.get("aria-sort") == "descending" and active.find("a").get("href").startswith("by-accuracy-asc.html")
    index = parse(out / "index.html")
    heads = [th for th in index.iter("th") if th.get("scope") == "col" and th.find("a") is not None]
    assert heads and all(th.find("a").get("href") for th in heads)  # links: focusable and followed by Enter
    assert ids["alpha/arc_challenge"] in (out / "by-accuracy-asc.html").read_text(encoding="utf-8")


def test_heatmap_panel_per_model_rows_datasets_columns_families(site: dict[str, Any]) -> None:
    tree = parse(site["out"] / "index.html")
    panels = {text_of(f.find("figcaption")): f for f in tree.iter("figure") if f.get("class") == "panel"}
    assert sorted(panels) == ["alpha", "beta", "delta", "gamma"]
    alpha = panels["alpha"]
    assert [text_of(th) for th in alpha.iter("th") if th.get("scope") == "row"] == ["arc_challenge", "sciq"]
    assert [text_of(th) for th in alpha.iter("th") if th.get("scope") == "col"] == ["dataset", "instruction"]


def test_run_page_has_every_reproducibility_item_and_escapes_responses(site: dict[str, Any]) -> None:
    out, ids, client = site["out"], site["ids"], site["client"]
    beta = ids["beta/arc_challenge"]
    source = (out / "runs" / f"{beta}.html").read_text(encoding="utf-8")
    assert "<script" not in source and "&lt;script&gt;" in source
    tree = parse(out / "runs" / f"{beta}.html")
    text = text_of(tree)
    assert MARKUP in text  # the raw response, as the text it is
    tags, params = client.get_run(beta).data.tags, client.get_run(beta).data.params
    cells = {td.get("data-item"): text_of(td) for td in tree.iter("td") if td.get("data-run") == beta}
    assert cells["model_digest"] == tags["prism.model_digest"]
    assert cells["dataset_version"] == tags["prism.dataset_version"]
    assert cells["question_set_sha256"] == tags["prism.question_set_sha256"]
    for item, key in (("template_version", "conditions.template_version"), ("parser_version", "parser_version"),
                      ("scorer_version", "scorer_version"), ("protocol_version", "protocol_version"),
                      ("max_tokens", "generation.max_tokens"), ("temperature", "generation.temperature")):
        assert cells[item] == params[key], item
    assert cells["sample_seed"] == "3" and cells["run_id"] == beta
    metrics = client.get_run(beta).data.metrics
    assert cells["tokens_asked"] == (f"{int(metrics['tokens_prompt']):,} prompt + "
                                     f"{int(metrics['tokens_completion']):,} completion")
    assert cells["cost_usd"] == "no model.pricing"  # a run without prices logs no cost_usd
    for phrase in ("Where the conditions disagree most", "What PRISM does not claim", "Prompt templates",
                   "question-majority accuracy ≥ 0.60", "not a classification"):
        assert phrase in text, phrase
    old = parse(out / "runs" / f"{ids['delta/survey']}.html")
    old_cells = {td.get("data-item"): text_of(td) for td in old.iter("td") if td.get("data-item")}
    assert old_cells["model_digest"] == "not recorded" and old_cells["parser_version"] == "not recorded"
    assert old_cells["tokens_asked"] == "not recorded" and old_cells["cost_usd"] == "not recorded"


def test_model_page_lists_its_runs(site: dict[str, Any]) -> None:
    tree = parse(site["out"] / "models" / "alpha.html")
    runs = {td.get("data-run") for td in tree.iter("td") if td.get("data-run")}
    assert runs == {site["ids"]["alpha/arc_challenge"], site["ids"]["alpha/sciq"]}


def test_filters_select_like_compare_and_bad_input_is_one_clear_error(site: dict[str, Any]) -> None:
    from prism.compare.select import CompareError
    from prism.publish.site import publish

    uri, out = site["uri"], site["root"] / "arc-only"
    built = publish(settings(uri, "filters.dataset=arc_challenge", "filters.models=[alpha]", f"publish.out={out}",
                             "bootstrap=50"))
    assert built.runs == [site["ids"]["alpha/arc_challenge"]]
    with pytest.raises(CompareError, match="drop the filters"):
        publish(settings(uri, f"runs=[{site['ids']['alpha/sciq']}]", "filters.dataset=sciq", f"publish.out={out}"))
    with pytest.raises(CompareError, match="no FINISHED run of model nobody"):
        publish(settings(uri, "filters.models=[nobody]", f"publish.out={out}"))


def test_a_rebuild_replaces_its_pages_and_never_touches_other_files(site: dict[str, Any]) -> None:
    from prism.compare.select import CompareError
    from prism.publish.site import publish

    uri, out = site["uri"], site["root"] / "rebuilt"
    publish(settings(uri, f"publish.out={out}", "bootstrap=20", "filters.models=[alpha,beta]"))
    beta = out / "runs" / f"{site['ids']['beta/arc_challenge']}.html"
    assert beta.is_file()
    publish(settings(uri, f"publish.out={out}", "bootstrap=20", "filters.models=[alpha]"))
    assert not beta.exists() and (out / "models" / "alpha.html").is_file()  # beta's pages went with its runs
    mine = site["root"] / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(CompareError, match="did not write"):
        publish(settings(uri, f"publish.out={mine}"))
    assert (mine / "notes.txt").read_text() == "keep" and list(mine.iterdir()) == [mine / "notes.txt"]


def test_import_is_light_and_help_works() -> None:
    code = ("import sys, prism.publish, prism.publish.__main__; "
            "print(sorted(m for m in ('mlflow', 'pandas', 'jinja2', 'scipy', 'matplotlib') if m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"
    help_text = subprocess.run([sys.executable, "-m", "prism.publish", "--help"], capture_output=True, text=True,
                               check=True).stdout
    assert "publish.out=public" in help_text and "filters.dataset" in help_text
    assert (CONF_DIR / "publish.yaml").is_file()


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_a_browser_opening_the_site_from_disk_applies_its_stylesheet_and_figures(site: dict[str, Any],
                                                                                   tmp_path: Path) -> None:
    # A page with the site's CSP beside the site's files: the stylesheet paints the page red and a PNG beside
    # it is drawn; the same page loading them from another host would stay white.
    from PIL import Image

    from prism.publish.site import CSP

    out = site["out"]
    Image.new("RGB", (40, 40), (0, 200, 0)).save(out / "probe.png")
    (out / "probe.css").write_text("body { background: #c00000; margin: 0; }")
    (out / "probe.html").write_text(
        f'<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<link rel="stylesheet" href="probe.css"></head><body><img src="probe.png" alt=""></body></html>')
    shot = tmp_path / "probe.png"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=200,200", f"--screenshot={shot}",
                    (out / "probe.html").as_uri()], capture_output=True, timeout=120, check=True)
    image = Image.open(shot).convert("RGB")
    assert image.getpixel((10, 10)) == (0, 200, 0)  # the figure beside the page
    assert image.getpixel((150, 150)) == (192, 0, 0)  # the stylesheet beside the page
    for probe in ("probe.png", "probe.css", "probe.html"):
        (out / probe).unlink()
