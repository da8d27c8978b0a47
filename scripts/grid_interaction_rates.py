"""How often the clustered model flags the interaction of two grid axes, with and without a planted one.

Simulates the responses of a ``labels x option_order`` grid (by default the full 5 x 5 one: 24 cells
besides the baseline) on synthetic question clusters and fits the GEE of ``comparison/gee_wald.csv``
(:func:`prism.compare.noise.gee_table`) to each simulated run, then prints the share of runs whose
``labels:option_order`` Wald test rejects at 5%, twice from the same fit: with the p-value the table
reports (Hotelling's T-squared reference, F with the question clusters' degrees of freedom) and with the
chi-square reference that table used before (``scipy.stats.chi2.sf`` of its chi2 and df).

Responses: question intercept u ~ N(0, 0.5) on the logit of keeping the baseline's answer, a main effect
per axis value, and (when planted) an extra ``--effect`` in the single cell
``labels.numbers__option_order.reverse``; the baseline cell always gives the key.

    PYTHONPATH=. python scripts/grid_interaction_rates.py --seeds 100 --questions 30 --repetitions 3
    PYTHONPATH=. python scripts/grid_interaction_rates.py --labels numbers --orders reverse,rotate  # 2 x 3

A run the model could not fit (separation, a singular covariance) is counted apart, not as a rejection.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd
from scipy.stats import chi2

from prism.compare.noise import gee_table
from prism.compare.tables import ModelCells
from prism.conditions import ConditionSet, condition_set_from_config

LABEL_EFFECT = {"P0": 0.0, "numbers": -0.3, "lower": -0.1, "roman": -0.6, "symbols": -0.4}
ORDER_EFFECT = {"P0": 0.0, "reverse": -0.5, "rotate": -0.2, "swap_ends": -0.3, "shuffle": -0.4}
LABELS = ("A", "B", "C", "D")


def grid_set(labels: list[str], orders: list[str]) -> ConditionSet:
    """The grid condition set restricted to the given non-baseline values, composed as ``python -m prism`` does."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from prism.conf import register_configs

    register_configs()
    dropped = [f"~conditions.variants.{v}" for v in LABEL_EFFECT if v != "P0" and v not in labels]
    dropped += [f"~conditions.variants.{v}" for v in ORDER_EFFECT if v != "P0" and v not in orders]
    with initialize_config_module("prism.conf", version_base="1.3"):
        cfg = compose("config", ["conditions=grid", "conditions.axes=[labels,option_order]", *dropped])
    conditions = OmegaConf.to_container(cfg.conditions, resolve=True)
    assert isinstance(conditions, dict)
    return condition_set_from_config(conditions)


def simulate(cs: ConditionSet, n: int, reps: int, effect: float, seed: int) -> ModelCells:
    """One run's cells: canonical answers drawn per question, condition and repetition."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(n):
        u = rng.normal(0.0, 0.5)
        for condition in cs.names:
            levels = cs.levels[condition]
            planted = (levels["labels"], levels["option_order"]) == ("numbers", "reverse")
            eta = 1.2 + u + LABEL_EFFECT[levels["labels"]] + ORDER_EFFECT[levels["option_order"]]
            eta += effect if planted else 0.0
            for r in range(reps):
                keep = condition == cs.baseline or rng.random() < 1 / (1 + math.exp(-eta))
                rows.append({"question_id": f"q{q}", "condition": condition, "repetition": r,
                             "category": "A" if keep else str(rng.choice(LABELS[1:]))})
    return ModelCells("m", f"run{seed}", tuple(cs.names), pd.DataFrame(rows), model="m", axis=cs.name,
                      dataset="synthetic", families=cs.families, axes=cs.axes, grid=cs.grid, levels=cs.levels)


def main() -> None:
    """Print the rejection rate of the interaction term without and with the planted interaction."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--effect", type=float, default=-1.5)
    parser.add_argument("--labels", default="numbers,lower,roman,symbols")
    parser.add_argument("--orders", default="reverse,rotate,swap_ends,shuffle")
    args = parser.parse_args()
    cs = grid_set(args.labels.split(","), args.orders.split(","))
    print(f"grid {len(cs.conditions)} cells, {args.questions} questions, {args.repetitions} repetition(s), "
          f"{args.seeds} seeds per scenario")
    for name, effect in (("no interaction", 0.0), (f"planted {args.effect:+g} in one cell", args.effect)):
        started, rejected, by_chi2, unfitted, df = time.perf_counter(), 0, 0, 0, set()
        for seed in range(args.seeds):
            table = gee_table([simulate(cs, args.questions, args.repetitions, effect, 1000 + seed)], "P0")
            row = table[table["effect"] == "labels:option_order"]
            if row.empty:
                unfitted += 1
                continue
            df.add(int(row["df"].iloc[0]))
            rejected += bool(row["p"].iloc[0] < 0.05)
            by_chi2 += bool(chi2.sf(row["chi2"].iloc[0], row["df"].iloc[0]) < 0.05)
        fitted = args.seeds - unfitted
        rate, old = (rejected / fitted, by_chi2 / fitted) if fitted else (math.nan, math.nan)
        print(f"{name:<28} rejected at 5%: {rejected}/{fitted} fitted ({rate:.3f}; chi-square reference "
              f"{by_chi2}/{fitted}, {old:.3f}); not fitted: {unfitted}; interaction df {sorted(df)}; "
              f"{time.perf_counter() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
