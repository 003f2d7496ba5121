"""PNG of one test image's views, each marked kept (green) or dropped (red) by a selection method."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor


def denormalize(views: Tensor, mean: Sequence[float], std: Sequence[float]) -> Tensor:
    """``[N, 3, S, S]`` normalised views -> [0, 1] images."""
    m = torch.tensor(mean, dtype=views.dtype, device=views.device).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=views.dtype, device=views.device).view(1, -1, 1, 1)
    return (views * s + m).clamp(0, 1)


def save_views_figure(path: str | Path, views: Tensor, kept: Tensor, scores: Tensor | None, title: str,
                      mean: Sequence[float], std: Sequence[float], max_views: int = 64,
                      score_name: str = "sharpness score") -> Path:
    """Grid of ``views`` ``[N, 3, S, S]`` (normalised), view 0 first; ``kept`` ``[k]`` view indices;
    ``scores`` ``[N]`` are printed under each view (lower = flatter = kept first)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    imgs = denormalize(views[:max_views].detach().float().cpu(), mean, std)
    keep = set(int(i) for i in kept.tolist())
    n = imgs.shape[0]
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(cols * 1.3, rows * 1.45 + 0.6), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for i in range(n):
        ax = axes.flat[i]
        ax.imshow(imgs[i].permute(1, 2, 0).numpy(), interpolation="nearest")
        colour = "#1a9641" if i in keep else "#d7191c"
        for side in ax.spines.values():
            side.set_visible(True)
            side.set_edgecolor(colour)
            side.set_linewidth(3 if i in keep else 1.5)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.axis("on")
        label = ("orig " if i == 0 else "") + (f"{float(scores[i]):.2f}" if scores is not None else "")
        ax.set_title(label, fontsize=6, color=colour, pad=1.5)
    fig.suptitle(title + f"\n(green = kept, red = dropped; number = {score_name})", fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
