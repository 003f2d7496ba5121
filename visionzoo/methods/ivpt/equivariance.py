"""Random affine warps (rotation, translation, scale about the centre) of images and of their maps.

The same warp is expressed at any resolution: translations are fractions of the side, so a warp
drawn for the images also applies to the token-grid maps, and :func:`warp_back` undoes it there.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from kornia.geometry.transform import get_rotation_matrix2d, invert_affine_transform, warp_affine
from torch import Tensor


@dataclass
class AffineParams:
    """Per-image warp: ``angle`` [B] degrees, ``shift`` [B, 2] fractions of (width, height), ``scale`` [B]."""

    angle: Tensor
    shift: Tensor
    scale: Tensor


def sample_affine(batch: int, degrees: float = 90.0, translate: float = 0.11, scale: tuple[float, float] = (0.8, 1.4),
                  device: torch.device | str = "cpu", generator: torch.Generator | None = None) -> AffineParams:
    """Uniform angle in [-degrees, degrees], shift in [-translate, translate], scale in ``scale``."""
    r = torch.rand(batch, 4, generator=generator).to(device)
    return AffineParams(angle=(2 * r[:, 0] - 1) * degrees, shift=(2 * r[:, 1:3] - 1) * translate,
                        scale=scale[0] + (scale[1] - scale[0]) * r[:, 3])


def _matrix(params: AffineParams, h: int, w: int) -> Tensor:
    """[B, 2, 3] pixel-space matrix of the warp for an ``h x w`` image."""
    b = params.angle.shape[0]
    dev = params.angle.device
    center = torch.tensor([(w - 1) / 2, (h - 1) / 2], device=dev).expand(b, 2)
    scale = params.scale[:, None].expand(b, 2)
    m = get_rotation_matrix2d(center, params.angle, scale).clone()
    m[:, 0, 2] += params.shift[:, 0] * w
    m[:, 1, 2] += params.shift[:, 1] * h
    return m


def warp(x: Tensor, params: AffineParams) -> Tensor:
    """Warp ``x`` [B, C, H, W] (images or maps); outside pixels become 0."""
    h, w = x.shape[-2:]
    return warp_affine(x, _matrix(params, h, w).to(x.dtype), dsize=(h, w))


def warp_back(x: Tensor, params: AffineParams) -> Tensor:
    """Undo :func:`warp` on ``x`` [B, C, H, W] (at any resolution)."""
    h, w = x.shape[-2:]
    return warp_affine(x, invert_affine_transform(_matrix(params, h, w)).to(x.dtype), dsize=(h, w))
