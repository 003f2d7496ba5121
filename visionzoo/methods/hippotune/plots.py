"""PNG figures of a class-incremental run: accuracy curves and the accuracy matrix."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_curves(curves: dict[str, tuple[list[int], list[float]]], path: str | Path, title: str = "",
                refs: dict[str, float] | None = None) -> Path:
    """One line per method: accuracy on all seen classes (%) against the number of classes seen;
    ``refs`` (e.g. joint training, one number) are dashed horizontal lines."""
    fig, ax = plt.subplots(figsize=(5.5, 4.0), dpi=120)
    for name, (seen, acc) in curves.items():
        ax.plot(seen, acc, marker="o", markersize=3, label=name)
    for name, acc in (refs or {}).items():
        ax.axhline(acc, linestyle="--", linewidth=1, color="gray", label=name)
    ax.set_xlabel("classes seen")
    ax.set_ylabel("accuracy on seen classes (%)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_matrix(matrix: list[list[float]], path: str | Path, title: str = "") -> Path:
    """Heat map of ``matrix[t][j]`` (accuracy on task j after task t); cells j > t are blank."""
    rows, cols = len(matrix), max(len(r) for r in matrix)
    grid = [[(r[j] if j < len(r) else math.nan) for j in range(cols)] for r in matrix]
    fig, ax = plt.subplots(figsize=(0.45 * cols + 2.0, 0.45 * rows + 1.6), dpi=120)
    im = ax.imshow(grid, vmin=0, vmax=100, cmap="viridis")
    for t in range(rows):
        for j in range(cols):
            if not math.isnan(grid[t][j]):
                ax.text(j, t, f"{grid[t][j]:.0f}", ha="center", va="center", fontsize=6,
                        color="white" if grid[t][j] < 60 else "black")
    ax.set_xlabel("evaluated task")
    ax.set_ylabel("after training task" if rows > 1 else "joint training")
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="accuracy (%)")
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path
