"""The site's comparison pages and their trace: every number links to the cells it was computed from.

Two scripted replay models (two repetitions each, one failed request, one response with markup) are run,
compared with two shift measures, and published. Each number of the comparison page must link to a static
page beside it whose cells are exactly the ones behind the number (same run, condition, count), showing the
prompt as sent, the raw response, the parser rule and the reading; the run page's numbers link there too.
A browser opening a trace page from disk must apply the site's stylesheet under its Content-Security-Policy.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pandas as pd
import pytest
from compare.test_compare import compose_compare
from conftest import compose_config, run_overrides

from prism.compare.core import compare
from prism.questions import freeze_question_set
from prism.run.pipeline import run
from publish.test_publish import pages, parse, settings, text_of

N, R = 4, 2
MARKUP = '<b>B</b> & <script>alert("x")</script>'
READOUT_SECTIONS = ("scorecard", "sensitivity-axes", "measure-agreement", "divergence-noise")


def lines(questions: list[Any], model: str) -> list[dict[str, Any]]:
    """alpha answers the key, except at P1 (the first wrong option); beta the first wrong option throughout."""
    found = []
    for condition in ("P0", "P1", "P2", "P3", "P4"):
        for i, q in enumerate(questions):
            wrong = next(label for label in q.labels if label != q.answer)
            for r in range(R):
                answer = q.answer if model == "alpha" and condition != "P1" else wrong
                line: dict[str, Any] = {"question_id": q.question_id, "condition": condition, "repetition": r,
                                        "response": answer if (i + r) % 3 else f"The answer is {answer}."}
                if model == "beta" and condition == "P2" and i == 0 and r == 1:
                    line = {**line, "response": MARKUP}
                if model == "alpha" and condition == "P3" and i == 1 and r == 0:
                    line = {k: v for k, v in line.items() if k != "response"} | {"error": "scripted timeout"}
                found.append(line)
    return found


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, Any]:
    from prism.publish.site import publish

    root = tmp_path_factory.mktemp("trace")
    questions = list(freeze_question_set("arc_challenge", "test", N, 0, data_dir, root / "frozen").questions)
    runs = {}
    for model in ("alpha", "beta"):
        path = root / f"{model}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines(questions, model)), encoding="utf-8")
        cfg = compose_config([*run_overrides(root, data_dir), "model=replay", f"model.path={path}",
                              f"model.name={model}", f"dataset.n={N}", "generation=sampled",
                              f"generation.repetitions={R}"])
        runs[model] = run(cfg, output_dir=root / f"run-{model}")
    uri = f"sqlite:///{root}/mlflow.db"
    ids = ",".join(runs[m].run_id for m in ("alpha", "beta"))
    comparison = compare(compose_compare([f"tracking.uri={uri}", f"runs=[{ids}]", "bootstrap=50", "permutations=50",
                                          "measures=[answer,token_jaccard]"]), output_dir=root / "cmp")
    out = root / "site"
    site = publish(settings(uri, f"publish.out={out}", "bootstrap=50"))
    return {"out": out, "runs": runs, "comparison": comparison, "site": site}


def resolve(page: Path, href: str) -> tuple[Path, str]:
    parts = urlsplit(href)
    assert not parts.scheme, href
    return ((page.parent / unquote(parts.path)).resolve() if parts.path else page), parts.fragment


def cells_of(page: Path) -> list[tuple[str, str, str, int, bool]]:
    """(run, question, condition, repetition, failed) of every cell a trace page lists."""
    found = []
    for row in parse(page).iter("tr"):
        if row.get("data-cell"):
            run_id, question, condition, repetition = row.get("data-cell").split("|")
            found.append((run_id, question, condition, int(repetition), row.get("data-failed") == "true"))
    return found


def comparison_page(built: dict[str, Any]) -> Path:
    (page,) = (built["out"] / "comparisons").glob("*.html")
    return page


def test_the_index_lists_the_comparison_and_its_page_has_every_readout(built: dict[str, Any]) -> None:
    page = comparison_page(built)
    assert page.name == f"{built['comparison'].run_id}.html"
    index = parse(built["out"] / "index.html")
    assert f"comparisons/{page.name}" in [a.get("href") for a in index.iter("a")]
    ids = {e.get("id") for e in parse(page).iter() if e.get("id")}
    assert set(READOUT_SECTIONS) <= ids


def test_every_number_on_the_comparison_page_links_to_the_cells_behind_it(built: dict[str, Any]) -> None:
    page = comparison_page(built)
    tree = parse(page)
    ids = {e.get("id") for e in tree.iter() if e.get("id")}
    checked = 0
    for td in tree.iter("td"):
        if td.get("class") != "num" or text_of(td) in ("–", ""):
            continue
        links = [a.get("href") for a in td.iter("a")]
        assert links, ("a number without a link", text_of(td))
        target, fragment = resolve(page, links[0])
        assert target.is_file(), links[0]
        if fragment:
            assert target == page and fragment in ids
        checked += 1
        if td.get("data-score") in ("accuracy", "recovery", "compliance") and td.get("data-at") != "all":
            cells = [c for c in cells_of(target) if not c[4]]
            assert len(cells) == int(td.get("data-cells"))  # exactly the observed cells the number counts
            assert {(c[0], c[2]) for c in cells} == {(td.get("data-run"), td.get("data-at"))}
        elif td.get("data-score") == "consistency":  # the step from the baseline
            assert {c[2] for c in cells_of(target)} == {"P0", td.get("data-at")}
        elif td.get("data-score") and td.get("data-at") == "all":  # a run's every condition, one page each
            counts = [int(text_of(e)) for e in parse(target).iter("td") if e.get("data-condition")]
            failed = 1 if td.get("data-run") == built["runs"]["alpha"].run_id else 0  # listed, never counted
            assert sum(counts) == int(td.get("data-cells")) + failed
        elif td.get("data-step"):
            start, to = td.get("data-step").split(">")
            assert {c[2] for c in cells_of(target)} == {start, to}
        elif td.get("data-pair"):
            run_a, run_b = td.get("data-pair").split(">")
            assert {(c[0], c[2]) for c in cells_of(target)} == {(run_a, td.get("data-at")),
                                                              (run_b, td.get("data-at"))}
    assert checked > 60


def test_the_comparison_page_renders_the_rank_table_of_its_comparison(built: dict[str, Any]) -> None:
    # The page shows comparison/rank_robustness.csv as the comparison logged it: each pair, its probability,
    # both rank intervals (linked to each run's cells) and whether the order is robust to the prompt.
    from prism.formatting import number

    page = comparison_page(built)
    tree = parse(page)
    (section,) = [e for e in tree.iter("section") if e.get("id") == "ranking"]
    assert "#ranking" in [a.get("href") for a in tree.iter("a")]  # the page's own navigation
    table = built["comparison"].tables.rank_robustness
    rows = [tr for tr in section.iter("tr") if tr.get("data-pair-rank")]
    assert len(rows) == len(table) == 1
    expected = table.iloc[0]
    assert rows[0].get("data-pair-rank") == f"{expected['model_a']}>{expected['model_b']}"
    assert (expected["model_a"], expected["model_b"]) == ("alpha", "beta")  # alpha is more accurate
    cells = {td.get("data-rank-interval") or td.get("data-rank-prob") or "": text_of(td) for td in rows[0].iter("td")}
    assert cells[str(expected["prob_a_above_b"])] == number(expected["prob_a_above_b"])
    for side in ("a", "b"):
        low, high = expected[f"rank_{side}_low"], expected[f"rank_{side}_high"]
        assert cells[side] == (f"{low:g}" if low == high else f"{low:g}–{high:g}")
    links = {td.get("data-rank-interval"): [a.get("href") for a in td.iter("a")] for td in rows[0].iter("td")
             if td.get("data-rank-interval")}
    for side, model in (("a", "alpha"), ("b", "beta")):
        target, _ = resolve(page, links[side][0])
        assert target.is_file() and built["runs"][model].run_id in target.read_text(encoding="utf-8")
    robust = bool(expected["robust"])
    assert ("not robust to the prompt" in text_of(rows[0])) is not robust
    assert (rows[0].get("class") == "significant") is not robust
    assert "nan" not in text_of(rows[0])  # an empty "flips at" read back from the CSV is shown as a dash


def test_a_trace_page_shows_prompt_raw_response_parse_method_and_reading(built: dict[str, Any]) -> None:
    out, beta = built["out"], built["runs"]["beta"]
    responses = pd.read_json(beta.output_dir / "responses" / "responses.jsonl", lines=True)
    scored = pd.read_json(beta.output_dir / "results" / "scored.jsonl", lines=True)
    cell = responses[(responses["condition"] == "P2") & (responses["response"] == MARKUP)].iloc[0]
    (page,) = [p for p in (out / "trace").glob("cells-*.html")
               if (beta.run_id, cell["question_id"], "P2", 1, False) in cells_of(p)]
    source = page.read_text(encoding="utf-8")
    assert "<script" not in source and "&lt;script&gt;" in source  # the response is text, never markup
    tree = parse(page)
    assert " ".join(cell["prompt"].split()) in [text_of(d.find("div")) for d in tree.iter("details")]
    (row,) = [r for r in tree.iter("tr") if r.get("data-cell") == f"{beta.run_id}|{cell['question_id']}|P2|1"]
    record = scored[(scored["question_id"] == cell["question_id"]) & (scored["condition"] == "P2")
                    & (scored["repetition"] == 1)].iloc[0]
    shown = [text_of(td) for td in row.iter("td")]
    assert shown[1] == " ".join(MARKUP.split()) and shown[2] == record["method"]
    answer = record["answer"] if isinstance(record["answer"], str) else "UNKNOWN"
    assert shown[4].startswith(answer) and f"key {record['correct_answer']}" in shown[4]


def test_a_failed_request_is_listed_but_not_counted(built: dict[str, Any]) -> None:
    alpha = built["runs"]["alpha"].run_id
    failed = [(p, c) for p in (built["out"] / "trace").glob("cells-*.html") for c in cells_of(p) if c[4]]
    assert [(c[0], c[2], c[3]) for _, c in failed] == [(alpha, "P3", 0)]
    page = failed[0][0]
    observed = [int(e.get("data-observed")) for e in parse(page).iter("span") if e.get("data-observed")]
    assert observed == [N * R - 1]


def test_the_run_pages_numbers_link_to_their_cells(built: dict[str, Any]) -> None:
    out, alpha = built["out"], built["runs"]["alpha"].run_id
    page = out / "runs" / f"{alpha}.html"
    linked = 0
    for td in parse(page).iter("td"):
        metric = td.get("data-metric") or ""
        if td.get("data-run") != alpha or "/" not in metric or metric.startswith("consistency"):
            continue
        (href,) = [a.get("href") for a in td.iter("a")]
        target, _ = resolve(page, href)
        assert {c[2] for c in cells_of(target)} == {metric.split("/")[-1]}
        linked += 1
    assert linked >= 10
    index = parse(out / "index.html")
    hrefs = [a.get("href") for td in index.iter("td") if td.get("data-run") == alpha for a in td.iter("a")]
    assert hrefs and all(h.startswith("trace/run-") for h in hrefs)  # the leaderboard: each run's cells


def test_every_new_page_is_strict_html5_with_the_csp_and_its_links_resolve(built: dict[str, Any]) -> None:
    out = built["out"]
    new = [p for p in pages(out) if p.parent.name in ("trace", "comparisons")]
    assert len(new) > 10
    for path in new:
        tree = parse(path)
        assert not tree.findall(".//script")
        (csp,) = [m.get("content") for m in tree.iter("meta") if m.get("http-equiv") == "Content-Security-Policy"]
        assert "default-src 'none'" in csp
        for element in tree.iter():
            href = element.get("href") if element.tag in ("a", "link") else None
            if href:
                assert resolve(path, href)[0].is_file(), (path, href)
    manifest = (out / ".prism-site").read_text(encoding="utf-8").splitlines()
    assert {str(p.relative_to(out)) for p in new} <= set(manifest)  # a rebuild replaces them too


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_a_browser_shows_a_trace_page_from_disk_with_the_sites_stylesheet(built: dict[str, Any],
                                                                          tmp_path: Path) -> None:
    # The page with the failed request: its row is painted --warn-bg and its table heads --band by ../style.css,
    # which the page's CSP must let through when it is opened from disk. Without the stylesheet both stay white.
    from PIL import Image

    (page,) = {p for p in (built["out"] / "trace").glob("cells-*.html") if any(c[4] for c in cells_of(p))}
    shot = tmp_path / "trace.png"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1000,2400", f"--screenshot={shot}",
                    page.as_uri()], capture_output=True, timeout=120, check=True)
    colours = {colour for _, colour in Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20)}
    assert (0xFF, 0xF6, 0xE0) in colours  # the failed request's row (.differs)
    assert (0xF4, 0xF6, 0xF9) in colours  # the table heads (th, --band)
