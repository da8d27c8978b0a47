"""How PRISM writes a number for a reader: one set of rules for the terminal, the report and the site.

Every table a person reads (``prism.compare.terminal``, the report's and the site's templates through
:mod:`prism.render`, the run summary) formats its numbers here, so a value rounds the same way wherever it
is shown. The places differ only in what they pass: the terminal shows three decimals and ``-`` for an
undefined value, the pages two decimals and an en dash. Pure functions, no imports beyond the standard
library.
"""

from __future__ import annotations

import math
from typing import Any

# What an undefined statistic (NaN, None) is written as on a page; the terminal passes "-".
DASH = "–"
# How the site writes a statistic that cannot exist because the items have no answer key.
NO_KEY = "n/a (no answer key)"


def missing(value: Any) -> bool:
    """True for None and NaN (an undefined statistic)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def number(value: Any, digits: int = 2, signed: bool = False, dash: str = DASH) -> str:
    """A number rounded for reading (``dash`` when undefined); signed ones show ``+`` for direction."""
    if missing(value):
        return dash
    return f"{float(value):{'+' if signed else ''}.{digits}f}"


def percent(value: Any, decimals: int = 0, dash: str = DASH) -> str:
    """A proportion as a percentage: ``percent(0.1234, 1)`` is ``12.3%`` (``dash`` when undefined)."""
    return dash if missing(value) else f"{100 * float(value):.{decimals}f}%"


def p_value(value: Any, sci_digits: int = 1, dash: str = DASH) -> str:
    """A p-value: three decimals, or scientific notation (``sci_digits`` after the point) below 0.001."""
    if missing(value):
        return dash
    number_ = float(value)
    return f"{number_:.{sci_digits}e}" if number_ < 1e-3 else f"{number_:.3f}"


def interval(low: Any, high: Any, digits: int = 2, signed: bool = False, dash: str = DASH) -> str:
    """An interval as ``[low, high]``, each end as :func:`number` writes it."""
    return f"[{number(low, digits, signed, dash)}, {number(high, digits, signed, dash)}]"


def with_interval(value: Any, low: Any, high: Any, digits: int = 2, signed: bool = False, dash: str = DASH) -> str:
    """``value [low, high]`` as plain text (``dash`` alone when the value is undefined)."""
    if missing(value):
        return dash
    return f"{number(value, digits, signed, dash)} {interval(low, high, digits, signed, dash)}"
