"""Part-map figures: per image, the prototype maps of every prompted layer, their grouping into the
final parts, and the final part maps, overlaid on the image (PNG, matplotlib Agg)."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from .model import IVPTOutput


def _colours(n: int) -> Tensor:
    """[n, 3] distinct colours in [0, 1] (tab20)."""
    import matplotlib

    cmap = matplotlib.colormaps["tab20"]
    return torch.tensor([cmap(i % 20)[:3] for i in range(n)], dtype=torch.float32)


def overlay(image: Tensor, maps: Tensor, alpha: float = 0.55) -> Tensor:
    """``image`` [3, H, W] in [0, 1], ``maps`` [C, h, w] (background last) -> [H, W, 3]: each pixel
    tinted with the colour of its arg-max channel; background pixels stay as they are."""
    h, w = image.shape[-2:]
    up = F.interpolate(maps[None].float(), size=(h, w), mode="bilinear", align_corners=False)[0]
    label = up.argmax(0)
    colours = _colours(maps.shape[0] - 1)
    img = image.permute(1, 2, 0).float().clamp(0, 1)
    fg = label < maps.shape[0] - 1
    tint = colours[label.clamp_max(maps.shape[0] - 2)]
    return torch.where(fg[..., None], (1 - alpha) * img + alpha * tint, img)


def part_map_figure(image: Tensor, out: IVPTOutput, index: int, path: str | Path, title: str = "",
                    keypoints: Tensor | None = None, prompted_blocks: list[int] | None = None) -> Path:
    """Write one figure for image ``index`` of a batch ``out`` (:class:`IVPTOutput`).

    Columns: one per prompted layer, then the final parts. Rows: fine prototype maps (arg-max
    colours), the same maps grouped into the K final parts (colours of the final parts), and the
    fine-to-final grouping matrix G [n - 1, K]. ``image`` [3, H, W] in [0, 1]; ``keypoints`` [P, 3].
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = len(out.grouped_maps)
    blocks = prompted_blocks or list(range(layers))
    fig, axes = plt.subplots(3, layers + 1, figsize=(2.4 * (layers + 1), 7.4), squeeze=False)
    for j in range(layers):
        fine = out.stage_maps[j][index].detach().cpu()
        axes[0, j].imshow(overlay(image, fine).numpy())
        axes[0, j].set_title(f"block {blocks[j]}: {fine.shape[0] - 1} prototypes", fontsize=8)
        axes[1, j].imshow(overlay(image, out.grouped_maps[j][index].detach().cpu()).numpy())
        axes[1, j].set_title(f"grouped -> {out.grouped_maps[j].shape[1] - 1} parts", fontsize=8)
        g = out.groupings[j][index].detach().cpu().numpy()
        axes[2, j].imshow(g, cmap="viridis", vmin=0, vmax=1, aspect="auto")
        axes[2, j].set_xlabel("final part", fontsize=7)
        axes[2, j].set_ylabel("prototype", fontsize=7)
        axes[2, j].set_title("grouping G", fontsize=8)
    final = out.final_maps[index].detach().cpu()
    axes[0, layers].imshow(image.permute(1, 2, 0).clamp(0, 1).numpy())
    if keypoints is not None:
        vis = keypoints[:, 2] > 0
        axes[0, layers].scatter(keypoints[vis, 0].numpy(), keypoints[vis, 1].numpy(), s=14, c="white",
                                edgecolors="black", linewidths=0.6)
    axes[0, layers].set_title("image (+ keypoints)", fontsize=8)
    axes[1, layers].imshow(overlay(image, final).numpy())
    axes[1, layers].set_title(f"final: {final.shape[0] - 1} parts", fontsize=8)
    colours = _colours(final.shape[0] - 1).numpy()
    axes[2, layers].imshow(colours[:, None, :], aspect="auto")
    axes[2, layers].set_title("part colours", fontsize=8)
    for k in range(final.shape[0] - 1):
        axes[2, layers].text(0, k, f"part {k}", ha="center", va="center", fontsize=7)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def unnormalise(images: Tensor, mean: tuple[float, ...], std: tuple[float, ...]) -> Tensor:
    """Normalised images [B, 3, H, W] -> [0, 1]."""
    m = torch.tensor(mean, dtype=images.dtype, device=images.device)[:, None, None]
    s = torch.tensor(std, dtype=images.dtype, device=images.device)[:, None, None]
    return (images * s + m).clamp(0, 1)
