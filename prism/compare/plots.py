"""The comparison's figures as PNG files: accuracy and flip-rate heatmaps, the divergence matrix.

matplotlib is imported inside the drawing, and the figures are ``matplotlib.figure.Figure`` objects saved
directly (Agg renders the PNG), never pyplot's: nothing here needs a display, ``import prism.compare`` stays
cheap, and a comparison neither imports pyplot nor registers and closes figures with it. Each cell is
annotated with its value and its 95% interval, so the figure can be read without the CSV beside it.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from prism import formatting
from prism.compare.tables import POOLED

ACCURACY_PNG = "accuracy_heatmap.png"
FLIP_RATE_PNG = "flip_rate_heatmap.png"
DIVERGENCE_PNG = "divergence_matrix.png"


def _annotation(value: float, low: float, high: float) -> str:
    if math.isnan(value):
        return "n/a"
    return f"{formatting.number(value)}\n{formatting.interval(low, high)}"


def _heatmap(values: np.ndarray, labels: list[list[str]], rows: list[str], columns: list[str],
             title: str, colorbar: str, path: Path, cmap: str) -> Path:
    """Draw one annotated heatmap with a fixed [0, 1] scale (rates are comparable across figures)."""
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

    # A Figure without pyplot: no figure manager to register and close, and pyplot is never imported; savefig
    # renders the PNG with Agg all the same.
    fig = Figure(figsize=(max(6.0, 1.6 + 1.25 * len(columns)), 1.4 + 0.8 * len(rows)), layout="constrained")
    ax = fig.subplots()
    colormap = colormaps[cmap]
    norm = Normalize(vmin=0.0, vmax=1.0)
    # The cells drawn as quads of their colour, not as an image: imshow resamples the values to every pixel
    # of the axes in float64 (208 MiB for the 20-run divergence matrix, the comparison's peak; BENCHMARKS.md
    # section 21). The colours are imshow's own (its 8-bit lookup, unmasked NaN transparent), unsmoothed
    # quads on imshow's limits, so the PNG is byte for byte the one imshow drew.
    colours = colormap(norm(np.ma.masked_invalid(values)), bytes=True) / 255.0
    ax.pcolormesh(np.arange(len(columns) + 1) - 0.5, np.arange(len(rows) + 1) - 0.5, colours, antialiased=False)
    ax.set_xlim(-0.5, len(columns) - 0.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    image = ScalarMappable(norm=norm, cmap=colormap)
    # Every cell's colour at once (the colormap's lookup is per element, so each is the one a lone call gives).
    rgba = colormap(np.where(np.isnan(values), 0.0, values))
    ax.set_xticks(range(len(columns)), columns, rotation=30 if max(map(len, columns)) > 6 else 0, ha="right"
                  if max(map(len, columns)) > 6 else "center")
    ax.set_yticks(range(len(rows)), rows)
    for i in range(len(rows)):
        for j in range(len(columns)):
            color = "black"
            if not math.isnan(values[i, j]):
                # Light text on dark cells, dark on light ones (relative luminance of the cell colour).
                red, green, blue, _ = rgba[i, j]
                color = "black" if 0.2126 * red + 0.7152 * green + 0.0722 * blue > 0.45 else "white"
            ax.text(j, i, labels[i][j], ha="center", va="center", fontsize=8, color=color)
    ax.set_title(title, fontsize=10)
    fig.colorbar(image, ax=ax, label=colorbar, shrink=0.8)
    fig.savefig(path, dpi=120)
    return path


def _grid(table: pd.DataFrame, row: str, column: str, value: str, low: str, high: str, rows: list[str],
          columns: list[str]) -> tuple[np.ndarray, list[list[str]]]:
    values = np.full((len(rows), len(columns)), np.nan)
    labels = [["n/a"] * len(columns) for _ in rows]
    row_at, column_at = _positions(rows), _positions(columns)
    for record in table.to_dict("records"):
        i, j = row_at[str(record[row])], column_at[str(record[column])]
        values[i, j] = float(record[value])
        labels[i][j] = _annotation(float(record[value]), float(record[low]), float(record[high]))
    return values, labels


def _positions(names: list[str]) -> dict[str, int]:
    """Each name's first position (``list.index`` in one lookup: the comparison's figures are up to runs x runs)."""
    at: dict[str, int] = {}
    for i, name in enumerate(names):
        at.setdefault(name, i)
    return at


def write_plots(out: Path, accuracy: pd.DataFrame, sensitivity: pd.DataFrame, divergence: pd.DataFrame,
                condition_disagreement: pd.DataFrame) -> list[Path]:
    """Write the comparison's PNG figures into ``out``.

    Args:
        out: Directory for the files.
        accuracy: :func:`prism.compare.tables.accuracy_table`.
        sensitivity: :func:`prism.compare.tables.sensitivity_table`.
        divergence: :func:`prism.compare.tables.divergence_table` (the divergence matrix is drawn only
            when it holds a pair of models: the report's divergence section shows it).
        condition_disagreement: :func:`prism.compare.tables.condition_disagreement_table` (the matrix's
            diagonal).

    Returns:
        The files written: the accuracy heatmap (model x condition), the flip-rate heatmap (model x
        non-baseline condition) and, with a pair of models in ``divergence``, the pairwise divergence matrix.
    """
    out.mkdir(parents=True, exist_ok=True)
    models = list(dict.fromkeys(accuracy["model"]))
    conditions = list(dict.fromkeys(accuracy["condition"]))
    written = []
    values, labels = _grid(accuracy, "model", "condition", "accuracy", "ci_low", "ci_high", models, conditions)
    written.append(_heatmap(values, labels, models, conditions, "Accuracy (95% bootstrap interval)",
                            "accuracy", out / ACCURACY_PNG, "viridis"))

    flips = sensitivity[sensitivity["condition"] != sensitivity["baseline"]]
    if not flips.empty:
        baseline = str(flips["baseline"].iloc[0])
        flip_conditions = [c for c in conditions if c in set(flips["condition"])]
        values, labels = _grid(flips, "model", "condition", "flip_rate", "flip_ci_low", "flip_ci_high", models,
                               flip_conditions)
        written.append(_heatmap(values, labels, models, flip_conditions,
                                f"Flip rate vs {baseline} (95% bootstrap interval)", "flip rate",
                                out / FLIP_RATE_PNG, "magma"))

    pooled = divergence[divergence["condition"] == POOLED]
    # The matrix is shown by the divergence section, which only a comparison with pairs of runs on one question
    # set has (runs on different sets have no divergence table): without a pair it is not drawn.
    if len(models) >= 2 and not pooled.empty:
        values = np.full((len(models), len(models)), np.nan)
        labels = [["n/a"] * len(models) for _ in models]
        at = _positions(models)
        for row in pooled.to_dict("records"):
            i, j = at[str(row["model_a"])], at[str(row["model_b"])]
            values[i, j] = values[j, i] = float(row["disagreement"])
            labels[i][j] = labels[j][i] = _annotation(float(row["disagreement"]), float(row["disagreement_ci_low"]),
                                                      float(row["disagreement_ci_high"]))
        for row in condition_disagreement.to_dict("records"):
            i = at[str(row["model"])]
            values[i, i] = float(row["condition_disagreement"])
            labels[i][i] = _annotation(float(row["condition_disagreement"]), float(row["ci_low"]),
                                       float(row["ci_high"]))
        written.append(_heatmap(values, labels, models, models,
                                "Answer disagreement between models, all conditions\n"
                                "(diagonal: each model's own across-condition disagreement)",
                                "disagreement", out / DIVERGENCE_PNG, "cividis"))
    return written
