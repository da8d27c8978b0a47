"""Which clustered models a comparison fits: by dataset, by dataset type, and within each dataset.

The binomial GEE of consistency (:mod:`prism.gee`) has the dataset as a factor. Comparing objective with
subjective datasets (``dataset.type``) asks for dataset type as a factor too, but a dataset has one type, so
the two are confounded: dataset type is a function of dataset, and a model holding both cannot estimate
the type once the datasets are in it. As the robustness paper PRISM follows does, two models are fitted
one after the other then:

- ``fit=dataset``: model, the condition term and dataset, with their interactions;
- ``fit=dataset_type``: the same with dataset type in place of dataset.

When dataset type does not vary (every dataset objective, say) only the dataset fit is made, with a note;
when it varies within a dataset (a dataset run under both types) the two are not confounded and one
fit holds both (``fit=dataset+dataset_type``). Each fit lists every planned term, fitted or dropped with
its reason (:meth:`prism.gee.GeeResult.table`).

``by_dataset``: the same model within each dataset alone (model, the condition term and their
interaction): the condition term's effect per dataset (the paper's Table 5).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from prism import gee

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
        outcomes: :func:`prism.gee.consistency_outcomes`' rows (with ``dataset_type``).
        notes: Sentences about the data, carried into each fit.
        axes: A grid's axes (see :func:`prism.gee.fit_consistency_gee`).
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
    return pd.concat(frames, ignore_index=True)[list(FIT_COLUMNS)]


def by_dataset(outcomes: pd.DataFrame, axes: Sequence[str] = ()) -> pd.DataFrame:
    """Within each dataset, the model of consistency on model and the condition term (``gee_by_dataset.csv``).

    Returns:
        Columns :data:`BY_DATASET_COLUMNS`: per dataset (in order of appearance) the rows of its fit's
        table, fitted terms first, then dropped terms and notes with empty numbers.
    """
    frames = []
    for dataset, own in outcomes.groupby("dataset", sort=False):
        result = gee.fit_consistency_gee(own.reset_index(drop=True), (), axes, dataset_factors=())
        types = ",".join(dict.fromkeys(own["dataset_type"]))
        frames.append(result.table().assign(dataset=str(dataset), dataset_type=types,
                                            n_responses=result.n_responses, n_clusters=result.n_clusters))
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in BY_DATASET_COLUMNS})
    return pd.concat(frames, ignore_index=True)[list(BY_DATASET_COLUMNS)]
