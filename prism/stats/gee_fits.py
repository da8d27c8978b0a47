"""Which clustered models a comparison fits: by dataset, by dataset type, and within each dataset.

The binomial GEE of consistency (:mod:`prism.stats.gee`) has the dataset as a factor. Comparing objective with
subjective datasets (``dataset.type``) asks for dataset type as a factor too, but a dataset has one type, so
the two are confounded: dataset type is a function of dataset, and a model holding both cannot estimate
the type once the datasets are in it. As the robustness paper PRISM follows does, two models are fitted
one after the other then:

- ``fit=dataset``: model, the condition term and dataset, with their interactions;
- ``fit=dataset_type``: the same with dataset type in place of dataset.

When dataset type does not vary (every dataset objective, say) only the dataset fit is made, with a note;
when it varies within a dataset (a dataset run under both types) the two are not confounded and one
fit holds both (``fit=dataset+dataset_type``). Each fit lists every planned term, fitted or dropped with
its reason (:meth:`prism.stats.gee.GeeResult.table`).

A fit that perfect separation stops (a level of the condition term with every response consistent, or none,
somewhere in the data: its logit is infinite) is followed by the same fit without the condition term's
separated levels, named ``<fit> without separated`` and saying in a note which levels it left out and why,
so the families that do vary still get their test; the unfitted model stays in the table, as it was.

``by_dataset``: the same model within each dataset alone (model, the condition term and their
interaction): the condition term's effect per dataset (the paper's Table 5).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from prism.stats import gee

FIT_COLUMNS = ("fit", *gee.WALD_COLUMNS)
BY_DATASET_COLUMNS = ("dataset", "dataset_type", *gee.WALD_COLUMNS, "n_responses", "n_clusters")


def planned_fits(outcomes: pd.DataFrame) -> list[tuple[str, tuple[str, ...]]]:
    """The fits to make: (name, the dataset factors it holds), in the order they are written.

    Dataset type confounded with dataset (it varies, and each dataset has one type): two fits. Not varying:
    the dataset fit alone. Varying within a dataset: one fit with both factors.
    """
    if outcomes.empty or outcomes["dataset_type"].nunique() < 2:
        return [("dataset", ("dataset",))]
    if (outcomes.groupby("dataset", sort=False)["dataset_type"].nunique() == 1).all():
        return [("dataset", ("dataset",)), ("dataset_type", ("dataset_type",))]
    return [("dataset+dataset_type", ("dataset_type", "dataset"))]


def fit_all(outcomes: pd.DataFrame, notes: Sequence[str] = (), axes: Sequence[str] = (),
            header: str = "") -> pd.DataFrame:
    """Every planned fit's table, one after the other, with its name in ``fit`` (``comparison/gee_wald.csv``).

    Args:
        outcomes: :func:`prism.stats.gee.consistency_outcomes`' rows (with ``dataset_type``).
        notes: Sentences about the data, carried into each fit.
        axes: A grid's axes (see :func:`prism.stats.gee.fit_consistency_gee`).
        header: A sentence put first in each fit's notes (what was modelled and how).

    Returns:
        Columns :data:`FIT_COLUMNS`.
    """
    plan = planned_fits(outcomes)
    frames = []
    for name, factors in plan:
        result = gee.fit_consistency_gee(outcomes, notes, axes, dataset_factors=factors)
        if header:
            result.notes.insert(0, header.format(result=result))
        if len(plan) == 1 and name == "dataset" and len(outcomes):
            types = ", ".join(dict.fromkeys(outcomes["dataset_type"]))
            result.notes.append(f"one dataset type in the selected runs ({types}): no dataset_type fit")
        frames.append(result.table().assign(fit=name))
        refit = _without_separated(outcomes, result, notes, axes, factors, header)
        if refit is not None:
            frames.append(refit.table().assign(fit=f"{name} without separated"))
    return pd.concat(frames, ignore_index=True)[list(FIT_COLUMNS)]


def separated_levels(outcomes: pd.DataFrame, term: str, factors: Sequence[str]) -> list[str]:
    """Levels of the condition term whose responses are all consistent, or none, alone or with one factor's level.

    Such a level makes a cell of the design without variation (perfect separation, an infinite logit).
    """
    levels: set[str] = set()
    for by in ([term], *([term, f] for f in ("model", *factors) if f in outcomes and outcomes[f].nunique() > 1)):
        means = outcomes.groupby(by, sort=False)["consistent"].mean()
        flat = means[(means == 0) | (means == 1)]
        levels |= {str(key[0] if isinstance(key, tuple) else key) for key in flat.index}
    return sorted(levels)


def _without_separated(outcomes: pd.DataFrame, result: gee.GeeResult, notes: Sequence[str], axes: Sequence[str],
                       factors: tuple[str, ...], header: str) -> gee.GeeResult | None:
    """The fit again without the separated levels of its condition term, when separation stopped it (else None)."""
    term = result.condition_term
    if result.failure is None or not result.failure.startswith("perfect separation") or term not in outcomes:
        return None
    levels = separated_levels(outcomes, term, factors)
    kept = outcomes[~outcomes[term].astype(str).isin(levels)].reset_index(drop=True)
    if not levels or kept[term].nunique() < 2:
        return None
    refit = gee.fit_consistency_gee(kept, notes, axes, dataset_factors=factors)
    if header:
        refit.notes.insert(0, header.format(result=refit))
    covered = ", ".join(map(str, dict.fromkeys(kept[term])))
    refit.notes.append(f"refitted without the {term} levels {', '.join(levels)}: perfect separation stopped the fit "
                       f"above (see its reason); the {term} test here covers only {covered}")
    return refit


def by_dataset(outcomes: pd.DataFrame, axes: Sequence[str] = ()) -> pd.DataFrame:
    """Within each dataset, the model of consistency on model and the condition term (``gee_by_dataset.csv``).

    Returns:
        Columns :data:`BY_DATASET_COLUMNS`: per dataset (in order of appearance) the rows of its fit's
        table, fitted terms first, then dropped terms and notes with empty numbers; a fit stopped by
        separation is followed by its refit without the separated levels, as in :func:`fit_all`.
    """
    frames = []
    for dataset, own in outcomes.groupby("dataset", sort=False):
        result = gee.fit_consistency_gee(own.reset_index(drop=True), (), axes, dataset_factors=())
        types = ",".join(dict.fromkeys(own["dataset_type"]))
        frames.append(result.table().assign(dataset=str(dataset), dataset_type=types,
                                            n_responses=result.n_responses, n_clusters=result.n_clusters))
        refit = _without_separated(own.reset_index(drop=True), result, (), axes, (), "")
        if refit is not None:  # its rows follow the unfitted model's, its note saying what it left out
            frames.append(refit.table().assign(dataset=str(dataset), dataset_type=types,
                                               n_responses=refit.n_responses, n_clusters=refit.n_clusters))
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in BY_DATASET_COLUMNS})
    return pd.concat(frames, ignore_index=True)[list(BY_DATASET_COLUMNS)]
