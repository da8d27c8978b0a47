"""The heatmaps drawn as quads are the PNG imshow drew, byte for byte, at a fraction of the memory.

The reference is the figure as :func:`prism.compare.plots._heatmap` drew it before (an ``imshow`` of the
masked values on the same fixed scale), made here beside it on the same values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from prism.compare import plots


def imshow_heatmap(plt: Any, values: np.ndarray, labels: list[list[str]], rows: list[str], columns: list[str],
                   title: str, colorbar: str, path: Path, cmap: str) -> Path:
    """The heatmap as imshow draws it: the straightforward reference."""
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 + 1.25 * len(columns)), 1.4 + 0.8 * len(rows)),
                           layout="constrained")
    image = ax.imshow(np.ma.masked_invalid(values), vmin=0.0, vmax=1.0, cmap=cmap, aspect="auto")
    colormap = plt.get_cmap(cmap)
    ax.set_xticks(range(len(columns)), columns, rotation=30 if max(map(len, columns)) > 6 else 0, ha="right"
                  if max(map(len, columns)) > 6 else "center")
    ax.set_yticks(range(len(rows)), rows)
    for i in range(len(rows)):
        for j in range(len(columns)):
            value = values[i, j]
            color = "black"
            if not np.isnan(value):
                red, green, blue, _ = colormap(float(value))
                color = "black" if 0.2126 * red + 0.7152 * green + 0.0722 * blue > 0.45 else "white"
            ax.text(j, i, labels[i][j], ha="center", va="center", fontsize=8, color=color)
    ax.set_title(title, fontsize=10)
    fig.colorbar(image, ax=ax, label=colorbar, shrink=0.8)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


@pytest.mark.parametrize(("n_rows", "n_columns", "cmap"), [(1, 1, "viridis"), (3, 5, "magma"), (7, 7, "cividis"),
                                                           (12, 4, "viridis")])
def test_the_quads_draw_imshows_png(tmp_path: Path, n_rows: int, n_columns: int, cmap: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(n_rows * 100 + n_columns)
    values = rng.random((n_rows, n_columns))
    values[0, -1] = np.nan  # a cell without a value is left blank
    values.flat[len(values.flat) // 2] = 1.0  # both ends of the scale
    values.flat[-1] = 0.0 if values.size > 1 else values.flat[-1]
    labels = [[f"{v:.2f}" for v in row] for row in values]
    rows = [f"model-{i}" for i in range(n_rows)]
    columns = [f"condition-{j}" if j % 2 else f"P{j}" for j in range(n_columns)]
    drawn = plots._heatmap(values, labels, rows, columns, "title", "rate", tmp_path / "quads.png", cmap)
    reference = imshow_heatmap(plt, values, labels, rows, columns, "title", "rate", tmp_path / "image.png", cmap)
    assert drawn.read_bytes() == reference.read_bytes()
