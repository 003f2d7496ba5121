"""IVPT losses. Maps are [B, C, H, W] with channels summing to 1 and background last.

Every function returns a scalar; :func:`ivpt_loss` combines them with configurable weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from .equivariance import AffineParams, warp_back


@dataclass
class LossWeights:
    """Weights of the IVPT loss terms (the reference uses 1 for all)."""

    classification: float = 1.0
    consistency: float = 1.0
    presence: float = 1.0
    enforced_presence: float = 1.0
    total_variation: float = 1.0
    entropy: float = 1.0
    orthogonality: float = 1.0
    equivariance: float = 1.0
    part_presence: float = 0.0  # not in the reference: every final part present in every image


def consistency_loss(grouped: Tensor, final: Tensor, eps: float = 1e-10) -> Tensor:
    """KL(final || grouped) per pixel, summed over channels and averaged; ``final`` is detached."""
    target = final.detach() + eps
    return (target * (target.log() - (grouped + eps).log())).sum(dim=1).mean()


def _avg_pool(maps: Tensor, pool: int) -> Tensor:
    """``pool x pool`` average pooling (stride 1); none when ``pool`` is 1 or larger than the map."""
    return F.avg_pool2d(maps, pool, stride=1) if 1 < pool <= min(maps.shape[-2:]) else maps


def presence_loss(maps: Tensor, pool: int = 3) -> Tensor:
    """1 - mean over foreground parts of the batch max of the (``pool x pool`` avg-pooled) maps."""
    pooled = _avg_pool(maps[:, :-1], pool)
    return 1 - pooled.amax(dim=(2, 3)).amax(dim=0).mean()


def _border_weight(h: int, w: int, device: torch.device) -> Tensor:
    """[h, w] squared distance from the centre, scaled to max 1 (0 at the centre, 1 at the corners)."""
    ys = torch.linspace(-1, 1, h, device=device) if h > 1 else torch.zeros(1, device=device)
    xs = torch.linspace(-1, 1, w, device=device) if w > 1 else torch.zeros(1, device=device)
    d = ys[:, None] ** 2 + xs[None, :] ** 2
    return d / d.max().clamp_min(1e-12)


def per_image_presence_loss(maps: Tensor, pool: int = 3) -> Tensor:
    """1 - mean over images and foreground parts of each image's own (pooled) map maximum: asks
    every part to show up in every image (for data where all parts are visible)."""
    return 1 - _avg_pool(maps[:, :-1], pool).amax(dim=(2, 3)).mean()


def enforced_background_loss(maps: Tensor, pool: int = 3) -> Tensor:
    """BCE pushing the (``pool x pool`` avg-pooled) background map, weighted towards the border, to reach 1."""
    pooled = _avg_pool(maps[:, -1:], pool)
    weighted = pooled[:, 0] * _border_weight(*pooled.shape[-2:], device=maps.device)
    peak = weighted.amax(dim=(1, 2)).clamp(1e-6, 1.0)
    return F.binary_cross_entropy(peak, torch.ones_like(peak))


def total_variation_loss(maps: Tensor) -> Tensor:
    """Mean absolute difference between neighbouring pixels (both axes)."""
    dy = (maps[..., 1:, :] - maps[..., :-1, :]).abs().mean()
    dx = (maps[..., :, 1:] - maps[..., :, :-1]).abs().mean()
    return dx + dy


def entropy_loss(maps: Tensor) -> Tensor:
    """Mean per-pixel entropy of the channel distribution."""
    p = maps.clamp_min(1e-6)
    p = p / p.sum(dim=1, keepdim=True)
    return -(p * p.log()).sum(dim=1).mean()


def orthogonality_loss(features: Tensor) -> Tensor:
    """Mean squared off-diagonal cosine similarity between part features [B, D, K + 1]."""
    f = F.normalize(features.float(), dim=1)
    sim = f.transpose(1, 2) @ f
    eye = torch.eye(sim.shape[-1], device=sim.device)
    return (sim - eye).pow(2).mean()


def equivariance_loss(maps: Tensor, maps_of_warped: Tensor, params: AffineParams) -> Tensor:
    """1 - mean cosine similarity between the foreground maps and the maps of the warped image
    warped back (so a part that moves with the image costs nothing)."""
    back = warp_back(maps_of_warped, params)
    a, b = maps[:, :-1].flatten(2), back[:, :-1].flatten(2)
    return 1 - F.cosine_similarity(a, b, dim=-1).mean()


def map_losses(stage_maps: list[Tensor], pool: int = 3) -> dict[str, Tensor]:
    """Presence, enforced background, total variation and entropy, averaged over stages."""
    n = len(stage_maps)
    return {
        "presence": sum(presence_loss(m, pool) for m in stage_maps) / n,
        "enforced_presence": sum(enforced_background_loss(m, pool) for m in stage_maps) / n,
        "total_variation": sum(total_variation_loss(m) for m in stage_maps) / n,
        "entropy": sum(entropy_loss(m) for m in stage_maps) / n,
    }


def ivpt_loss(out, target: Tensor, weights: LossWeights, out_warped=None, params: AffineParams | None = None,
              pool: int = 3) -> dict[str, Tensor]:
    """All IVPT terms and their weighted sum ``"loss"``.

    ``pool``: the average pooling of the presence losses (3 in the reference, made for 37x37 token
    grids). ``out``/``out_warped``: :class:`~visionzoo.methods.ivpt.model.IVPTOutput` of the images and of
    the affinely warped images (``params``); without them the equivariance term is skipped.
    """
    terms: dict[str, Tensor] = {
        "classification": F.cross_entropy(out.logits.float(), target),
        "consistency": sum(consistency_loss(g, out.final_maps) for g in out.grouped_maps) / max(1, len(out.grouped_maps)),
        "orthogonality": orthogonality_loss(out.part_features),
        **map_losses(out.stage_maps, pool),
    }
    if weights.part_presence:
        terms["part_presence"] = per_image_presence_loss(out.final_maps, pool)
    if out_warped is not None and params is not None and weights.equivariance:
        terms["equivariance"] = sum(equivariance_loss(m, mw, params)
                                    for m, mw in zip(out.stage_maps, out_warped.stage_maps, strict=True)) / len(out.stage_maps)
    total = sum(getattr(weights, k) * v for k, v in terms.items())
    return {"loss": total, **{k: v.detach() for k, v in terms.items()}}
