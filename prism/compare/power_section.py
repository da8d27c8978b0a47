"""The report's section "What the tests could detect": each test's detectable effect and the ranking's robustness.

The values come from the tables as they are (``shifts``, ``gee_wald``, ``rank_robustness``): the detectable
effects of :mod:`prism.stats.power` and the resampled ranking of :mod:`prism.compare.rank_robustness`. Pure.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prism.compare.comparison_tables import ComparisonTables


def _value(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def power_section(tables: ComparisonTables) -> dict[str, Any]:
    """The section's rows: ``shifts`` (tested steps), ``terms`` (the GEE's fitted terms), ``ranks`` (pairs)."""
    from prism.compare.rank_robustness import rank_note

    shifts = tables.shifts
    tested = shifts[shifts["p"].notna()] if len(shifts) else shifts
    steps = [{"model": r["model"], "step": f"{r['from_condition']} → {r['to_condition']}", "measure": r["measure"],
              "excess": _value(r["excess"]), "p_holm": _value(r["p_holm"]), "shift": bool(r["shift"]),
              "detectable": _value(r.get("detectable_effect"))} for r in tested.to_dict("records")]
    gee = tables.gee_wald
    fitted = gee[gee["chi2"].notna()] if len(gee) else gee
    terms = [{"fit": r["fit"], "effect": r["effect"], "df": int(r["df"]), "p": _value(r["p"]),
              "detectable": _value(r.get("detectable_effect"))} for r in fitted.to_dict("records")]
    ranks = tables.rank_robustness
    pairs = ranks.to_dict("records") if ranks is not None else []
    return {"shifts": steps, "terms": terms, "ranks": pairs,
            "rank_note": rank_note(ranks) if ranks is not None else ""}
