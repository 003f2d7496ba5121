"""PartWorld styles: renderings of the same scenes that act as domain shifts.

``clean`` is the *source* style (what pretraining and in-domain training use); the others are
*shifted* styles in the spirit of ImageNet-Sketch/-R/-A and ImageNet-C:

=============  ===============================================================================
style          what changes
=============  ===============================================================================
clean          textured parts on a tinted, softly patterned background (source)
sketch         grey paper, ink outlines of parts and texture edges, light shading (ImageNet-Sketch)
painting       median-filtered, posterised colours and a blotchy canvas (ImageNet-R paintings)
cartoon        flat saturated colours without textures, plain background, thick outlines
noisy          strong per-pixel noise and salt-and-pepper (ImageNet-C noise)
blurred        a wide blur (ImageNet-C defocus)
colour-shift   colour channels mixed and permuted per image, contrast changed (class colours lie)
occluded       clutter shapes behind the object and occluders in front of it (ImageNet-A-like)
=============  ===============================================================================

Styles never change labels, keypoints, boxes or part masks (those describe the object's geometry).
Operations are elementwise, order statistics (kornia's median and posterize, exact) or fixed-order
sums of shifted slices: convolution backends sum in ISA-dependent orders, which would break
"same seed, same pixels on any machine".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import kornia
import torch
import torch.nn.functional as F

from . import hashrng
from .partworld_render import Render

SOURCE_STYLE = "clean"
SHIFTED_STYLES: tuple[str, ...] = ("sketch", "painting", "cartoon", "noisy", "blurred", "colour-shift",
                                   "occluded")
STYLES: tuple[str, ...] = (SOURCE_STYLE, *SHIFTED_STYLES)
ALIASES = {"source": SOURCE_STYLE, "color-shift": "colour-shift", "colour": "colour-shift",
           "color": "colour-shift", "clutter": "occluded", "cluttered": "occluded"}

S_STYLE = 31


@dataclass(frozen=True)
class Style:
    """How a style renders: extra layers for the renderer and a post-processing function."""

    name: str
    phrase: str                   # caption opening: "a sketch of"
    post: Callable[[Render, torch.Tensor], torch.Tensor] | None = None  # (render, keys) -> [B, 3, H, W]
    clutter: int = 0
    occluders: int = 0
    want_flat: bool = False


def luma(img: torch.Tensor) -> torch.Tensor:
    """Rec. 601 luma ``[B, 1, H, W]`` of ``[B, 3, H, W]``, as separate multiplies and adds (kornia's
    ``rgb_to_grayscale`` uses ``addcmul``, which may fuse to FMA on some CPUs and not on others)."""
    return (0.299 * img[:, 0:1] + 0.587 * img[:, 1:2]) + 0.114 * img[:, 2:3]


def _edges(region: torch.Tensor, width: int) -> torch.Tensor:
    """Pixels ``[B, 1, H, W]`` where ``region`` ``[B, H, W]`` changes, grown to ``width`` pixels."""
    r = F.pad(region[:, None].float(), (0, 1, 0, 1), mode="replicate")
    edge = (r[..., :-1, :-1] != r[..., :-1, 1:]) | (r[..., :-1, :-1] != r[..., 1:, :-1])
    edge = edge.float()
    if width > 1:
        edge = F.max_pool2d(edge, width, stride=1, padding=width // 2)[..., : region.shape[1], : region.shape[2]]
    return edge


def box_blur(img: torch.Tensor, radius: int, passes: int = 3) -> torch.Tensor:
    """Separable box blur ``[B, C, H, W]``, repeated ``passes`` times (three approximate a Gaussian of
    sigma ``sqrt(passes * ((2r + 1)^2 - 1) / 12)``), summed in a fixed order of shifted slices."""
    if radius < 1:
        return img
    w = 2 * radius + 1
    for _ in range(passes):
        for dim in (-1, -2):
            pad = (radius, radius, 0, 0) if dim == -1 else (0, 0, radius, radius)
            p = F.pad(img, pad, mode="replicate")
            n = img.shape[dim]
            acc = p.narrow(dim, 0, n)
            for k in range(1, w):
                acc = acc + p.narrow(dim, k, n)
            img = acc * (1.0 / w)
    return img


def _scale(size: int, at64: float) -> int:
    return max(1, round(at64 * size / 64))


def _sketch(r: Render, keys: torch.Tensor) -> torch.Tensor:
    size = r.image.shape[-1]
    shade = 1.0 - 0.35 * (1.0 - luma(r.image))
    shade = (shade * 4.0).floor() * 0.25 + 0.2  # a few flat tones, like hatching levels
    shade = torch.where(r.region[:, None] > 0, shade, 1.0)  # blank paper around the object
    grain = hashrng.uniform_field(keys, S_STYLE, (1, size, size))
    paper = (shade.clamp(max=1.0) - 0.04 * grain) * (1.0 - 0.8 * _edges(r.region, _scale(size, 1)))
    tint = 1.0 - hashrng.uniform(keys, S_STYLE + 1, 3)[:, :, None, None] * 0.06
    return paper * tint


def _painting(r: Render, keys: torch.Tensor) -> torch.Tensor:
    size = r.image.shape[-1]
    k = 2 * _scale(size, 1) + 1
    img = kornia.filters.median_blur(r.image, k)
    img = kornia.enhance.posterize(img.clamp(0, 1), 3)
    # Blotchy canvas: coarse noise, blown up with nearest neighbours (exact).
    cell = _scale(size, 4)
    n = -(-size // cell)
    blot = hashrng.uniform_field(keys, S_STYLE + 2, (1, n, n))
    blot = blot.repeat_interleave(cell, -1).repeat_interleave(cell, -2)[..., :size, :size]
    blot = box_blur(blot, cell // 2 + 1, passes=2)
    warm = torch.tensor([1.04, 1.0, 0.9]).view(1, 3, 1, 1)
    return img * warm * (0.92 + 0.16 * blot)


def _cartoon(r: Render, keys: torch.Tensor) -> torch.Tensor:
    img = r.flat
    y = luma(img)
    img = y + (img - y) * 1.5  # saturation up
    img = kornia.enhance.posterize(img.clamp(0, 1), 2) * 0.8 + 0.2 * img.clamp(0, 1)
    obj = (r.region > 0).float()[:, None]
    outline = _edges((r.region + 1) // 2, _scale(r.image.shape[-1], 2))  # part ids, textures ignored
    outline = outline * torch.maximum(obj, F.max_pool2d(obj, 3, stride=1, padding=1))
    return img * (1.0 - outline)


def _noisy(r: Render, keys: torch.Tensor) -> torch.Tensor:
    size = r.image.shape[-1]
    u = hashrng.uniform_field(keys, S_STYLE + 3, (5, 3, size, size))
    gauss = (u[:, 0] + u[:, 1] + u[:, 2] + u[:, 3] - 2.0) * 1.7320508  # Irwin-Hall(4), unit variance
    sigma = (0.08 + 0.12 * hashrng.uniform(keys, S_STYLE + 4, 1))[:, :, None, None]
    img = r.image + sigma * gauss
    salt = u[:, 4, 0:1]
    img = torch.where(salt < 0.02, 0.0, torch.where(salt > 0.98, 1.0, img))
    return img


def _blurred(r: Render, keys: torch.Tensor) -> torch.Tensor:
    return box_blur(r.image, _scale(r.image.shape[-1], 1.5))


_PERMUTATIONS = torch.tensor([[0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]])


def _colour_shift(r: Render, keys: torch.Tensor) -> torch.Tensor:
    img = r.image
    u = hashrng.uniform(keys, S_STYLE + 5, 6)
    perm = _PERMUTATIONS[hashrng.randint(keys, S_STYLE + 6, 1, len(_PERMUTATIONS))[:, 0]]  # [B, 3]
    shuffled = torch.gather(img, 1, perm[:, :, None, None].expand_as(img))
    m = (0.65 + 0.35 * u[:, 0])[:, None, None, None]
    gain = (0.8 + 0.4 * u[:, 1:4])[:, :, None, None]
    contrast = (0.7 + 0.5 * u[:, 4])[:, None, None, None]
    mixed = (img + (shuffled - img) * m) * gain
    return 0.5 + (mixed - 0.5) * contrast


_STYLES: dict[str, Style] = {s.name: s for s in (
    Style("clean", "a photo of"),
    Style("sketch", "a sketch of", _sketch),
    Style("painting", "a painting of", _painting),
    Style("cartoon", "a cartoon of", _cartoon, want_flat=True),
    Style("noisy", "a noisy photo of", _noisy),
    Style("blurred", "a blurry photo of", _blurred),
    Style("colour-shift", "an oddly coloured photo of", _colour_shift),
    Style("occluded", "a cluttered photo of", None, clutter=5, occluders=2),
)}


def get_style(name: str) -> Style:
    """The :class:`Style` called ``name`` (aliases: ``source`` = ``clean``, ``color-shift``...)."""
    key = ALIASES.get(name, name)
    if key not in _STYLES:
        from ..errors import unknown_name

        raise unknown_name("PartWorld style", name, list(_STYLES) + list(ALIASES))
    return _STYLES[key]
