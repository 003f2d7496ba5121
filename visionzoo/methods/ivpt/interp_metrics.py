"""Consistency and stability of part prototypes (the EvalProtoPNet protocol, Huang et al. 2023).

Each image is cropped to its object box and brought to ``out_size x out_size`` (224): a
prototype's activation map is upsampled to the image, cropped to the box and resized (one
bilinear ``roi_align``). A square of ``+-half_size`` px (36) around the map's peak *hits* every
annotated, visible part keypoint inside it.

* **Consistency**: a (class, prototype) pair is consistent when one part is hit in at least
  ``thresh`` (80 %) of the class's images showing that part; score = % consistent pairs.
* **Stability**: the fraction of a class's images whose part-hit vector of a prototype is unchanged
  after Gaussian noise (std 0.2, clipped to +-0.25) on the normalised input; score = mean over
  (class, prototype) pairs, in %.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torchvision.ops import roi_align

OUT_SIZE = 224
HALF_SIZE = 36
PART_THRESH = 0.8


def peak_locations(maps: Tensor, boxes: Tensor, image_size: tuple[int, int], out_size: int = OUT_SIZE,
                   chunk: int = 16) -> Tensor:
    """Peaks of ``maps`` [N, M, h, w] inside each object box, as (y, x) in the box resized to ``out_size``.

    ``boxes`` [N, 4] (x0, y0, x1, y1) in pixels of images of ``image_size`` (H, W) that the maps
    cover. Returns int64 [N, M, 2]; ties go to the first (top-left) maximum.
    """
    n, m, h, w = maps.shape
    big_h, big_w = image_size
    scale = torch.tensor([w / big_w, h / big_h, w / big_w, h / big_h], dtype=torch.float32)
    peaks = torch.empty(n, m, 2, dtype=torch.int64)
    for s in range(0, n, chunk):
        part = maps[s:s + chunk].float().cpu()
        rois = boxes[s:s + chunk].float().cpu() * scale
        rois = torch.cat([torch.arange(len(part), dtype=torch.float32)[:, None], rois], dim=1)
        up = roi_align(part, rois, output_size=out_size, spatial_scale=1.0, sampling_ratio=1, aligned=True)
        flat = up.flatten(2).argmax(dim=-1)  # [n, M]
        peaks[s:s + chunk, :, 0] = flat // out_size
        peaks[s:s + chunk, :, 1] = flat % out_size
    return peaks


def keypoints_in_box(keypoints: Tensor, boxes: Tensor, out_size: int = OUT_SIZE) -> tuple[Tensor, Tensor]:
    """Keypoints [N, P, 3] (x, y, visible; image px) -> (y, x) int64 [N, P, 2] in the box resized to
    ``out_size``, and ``present`` [N, P] (visible and inside the box)."""
    x0, y0, x1, y1 = (boxes[:, i:i + 1].float() for i in range(4))
    kx, ky, vis = keypoints[..., 0].float(), keypoints[..., 1].float(), keypoints[..., 2] > 0
    rx, ry = (kx - x0) / (x1 - x0).clamp_min(1e-6), (ky - y0) / (y1 - y0).clamp_min(1e-6)
    present = vis & (rx >= 0) & (rx < 1) & (ry >= 0) & (ry < 1)
    yx = torch.stack([(ry * out_size).long(), (rx * out_size).long()], dim=-1)
    return yx, present


def part_hits(peaks: Tensor, kp_yx: Tensor, present: Tensor, half_size: int = HALF_SIZE,
              out_size: int = OUT_SIZE) -> Tensor:
    """Bool [N, M, P]: part p lies in the +-``half_size`` square around prototype m's peak (bounds inclusive)."""
    lo = (peaks - half_size).clamp_min(0)[:, :, None, :]  # [N, M, 1, 2]
    hi = (peaks + half_size).clamp_max(out_size)[:, :, None, :]
    kp = kp_yx[:, None, :, :]  # [N, 1, P, 2]
    inside = ((kp >= lo) & (kp <= hi)).all(dim=-1)
    return inside & present[:, None, :]


def consistency_score(hits: Tensor, present: Tensor, labels: Tensor, thresh: float = PART_THRESH) -> tuple[float, Tensor]:
    """% of (class, prototype) pairs that hit one part in >= ``thresh`` of the class's images with it.

    ``hits`` [N, M, P] bool, ``present`` [N, P] bool, ``labels`` [N]. Also returns the per-pair
    verdicts [classes seen, M] (bool).
    """
    verdicts = []
    for c in torch.unique(labels):
        idx = labels == c
        hit_rate = hits[idx].float().sum(0) / present[idx].float().sum(0).clamp_min(1)[None, :]  # [M, P]
        verdicts.append((hit_rate >= thresh).any(dim=-1))
    table = torch.stack(verdicts)
    return 100.0 * table.float().mean().item(), table


def stability_score(hits: Tensor, hits_noisy: Tensor, labels: Tensor) -> float:
    """% of images (mean over (class, prototype) pairs) whose part-hit vector survives the noise."""
    same = (hits == hits_noisy).all(dim=-1).float()  # [N, M]
    per_class = [same[labels == c].mean(0) for c in torch.unique(labels)]  # each [M]
    return 100.0 * torch.stack(per_class).mean().item()


def perturb(images: Tensor, std: float = 0.2, clip: float = 0.25, generator: torch.Generator | None = None) -> Tensor:
    """``images`` (normalised) + Gaussian noise of ``std`` clipped to +-``clip``."""
    noise = torch.randn(images.shape, generator=generator, dtype=torch.float32).to(images.device)
    return images + (noise * std).clamp(-clip, clip).to(images.dtype)
