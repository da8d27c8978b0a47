"""Compare the parser with a person on the public response table, per model family.

Reads ``tests/data/parser_cases/*.jsonl`` (one file per public source: real responses of instruction-tuned
models from public evaluation logs, each read by a person before parsing; see ``tests/data/README.md``),
parses every response with the installed ``prism.parsing`` and prints:

- per family: cases, clear cases, clearly answered ones, how many of those the parser recovers as the
  person read them, how many it leaves UNKNOWN, and how many clear cases it reads as a label the person
  did not see (misread);
- the count of each parse method, overall and per family;
- every case where parser and person disagree (for an unclear case: the parser names a label other
  than the person's tentative one), with the person's note.

Cases were collected in rounds (the ``round`` field; a case without one is from round 1); ``--round N``
restricts every table to one round, and the full output ends with a one-line summary per round.

Run it before and after a parser change to get reproducible numbers:

    PYTHONPATH=. python scripts/parser_evidence.py
    PYTHONPATH=. python scripts/parser_evidence.py --round 2 --quiet
    PYTHONPATH=. python scripts/parser_evidence.py --json /tmp/evidence.json
    PYTHONPATH=. python scripts/parser_evidence.py --round 3 --group-by style
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from prism.parsing import METHODS, PARSER_VERSION, parse_response
from prism.types import Parsed

DEFAULT_CASES = Path(__file__).resolve().parent.parent / "tests" / "data" / "parser_cases"


def _parse(case: dict[str, Any]) -> Parsed:
    """Parse a case; ``finish_reason`` is passed only when the case has one and the parser takes it."""
    import inspect

    extra: dict[str, Any] = {}
    if case.get("finish_reason") is not None and "finish_reason" in inspect.signature(parse_response).parameters:
        extra["finish_reason"] = case["finish_reason"]
    return parse_response(case["response"], case["labels"], case["options"], **extra)


def _disagrees(case: dict[str, Any], parsed: Parsed) -> bool:
    if case["person_clear"]:
        return parsed.displayed != case["person_displayed"]
    return parsed.displayed not in (None, case["person_displayed"])


def case_round(case: dict[str, Any]) -> int:
    """The collection round of a case; cases from before the field existed are round 1."""
    return int(case.get("round", 1))


def evaluate(cases: list[dict[str, Any]], group: str = "family") -> dict[str, Any]:
    """Parse every case and tally agreement with the person, per family (or ``group`` field), per round and overall."""
    rows: dict[str, Counter[str]] = defaultdict(Counter)
    rounds: dict[str, Counter[str]] = defaultdict(Counter)
    methods: dict[str, Counter[str]] = defaultdict(Counter)
    disagreements: list[dict[str, Any]] = []
    for case in cases:
        parsed = _parse(case)
        key = str(case.get(group) or "-")
        for row in (rows[key], rows["ALL"], rounds[f"round {case_round(case)}"]):
            row["cases"] += 1
            if case["person_clear"]:
                row["clear"] += 1
                if case["person_displayed"] is not None:
                    row["answered"] += 1
                    if parsed.displayed == case["person_displayed"]:
                        row["recovered"] += 1
                    elif parsed.displayed is None:
                        row["unknown"] += 1
                if parsed.displayed not in (None, case["person_displayed"]):
                    row["misread"] += 1
        for name in (key, "ALL"):
            methods[name][parsed.method] += 1
        if _disagrees(case, parsed):
            disagreements.append(
                {
                    "id": case["id"],
                    "family": case["family"],
                    "person": case["person_displayed"],
                    "person_clear": case["person_clear"],
                    "person_reason": case["person_reason"],
                    "parser": parsed.displayed,
                    "method": parsed.method,
                    "note": case.get("person_note"),
                    "tail": case["response"][-160:],
                }
            )
    return {
        "parser_version": PARSER_VERSION,
        "group": group,
        "families": {k: dict(v) for k, v in rows.items()},
        "rounds": {k: dict(v) for k, v in sorted(rounds.items())},
        "methods": {k: dict(v) for k, v in methods.items()},
        "disagreements": disagreements,
    }


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:5.1f}%" if whole else "    -"


def render(result: dict[str, Any]) -> str:
    """The result as plain-text tables."""
    fams = sorted((k for k in result["families"] if k != "ALL"), key=lambda k: -result["families"][k]["cases"])
    lines = [f"parser version {result['parser_version']}", ""]
    head = f"{result.get('group', 'family')[:11]:<12}{'cases':>6}{'clear':>6}{'answered':>9}"
    head += f"{'recovered':>10}{'rate':>7}"
    head += f"{'UNKNOWN':>8}{'misread':>8}"
    lines += [head, "-" * len(head)]
    for fam in [*fams, "ALL"]:
        r = Counter(result["families"][fam])
        lines.append(
            f"{fam:<12}{r['cases']:>6}{r['clear']:>6}{r['answered']:>9}{r['recovered']:>10}"
            f"{_pct(r['recovered'], r['answered']):>7}{r['unknown']:>8}{r['misread']:>8}"
        )
    seen = [m for m in METHODS if m in result["methods"]["ALL"]]
    seen += sorted(m for m in result["methods"]["ALL"] if m not in METHODS)
    lines += ["", f"{'method':<12}" + "".join(f"{f[:9]:>10}" for f in [*fams, "ALL"])]
    for method in seen:
        counts = [result["methods"][f].get(method, 0) for f in [*fams, "ALL"]]
        lines.append(f"{method:<12}" + "".join(f"{c:>10}" for c in counts))
    lines += [""]
    for name, counts in result["rounds"].items():
        r = Counter(counts)
        lines.append(
            f"{name}: {r['cases']} cases, {r['answered']} clearly answered, {r['recovered']} recovered"
            f" ({_pct(r['recovered'], r['answered']).strip()}), {r['unknown']} UNKNOWN, {r['misread']} misread"
        )
    lines += ["", f"disagreements: {len(result['disagreements'])}"]
    for d in result["disagreements"]:
        person = d["person"] if d["person"] is not None else f"UNKNOWN({d['person_reason']})"
        clear = "" if d["person_clear"] else " (unclear)"
        lines.append(f"- {d['id']}: person {person}{clear}, parser {d['parser']} by {d['method']}")
        if d["note"]:
            lines.append(f"    person: {d['note']}")
        lines.append(f"    ...{d['tail']!r}")
    return "\n".join(lines)


def main() -> None:
    """Command line entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=Path, default=DEFAULT_CASES,
                    help="a public case file (JSONL), or a directory of them")
    ap.add_argument("--round", type=int, help="only the cases of this collection round")
    ap.add_argument("--json", type=Path, help="also write the full result as JSON here")
    ap.add_argument("--quiet", action="store_true", help="leave out the list of disagreements")
    ap.add_argument("--group-by", default="family",
                    help="the case field the tables are split by (family; style for round 3's answer styles)")
    args = ap.parse_args()
    files = sorted(args.cases.glob("*.jsonl")) if args.cases.is_dir() else [args.cases]
    lines = [line for path in files for line in path.read_text(encoding="utf-8").split("\n")]
    cases = [json.loads(line) for line in lines if line.strip()]
    if args.round is not None:
        cases = [case for case in cases if case_round(case) == args.round]
        if not cases:
            ap.error(f"no case of round {args.round} in {args.cases}; a run without --round lists the rounds present")
    result = evaluate(cases, args.group_by)
    text = render(result)
    if args.quiet:
        text = text.split("\ndisagreements:")[0] + f"\ndisagreements: {len(result['disagreements'])}"
    print(text)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
