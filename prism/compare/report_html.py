"""HTML building blocks for the comparison report: escaping by construction, numbers, tables, the page.

Every piece of text that reaches the page goes through :func:`el` or :func:`text`, which escape it,
unless it is already :class:`Html` made by them. Dataset text, model responses and even run ids are
data, so nothing is ever formatted into markup unescaped. The page has no script and no external
reference: CSS is inline and figures are ``data:`` URIs, so the file reads the same when it is
downloaded, mailed or opened from MLflow's artifact view.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

CSS = """
:root { --ink: #1d2330; --muted: #5b6475; --line: #d9dde5; --band: #f4f6f9; --accent: #2456a6;
        --warn-bg: #fff6e0; --warn-line: #e0b040; --good: #1f7a4d; --bad: #a3342b; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--ink); background: #fff; line-height: 1.5;
       font: 15px/1.5 -apple-system, "Segoe UI", "DejaVu Sans", "Liberation Sans", Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 32px 60px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 40px 0 10px; padding-bottom: 4px; border-bottom: 2px solid var(--line); }
h3 { font-size: 16px; margin: 24px 0 8px; }
p, li { max-width: 62em; }
.sub { color: var(--muted); margin: 0 0 18px; }
nav { font-size: 14px; margin: 0 0 8px; }
nav a { margin-right: 14px; color: var(--accent); text-decoration: none; }
code, pre, .mono { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 13px; }
code { background: var(--band); padding: 1px 4px; border-radius: 3px; overflow-wrap: anywhere; }
pre { background: var(--band); border: 1px solid var(--line); border-radius: 4px; padding: 10px 12px;
      white-space: pre-wrap; overflow-wrap: anywhere; margin: 6px 0 12px; }
.summary { background: var(--band); border-left: 4px solid var(--accent); padding: 12px 20px; margin: 16px 0; }
.summary ul { margin: 6px 0; padding-left: 20px; }
.warning { background: var(--warn-bg); border-left: 4px solid var(--warn-line); padding: 10px 16px; margin: 12px 0; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 14px; }
th, td { border-bottom: 1px solid var(--line); padding: 5px 10px; text-align: left; vertical-align: top; }
th { background: var(--band); font-weight: 600; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.pooled td { font-weight: 600; border-top: 2px solid var(--line); }
tr.significant td { background: #fdf1ec; }
.ci { color: var(--muted); font-size: 12px; }
.differs { background: var(--warn-bg); }
.setup th[scope=row] { background: none; font-weight: 600; width: 14em; white-space: normal; }
.setup td { overflow-wrap: anywhere; }
figure { margin: 12px 0 20px; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: 13px; max-width: 62em; }
.reading { border: 1px solid var(--line); border-radius: 6px; padding: 10px 18px; margin: 12px 0; }
.reading h3 { margin: 4px 0 6px; }
.pattern { display: inline-block; padding: 2px 10px; border-radius: 12px; font-size: 13px; font-weight: 600;
           margin: 0 6px 4px 0; background: #e8eefb; color: var(--accent); }
.pattern.none { background: var(--band); color: var(--muted); }
.note { color: var(--muted); font-size: 13px; }
.response { max-width: 34em; overflow-wrap: anywhere; }
tr.group td { background: var(--band); border-top: 2px solid var(--line); padding-top: 8px; }
table.differences { width: 100%; }
.summary h2 { margin-top: 4px; }
details summary { cursor: pointer; color: var(--accent); }
footer { margin-top: 40px; color: var(--muted); font-size: 13px; }
"""


# Elements without content or end tag (a "</br>" would be read as a second line break).
VOID = frozenset({"br", "img", "meta"})


class Html(str):
    """Markup that is already safe: made by :func:`el`, :func:`text` or :func:`join`, never by hand."""

    __slots__ = ()


def text(value: Any) -> Html:
    """Escape any value's text for use in a page."""
    return value if isinstance(value, Html) else Html(html.escape(str(value), quote=True))


def join(parts: Iterable[Any], separator: str = "") -> Html:
    """Concatenate pieces, escaping those that are not markup yet (``separator`` is escaped too)."""
    return Html(text(separator).join(text(p) for p in parts))


def el(tag: str, *children: Any, **attrs: Any) -> Html:
    """One element: ``el("td", "x<y", cls="num")`` is ``<td class="num">x&lt;y</td>``.

    Children that are None are skipped; ``cls`` stands for ``class`` and ``data_x`` for ``data-x``;
    an attribute whose value is None is left out.
    """
    names = {"cls": "class"}
    attributes = "".join(
        f' {names.get(k, k.replace("_", "-"))}="{text(v)}"' for k, v in attrs.items() if v is not None
    )
    if tag in VOID:
        return Html(f"<{tag}{attributes}>")
    return Html(f"<{tag}{attributes}>{join(c for c in children if c is not None)}</{tag}>")


def missing(value: Any) -> bool:
    """True for None and NaN (an undefined statistic)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def num(value: Any, digits: int = 2, signed: bool = False) -> str:
    """A number rounded for reading (``-`` when undefined); signed ones show ``+`` for direction."""
    if missing(value):
        return "–"
    return f"{float(value):{'+' if signed else ''}.{digits}f}"


def pct(value: Any) -> str:
    """A proportion as a whole percentage (``-`` when undefined)."""
    return "–" if missing(value) else f"{100 * float(value):.0f}%"


def p_value(value: Any) -> str:
    """A p-value: three decimals, or scientific notation below 0.001."""
    if missing(value):
        return "–"
    return f"{float(value):.1e}" if float(value) < 1e-3 else f"{float(value):.3f}"


def with_ci(value: Any, low: Any, high: Any, digits: int = 2, signed: bool = False) -> Html:
    """``value`` followed by its interval in a quieter style: ``0.40 [0.20, 0.60]``."""
    if missing(value):
        return text("–")
    interval = f"[{num(low, digits, signed)}, {num(high, digits, signed)}]"
    return join([num(value, digits, signed), " ", el("span", interval, cls="ci")])


def table(header: Sequence[Any], rows: Iterable[Sequence[Any]], numeric: Sequence[int] = (),
          row_classes: Sequence[str | None] | None = None, **attrs: Any) -> Html:
    """A table with a header row; cells at the ``numeric`` column indexes are right-aligned."""
    head = el("thead", el("tr", *(el("th", h, scope="col") for h in header)))
    body = []
    for index, row in enumerate(rows):
        cells = (el("td", c, cls="num" if i in numeric else None) for i, c in enumerate(row))
        body.append(el("tr", *cells, cls=row_classes[index] if row_classes else None))
    return el("table", head, el("tbody", *body), **attrs)


def png_figure(path: Path, alt: str, caption: str) -> Html:
    """A PNG embedded as a ``data:`` URI, so the page needs no file beside it."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    image = el("img", src=f"data:image/png;base64,{data}", alt=alt)
    return el("figure", image, el("figcaption", caption))


def page(title: str, body: Iterable[Html | None]) -> str:
    """The whole document: UTF-8, inline CSS, no script (None parts, absent sections, are skipped)."""
    return ("<!DOCTYPE html>\n" + el("html", el("head", el("meta", charset="utf-8"),
                                                el("meta", name="viewport", content="width=device-width"),
                                                el("title", title), el("style", Html(CSS))),
                                     el("body", el("main", *body)), lang="en") + "\n")
