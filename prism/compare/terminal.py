"""The comparison as text for the terminal: the runs, the tables of the CSV files, the top differences.

Each value is printed with its interval beside it so a row reads on its own.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Any

import pandas as pd

from prism import formatting
from prism.compare.by_type import format_consistency_by_type
from prism.compare.comparison_tables import size
from prism.compare.core import ComparisonResult
from prism.compare.differences_file import listed_count
from prism.compare.groups import coverage_lines
from prism.compare.readouts_text import format_readouts, render_table
from prism.compare.tables import cap_note, keyless_labels, pairing_note
from prism.names import LoggedRun
from prism.results.metrics import NO_KEY
from prism.stats.basics import SIGNIFICANCE

# How many rows of the differences table the terminal shows (the CSV has them all).
TOP_DIFFERENCES = 8


def _num(value: Any, digits: int = 3, signed: bool = False) -> str:
    return formatting.number(value, digits, signed, dash="-")


def _p(value: Any) -> str:
    return formatting.p_value(value, sci_digits=2, dash="-")


def _with_ci(value: Any, low: Any, high: Any, signed: bool = False) -> str:
    """``value [low, high]``; differences (which can be negative) are signed so the columns line up."""
    return formatting.with_interval(value, low, high, digits=3, signed=signed, dash="-")


def _snippet(text: Any, width: int = 40) -> str:
    if not isinstance(text, str):
        return "-"
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= width else flat[: width - 3] + "...")


def render(frame: pd.DataFrame) -> str:
    """A plain text table, every column left-aligned (pandas right-aligns text, which hides the intervals)."""
    return render_table(frame)


def format_runs(runs: Sequence[LoggedRun]) -> str:
    """One line per compared run: label, id, dataset, question set, conditions."""
    lines = []
    for run in runs:
        lines.append(f"  {run.label:<20} {run.run_id}  {run.dataset or '?'}"
                     f" n={run.dataset_n or '?'}  question set {run.question_set[:12] or '?'}"
                     f"  conditions {','.join(run.conditions) or '?'}")
    return "\n".join(lines)


def format_sensitivity(table: pd.DataFrame, keyless: Collection[str] = ()) -> str:
    """The sensitivity table with intervals inline; models in ``keyless`` (no answer key) show no accuracy."""
    shown = pd.DataFrame({
        "model": table["model"], "condition": table["condition"],
        "accuracy": [NO_KEY if model in keyless else _num(value)
                     for model, value in zip(table["model"], table["accuracy"], strict=True)],
        "delta_accuracy [95% CI]": [NO_KEY if model in keyless else _with_ci(value, low, high, signed=True)
                                    for model, value, low, high in
                                    zip(table["model"], table["delta_accuracy"], table["delta_ci_low"],
                                        table["delta_ci_high"], strict=True)],
        "mcnemar_p": table["mcnemar_p"].map(_p), "p_holm": table["mcnemar_p_holm"].map(_p),
        "flip_rate [95% CI]": [_with_ci(*r) for r in
                               zip(table["flip_rate"], table["flip_ci_low"], table["flip_ci_high"], strict=True)],
        "detectable |delta|": _detectable(table),
    })
    return render(shown)


def _detectable(table: pd.DataFrame) -> list[str]:
    """Each row's detectable effect (80% power, :mod:`prism.stats.power`); '-' where there is no test."""
    if "detectable_effect" not in table:
        return ["-"] * len(table)
    return ["-" if pd.isna(v) else _num(float(v)) for v in table["detectable_effect"]]


def format_divergence(table: pd.DataFrame) -> str:
    """The divergence table with intervals inline and the four counts as correct-both/a/b/neither."""
    shown = pd.DataFrame({
        "model_a": table["model_a"], "model_b": table["model_b"], "condition": table["condition"],
        "disagreement [95% CI]": [_with_ci(*r) for r in zip(table["disagreement"], table["disagreement_ci_low"],
                                                            table["disagreement_ci_high"], strict=True)],
        "answered": table["disagreement_answered"].map(_num),
        "kappa": table["kappa"].map(_num),
        "both/only_a/only_b/neither": [f"{a}/{b}/{c}/{d}" for a, b, c, d in
                                       zip(table["both_correct"], table["only_a"], table["only_b"],
                                           table["both_wrong"], strict=True)],
        "excess [95% CI]": [_with_ci(*r, signed=True) for r in
                            zip(table["excess"], table["excess_ci_low"], table["excess_ci_high"], strict=True)],
    })
    return render(shown)


def format_differences(table: pd.DataFrame, limit: int = TOP_DIFFERENCES) -> str:
    """The first rows of the differences table, responses shortened."""
    head = table.head(limit)
    shown = pd.DataFrame({
        "models": head["model_a"] + " vs " + head["model_b"], "question_id": head["question_id"],
        "q_disagree": head["question_disagreement"].map(lambda v: _num(v, 2)),
        "condition": head["condition"], "key": head["correct_answer"],
        "a": head["answer_a"], "b": head["answer_b"],
        "response_a": head["response_a"].map(_snippet), "response_b": head["response_b"].map(_snippet),
    })
    return render(shown)


# ---- change beyond noise: shifts, whether the measures agree, the clustered model ----------------


def format_shifts(table: pd.DataFrame) -> str:
    """The shifts table: between, within, excess with its interval, p and Holm p, and the verdict.

    Without repetitions there is no within: the interval is the between's and is printed beside it.
    """
    repeated = table["within"].notna()
    shown = pd.DataFrame({
        "model": table["model"], "axis": table["axis"],
        "step": table["from_condition"] + " -> " + table["to_condition"], "measure": table["measure"],
        "between": [_num(b) if r else _with_ci(b, lo, hi) for b, lo, hi, r in
                    zip(table["between"], table["excess_ci_low"], table["excess_ci_high"], repeated, strict=True)],
        "within": table["within"].map(_num),
        "excess [95% CI]": [_with_ci(e, lo, hi, signed=True) if r else "-" for e, lo, hi, r in
                            zip(table["excess"], table["excess_ci_low"], table["excess_ci_high"], repeated,
                                strict=True)],
        "p": table["p"].map(_p), "p_holm": table["p_holm"].map(_p),
        "shift": ["SHIFT" if s else "-" for s in table["shift"]],
        "detectable": _detectable(table),
    })
    return render(shown)


def format_agreement(table: pd.DataFrame) -> str:
    """Whether the measures find the same shifts, step by step (:func:`prism.compare.noise.measure_agreement`)."""
    from prism.compare.noise import measure_agreement

    agreement = measure_agreement(table)
    measures = [c for c in agreement.columns if c not in ("model", "axis", "to_condition", "agree")]
    shown = pd.DataFrame({"model": agreement["model"], "axis": agreement["axis"], "step": agreement["to_condition"],
                          **{m: ["SHIFT" if v else "-" for v in agreement[m]] for m in measures},
                          "agree": ["yes" if v else "NO" for v in agreement["agree"]]})
    head = (f"The measures agree on {int(agreement['agree'].sum())} of {len(agreement)} steps "
            f"({', '.join(measures)}):")
    return head + "\n" + render(shown)


def format_profile(table: pd.DataFrame) -> str:
    """Each axis's steps in value order, the first shifting value marked, then where each measure first shifts."""
    shown = pd.DataFrame({
        "model": table["model"], "axis": table["axis"], "scale": table["scale"],
        "step": table["from"].astype(str) + " -> " + table["to"].astype(str), "measure": table["measure"],
        "between": table["between"].map(_num),
        "excess [95% CI]": [_with_ci(e, lo, hi, signed=True) if not math.isnan(e) else "-" for e, lo, hi in
                            zip(table["excess"], table["excess_ci_low"], table["excess_ci_high"], strict=True)],
        "p_holm": table["p_holm"].map(_p),
        "shift": ["FIRST SHIFT" if f else "SHIFT" if s else "-" for s, f in zip(table["shift"], table["first_shift"],
                                                                               strict=True)],
    })
    return render(shown)


def format_roles(table: pd.DataFrame) -> str:
    """The roles table: each step's role, its shift verdict, the reading and, for causal steps, ``followed``."""
    shown = pd.DataFrame({
        "model": table["model"], "axis": table["axis"],
        "step": table["from_condition"] + " -> " + table["to_condition"], "measure": table["measure"],
        "role": table["role"], "shift": ["SHIFT" if s else "-" for s in table["shift"]],
        "reading": table["reading"],
        "followed": [f"{_num(f)} (n={n})" if r == "causal" else "-"
                     for f, n, r in zip(table["followed"], table["followed_n"], table["role"], strict=True)],
        "detectable": _detectable(table),
    })
    return render(shown)


def format_ranks(table: pd.DataFrame) -> str:
    """The ranking's robustness per pair: P(a above b), both rank intervals, where the order flips."""
    if table.empty:
        return "  (no two runs on one question set and condition set with an answer key)"
    shown = pd.DataFrame({
        "model_a": table["model_a"], "model_b": table["model_b"], "dataset": table["dataset"],
        "P(a > b)": table["prob_a_above_b"].map(lambda v: _num(v, 3)),
        "rank a": [f"{lo:g}-{hi:g}" if lo != hi else f"{lo:g}"
                   for lo, hi in zip(table["rank_a_low"], table["rank_a_high"], strict=True)],
        "rank b": [f"{lo:g}-{hi:g}" if lo != hi else f"{lo:g}"
                   for lo, hi in zip(table["rank_b_low"], table["rank_b_high"], strict=True)],
        "robust": ["yes" if r else "NOT ROBUST" for r in table["robust"]],
        "flips at": [f or "-" for f in table["flips_at"]],
    })
    return render(shown)


def format_gee(table: pd.DataFrame) -> str:
    """The Wald tests of each fit of the clustered model (``fit=...``), then its notes, as text."""
    if "fit" in table and table["fit"].nunique() > 1:
        return "\n".join(f"fit={fit}:\n" + format_gee(rows.drop(columns="fit"))
                         for fit, rows in table.groupby("fit", sort=False))
    tests = table[table["chi2"].notna()]
    notes = table[table["chi2"].isna()]["effect"]
    lines = []
    if len(tests):
        lines.append(render(pd.DataFrame({"effect": tests["effect"], "chi2": tests["chi2"].map(lambda v: _num(v, 2)),
                                          "df": tests["df"].map(lambda v: str(int(v))), "p": tests["p"].map(_p),
                                          "detectable (logits)": _detectable(tests)})))
    else:
        lines.append("  (no Wald test: the model was not fitted)")
    lines += [f"  {note}" for note in notes]
    return "\n".join(lines)


def format_gee_by_dataset(table: pd.DataFrame) -> str:
    """Per dataset, the Wald tests of its own fit, or why it was not fitted."""
    lines = []
    for (dataset, kind), rows in table.groupby(["dataset", "dataset_type"], sort=False):
        tests = rows[rows["chi2"].notna()]
        failure = [e for e in rows["effect"] if str(e).startswith("not fitted")]
        lines.append(f"  {dataset} ({kind}): " + ("; ".join(
            f"{e} chi2={_num(c, 2)} df={int(d)} p={_p(p)}" for e, c, d, p in
            zip(tests["effect"], tests["chi2"], tests["df"], tests["p"], strict=True)) or
            (failure[0] if failure else "no Wald test")))
    return "\n".join(lines)


def keyless_models(accuracy: pd.DataFrame) -> set[str]:
    """Models whose runs have no answer key: cells observed, yet no accuracy (``tables.accuracy_table``)."""
    return keyless_labels(accuracy)


def format_comparison(result: ComparisonResult) -> str:
    """Everything the terminal shows after a comparison."""
    tables = result.tables
    parts = [f"Compared {len(result.runs)} run(s):", format_runs(result.runs)]
    if result.notes:
        parts += ["", "NOTE: ordered scales shown out of their order:", *[f"  - {note}" for note in result.notes]]
    coverage = coverage_lines(tables.question_sets)
    if coverage:
        parts += ["", coverage[0], *[f"  - {line}" for line in coverage[1:]]]
    if result.mismatches:
        parts += ["", "WARNING: compared despite mismatches (allow_mismatch=true):",
                  *[f"  - {m}" for m in result.mismatches]]
    parts += ["", f"Condition sensitivity against {result.baseline}: 95% paired bootstrap intervals over questions "
                  f"(B={result.n_boot}),\nexact McNemar p with Holm within each model, conditions ranked by effect; "
                  "detectable = the |delta| the test\nhad 80% power to find at its Holm level (no change larger was "
                  "missed with more than 20% chance):",
              format_sensitivity(tables.sensitivity, keyless_models(tables.accuracy))]
    if tables.divergence is not None:
        parts += ["", "Cross-model divergence: UNKNOWN is an answer of its own, 'all' pools the shared conditions,\n"
                      "excess = disagreement - mean of the models' own across-condition disagreement:",
                  format_divergence(tables.divergence)]
        note = pairing_note(tables)
        if note:
            parts.append(note)
        differences = tables.differences if tables.differences is not None else pd.DataFrame()
        # The table holds the first rows only when it was streamed to its file: the counts say how many it lists.
        parts += ["", f"Where the models differ most ({listed_count(tables)} listed differing cells in "
                      "comparison/differences.csv with prompts and full responses):"]
        if cap_note(tables):
            parts.append(cap_note(tables))
        parts.append(format_differences(differences) if len(differences) else "  (nowhere: every answer agrees)")
    if len(tables.shifts):
        parts += ["", f"Shifts against {result.baseline} (comparison/shifts.csv): between = mean difference of cross "
                      "pairs, within = the model's\nown difference between repetitions, excess = between - within "
                      f"with a 95% two-level bootstrap interval (B={result.n_boot});\none-sided permutation p, Holm "
                      "over each model's steps per measure; SHIFT = excess > 0 and p_holm < "
                      f"{SIGNIFICANCE}:",
                  format_shifts(tables.shifts)]
        if tables.shifts["measure"].nunique() > 1:
            parts += ["", format_agreement(tables.shifts)]
    if len(tables.profile):
        parts += ["", "Profiles (comparison/profile.csv): each axis's steps in value order -- from the baseline on a "
                      "nominal axis,\nfrom the previous value on an ordered one; FIRST SHIFT marks the first value "
                      "where the measure shifts:", format_profile(tables.profile)]
    if len(tables.roles):
        from prism.compare.role_tables import roles_note

        parts += ["", "Roles (comparison/roles.csv): causal when a step moves the correct answer of some question, "
                      "invariant otherwise;\nexpected = causal and shifted, missed = causal, no shift, spurious = "
                      "invariant and shifted, stable = invariant, no shift;\nfollowed = share of a causal step's "
                      "answers that are its new correct option. " + roles_note(tables.roles),
                  format_roles(tables.roles)]
    readings = tables.readings
    with_probs = readings[readings["n_label_probs"] > 0] if readings is not None and len(readings) else None
    if with_probs is not None and len(with_probs):
        from prism.compare.label_prob_tables import format_readings

        parts += ["", "Two readings (runs with generation.label_probs=true): parsed accuracy beside the accuracy of "
                      "the likeliest first token's option,\nagreement of the two where both exist, label mass, mean TV "
                      f"distance to {result.baseline}'s option distribution; the "
                      f"{size(tables.reading_disagreements)} cells where they part are in "
                      "comparison/reading_disagreements.csv:", format_readings(with_probs)]
    with_cloze = readings[readings["n_cloze"].notna()] if readings is not None and len(readings) else None
    if with_cloze is not None and len(with_cloze):
        from prism.compare.cloze_tables import format_cloze_readings

        parts += ["", "Three readings (runs with generation.cloze=true; comparison/readings.csv): parsed, label "
                      "probabilities (labelp) and the cloze reading (acc, acc_norm as lm-evaluation-harness scores "
                      "them),\nand agreement of the parsed and cloze answers; the "
                      f"{size(tables.cloze_disagreements)} cells where they part are in "
                      "comparison/cloze_disagreements.csv:",
                  format_cloze_readings(with_cloze)]
    parts += format_readouts(tables.readouts(), result.n_boot)
    if True:
        from prism.compare.rank_robustness import rank_note

        parts += ["", "Ranking over the prompts (comparison/rank_robustness.csv): questions and one condition "
                      "resampled together;\nP(a > b) = share of resamples where a is more accurate, rank intervals "
                      "95%, flips = conditions where b beats a:", format_ranks(tables.rank_robustness),
                  rank_note(tables.rank_robustness)]
    if True:
        parts += ["", "Clustered model (comparison/gee_wald.csv): consistency with the baseline's modal answer, "
                      "global Wald chi-square per effect,\np from Hotelling's T-squared reference over the question "
                      "clusters:", format_gee(tables.gee_wald)]
    by_dataset = tables.gee_by_dataset
    if by_dataset is not None and by_dataset["dataset"].nunique() > 1:
        parts += ["", "Within each dataset (comparison/gee_by_dataset.csv): the same model on model and the "
                      "condition term:", format_gee_by_dataset(by_dataset)]
    if len(tables.consistency_by_type):
        parts += ["", "Mean consistency with the baseline's answer per family and dataset type "
                      "(comparison/consistency_by_type.csv; n_ = questions):",
                  format_consistency_by_type(tables.consistency_by_type)]
    parts += ["", f"Comparison run {result.run_id} (experiment id {result.experiment_id}); files in "
                  f"{result.output_dir / 'comparison'}",
              f"Report page: {result.output_dir / 'comparison' / 'report.html'} (also in the run's artifacts)",
              f"Open it: mlflow ui --backend-store-uri {result.tracking_uri}",
              f"         then http://127.0.0.1:5000/#/experiments/{result.experiment_id}/runs/{result.run_id}"]
    return "\n".join(parts)
