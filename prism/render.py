"""The one HTML renderer of PRISM: Jinja2 templates shipped in ``prism/templates/``, escaped by default.

The comparison report (:mod:`prism.compare.report`) and the published site (:mod:`prism.publish`) are
both rendered here, from the same section templates (``prism/templates/sections/``). Autoescaping is
on for every template, so dataset text, model responses and run ids are always text on the page; the
only markup is the templates'. Numbers are written by :mod:`prism.formatting` through the filters
registered below, so a value rounds the same on a page as in the terminal.

Jinja2 is imported when the first page is rendered, never at ``--help``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from prism import formatting

if TYPE_CHECKING:
    import jinja2


def _finalize(value: Any) -> Any:
    """Print nothing for None, as an absent value (Jinja would print ``None``)."""
    return "" if value is None else value


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The template environment: package templates, autoescape on, undefined names an error."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("prism", "templates"),
        autoescape=True,  # every template, whatever its file name
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize,
        keep_trailing_newline=True,
    )
    env.filters["num"] = formatting.number
    env.filters["pct"] = formatting.percent
    env.filters["pval"] = formatting.p_value
    env.tests["missing"] = formatting.missing
    env.globals["NO_KEY"] = formatting.NO_KEY
    env.globals["zip"] = zip
    return env


def render(template: str, **context: Any) -> str:
    """Render ``prism/templates/<template>`` with ``context``.

    Raises:
        jinja2.UndefinedError: If the template uses a name the context lacks (a programming error).
    """
    return environment().get_template(template).render(**context)
