"""Test-time views as in TPT: the original view plus ``N - 1`` augmented views, as one batch.

All views of all images come from batched calls on the images' device: a 64-view batch of a 224 px
image is one ``grid_sample`` call, not 64 Python-level crops. Random parameters are drawn on the CPU
from a ``torch.Generator`` (``generator=`` or ``seed=``; otherwise torch's global generator), so
results are reproducible and do not depend on the device.

* view 0: the short side resized to ``size`` (antialiased) and a centre crop (TPT's base view);
* views 1..N-1: random resized crop (``scale``, ``ratio``; torchvision's sampling with up to 10
  tries, then a centre crop), bilinear without antialiasing, and a random horizontal flip folded
  into the sampling grid;
* ``augmix=True`` (TPT's setting for fine-grained sets): each augmented view is then AugMixed.
  kornia (0.9) has no AugMix, so :func:`augmix` builds a batched one from kornia's operations:
  every chain step applies each colour operation once, to all the views that drew it, and one
  ``warp_affine`` for all geometric ones.

Why not ``kornia.geometry.transform.crop_and_resize``: it does the same crops but through a dense
perspective warp (a 3x3 matrix product per output pixel), about 7x slower on CPU here; crops are
axis-aligned, so the sampling grid is separable and built by broadcasting
(``benchmarks/views.py`` times both against a torchvision loop).
"""

from __future__ import annotations

from collections.abc import Sequence

import kornia
import torch
import torch.nn.functional as F
from torch import nn

AUGMIX_OPS = ("autocontrast", "equalize", "posterize", "solarize", "rotate", "shear_x", "shear_y",
              "translate_x", "translate_y")


def sample_crops(n: int, height: int, width: int, scale: tuple[float, float], ratio: tuple[float, float],
                 generator: torch.Generator | None, tries: int = 10) -> torch.Tensor:
    """Random-resized-crop boxes ``[n, 4]`` (x0, y0, w, h) in integer pixels, torchvision's recipe
    (area fraction uniform in ``scale``, log aspect ratio uniform in ``ratio``), vectorised over tries."""
    area = height * width
    s = torch.empty(n, tries).uniform_(scale[0], scale[1], generator=generator) * area
    log_r = torch.empty(n, tries).uniform_(torch.log(torch.tensor(ratio[0])).item(),
                                           torch.log(torch.tensor(ratio[1])).item(), generator=generator)
    r = torch.exp(log_r)
    w = torch.sqrt(s * r).round().long()
    h = torch.sqrt(s / r).round().long()
    ok = (w > 0) & (h > 0) & (w <= width) & (h <= height)
    first = torch.where(ok.any(1), ok.float().argmax(1), torch.zeros(n, dtype=torch.long))
    w = w.gather(1, first[:, None])[:, 0]
    h = h.gather(1, first[:, None])[:, 0]
    # No valid try: the central crop of the clamped ratio over the whole image (torchvision's fallback).
    in_ratio = width / height
    if in_ratio < ratio[0]:
        fw, fh = width, int(round(width / ratio[0]))
    elif in_ratio > ratio[1]:
        fw, fh = int(round(height * ratio[1])), height
    else:
        fw, fh = width, height
    bad = ~ok.any(1)
    w = torch.where(bad, fw, w)
    h = torch.where(bad, fh, h)
    u = torch.rand(n, 2, generator=generator)
    x0 = (u[:, 0] * (width - w + 1).float()).floor().long()
    y0 = (u[:, 1] * (height - h + 1).float()).floor().long()
    x0 = torch.where(bad, (width - w) // 2, x0)
    y0 = torch.where(bad, (height - h) // 2, y0)
    return torch.stack([x0, y0, w, h], 1)


def crop_grid(boxes: torch.Tensor, flip: torch.Tensor, height: int, width: int, size: int) -> torch.Tensor:
    """``grid_sample`` grid ``[n, size, size, 2]`` (align_corners=False) that resizes each crop
    ``boxes`` ``[n, 4]`` (x0, y0, w, h) to ``size x size``, mirrored where ``flip`` ``[n]`` is True."""
    x0, y0, w, h = boxes.float().unbind(1)
    t = (torch.arange(size, dtype=torch.float32) + 0.5) / size  # output pixel centres in (0, 1)
    fx = torch.where(flip[:, None], 1.0 - t, t)
    gx = 2.0 * (x0[:, None] + fx * w[:, None]) / width - 1.0     # [n, size]
    gy = 2.0 * (y0[:, None] + t * h[:, None]) / height - 1.0     # [n, size]
    n = boxes.shape[0]
    return torch.stack([gx[:, None, :].expand(n, size, size), gy[:, :, None].expand(n, size, size)], -1)


def _autocontrast(x: torch.Tensor) -> torch.Tensor:
    lo = x.amin(dim=(-2, -1), keepdim=True)
    hi = x.amax(dim=(-2, -1), keepdim=True)
    return torch.where(hi > lo, (x - lo) / (hi - lo).clamp_min(1e-6), x)


def _photometric(name: str, x: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
    """AugMix colour operation ``name`` on ``x`` ``[m, C, H, W]`` with strengths ``level`` ``[m]``."""
    if name == "autocontrast":
        return _autocontrast(x)
    if name == "equalize":
        return kornia.enhance.equalize(x)
    if name == "posterize":
        return kornia.enhance.posterize(x, (4 - (level.abs() * 4).long()).clamp(1, 8))
    return kornia.enhance.solarize(x, 1.0 - level.abs())


def _geometric_matrices(op: torch.Tensor, level: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Affine matrices ``[m, 2, 3]`` (pixels, about the image centre) of the geometric AugMix
    operations ``op`` ``[m]`` (indices into :data:`AUGMIX_OPS`) with signed strengths ``level``."""
    def is_(name: str) -> torch.Tensor:
        return (op == AUGMIX_OPS.index(name)).to(level.dtype)

    angle = torch.deg2rad(level * 30.0) * is_("rotate")
    cos, sin = torch.cos(angle), torch.sin(angle)
    a = torch.stack([torch.stack([cos, -sin + 0.3 * level * is_("shear_x")], -1),
                     torch.stack([sin + 0.3 * level * is_("shear_y"), cos], -1)], -2)  # [m, 2, 2]
    shift = torch.stack([level * width / 3.0 * is_("translate_x"), level * height / 3.0 * is_("translate_y")], -1)
    c = torch.tensor([(width - 1) / 2.0, (height - 1) / 2.0], dtype=level.dtype, device=level.device)
    t = c - a @ c + shift
    return torch.cat([a, t[..., None]], -1)


def augmix(x: torch.Tensor, generator: torch.Generator | None = None, severity: float = 1.0,
           width: int = 3, depth: int = -1) -> torch.Tensor:
    """Batched AugMix of ``x`` ``[M, C, H, W]`` in [0, 1]: ``width`` chains of ``depth`` (random 1..3
    when -1) random operations, mixed with Dirichlet(1) weights, then blended with the input by a
    Beta(1, 1) factor (AugMix's defaults, as TPT uses them). In each chain step every colour
    operation runs once on the views that drew it, and all geometric ones (rotate, shear,
    translate) in a single ``warp_affine`` with per-view matrices."""
    M, _, H, W = x.shape
    dev = x.device
    # Dirichlet(1, ..., 1) = normalised Exp(1) draws, and Beta(1, 1) = uniform: both from `generator`.
    e = -torch.log(torch.rand(M, width, generator=generator).clamp_min(1e-12))
    w = e / e.sum(1, keepdim=True)
    m = torch.rand(M, generator=generator)
    depths = (torch.randint(1, 4, (M, width), generator=generator) if depth <= 0
              else torch.full((M, width), depth))
    ops = torch.randint(0, len(AUGMIX_OPS), (M, width, 3), generator=generator)
    # AugMix's strengths: U(0.1, severity) / 10 of each operation's maximum, with a random sign.
    levels = (0.1 + torch.rand(M, width, 3, generator=generator) * (severity - 0.1)) / 10.0
    levels = levels * torch.where(torch.rand(M, width, 3, generator=generator) < 0.5, -1.0, 1.0)
    first_geometric = AUGMIX_OPS.index("rotate")
    mix = torch.zeros_like(x)
    for k in range(width):
        y = x.clone()  # updated in place: a view draws one operation per step
        for d in range(int(depths[:, k].max())):
            active = depths[:, k] > d
            op, lv = ops[:, k, d], levels[:, k, d]
            for o in range(first_geometric):
                sel = (active & (op == o)).nonzero().squeeze(1)
                if sel.numel():
                    y[sel.to(dev)] = _photometric(AUGMIX_OPS[o], y[sel.to(dev)], lv[sel].to(dev, x.dtype))
            sel = (active & (op >= first_geometric)).nonzero().squeeze(1)
            if sel.numel():
                mats = _geometric_matrices(op[sel], lv[sel], H, W).to(dev, x.dtype)
                y[sel.to(dev)] = kornia.geometry.transform.warp_affine(y[sel.to(dev)], mats, (H, W),
                                                                        align_corners=True)
        mix.addcmul_(w[:, k].to(dev, x.dtype).view(M, 1, 1, 1), y)
    m = m.to(dev, x.dtype).view(M, 1, 1, 1)
    return (1.0 - m) * x + m * mix


class TTAViews(nn.Module):
    """``N`` views per image for test-time adaptation.

    Args:
        n_views: views per image ``N`` (view 0 is the original).
        size: output side.
        scale, ratio: random-resized-crop ranges (TPT uses torchvision's defaults).
        flip: random horizontal flips.
        augmix: AugMix the augmented views (TPT's setting for fine-grained sets).
        augmix_severity: AugMix operation strength (1..10).
        mean, std: normalise the output when given (per channel).
        seed: seed of a private generator (ignored when ``generator`` is given).
        generator: CPU generator for all random parameters.

    ``forward(images)``: ``[C, H, W]`` or ``[B, C, H, W]`` float on any device ->
    ``[B * N, C, size, size]``, image-major (views of image ``b`` are rows ``b*N .. b*N + N - 1``).
    """

    def __init__(self, n_views: int = 64, size: int = 224, scale: tuple[float, float] = (0.08, 1.0),
                 ratio: tuple[float, float] = (3 / 4, 4 / 3), flip: bool = True, augmix: bool = False,
                 augmix_severity: float = 1.0, mean: Sequence[float] | None = None,
                 std: Sequence[float] | None = None, seed: int | None = None,
                 generator: torch.Generator | None = None):
        super().__init__()
        if n_views < 1:
            raise ValueError("n_views must be >= 1")
        self.n_views, self.size, self.scale, self.ratio = n_views, size, tuple(scale), tuple(ratio)
        self.flip, self.augmix, self.augmix_severity = flip, augmix, augmix_severity
        self.generator = generator if generator is not None else (
            torch.Generator().manual_seed(seed) if seed is not None else None)
        self.register_buffer("mean", None if mean is None else torch.tensor(mean).view(1, -1, 1, 1), persistent=False)
        self.register_buffer("std", None if std is None else torch.tensor(std).view(1, -1, 1, 1), persistent=False)

    def original(self, x: torch.Tensor) -> torch.Tensor:
        """View 0 of ``x`` ``[B, C, H, W]``: short side resized to ``size`` (antialiased), centre crop."""
        H, W = x.shape[-2:]
        s = self.size / min(H, W)
        h, w = max(self.size, round(H * s)), max(self.size, round(W * s))
        x = F.interpolate(x, size=(h, w), mode="bilinear", antialias=True, align_corners=False)
        top, left = (h - self.size) // 2, (w - self.size) // 2
        return x[..., top:top + self.size, left:left + self.size]

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images[None] if images.ndim == 3 else images
        B, C, H, W = x.shape
        k = self.n_views - 1
        views = self.original(x)[:, None]  # [B, 1, C, S, S]
        if k:
            boxes = sample_crops(B * k, H, W, self.scale, self.ratio, self.generator)
            flip = torch.rand(B * k, generator=self.generator) < 0.5
            if not self.flip:
                flip = torch.zeros_like(flip)
            grid = crop_grid(boxes, flip, H, W, self.size).to(x.device, x.dtype)
            src = x[:, None].expand(B, k, C, H, W).reshape(B * k, C, H, W)  # a view: no copy
            aug = F.grid_sample(src, grid, mode="bilinear", padding_mode="border", align_corners=False)
            if self.augmix:
                aug = augmix(aug.clamp(0, 1), self.generator, self.augmix_severity)
            views = torch.cat([views, aug.view(B, k, C, self.size, self.size)], 1)
        out = views.reshape(B * self.n_views, C, self.size, self.size)
        if self.mean is not None:
            out = (out - self.mean.to(out)) / self.std.to(out)
        return out
