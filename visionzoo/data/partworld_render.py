"""Batched rasterisation of PartWorld scenes: analytic shapes, textures, compositing, ground truth.

Everything here is float32 elementwise arithmetic (+, -, *, /, sqrt, floor, comparisons) and
integer hashing, so the same keys give the same bytes on any machine: no trigonometry (rotations
use the rational parametrisation ``cos = (1 - t^2) / (1 + t^2)``, ``sin = 2t / (1 + t^2)``), no
convolutions, no reductions over floats.

Coordinates: pixel ``(row r, column c)`` covers ``[c, c + 1) x [r, r + 1)`` and is sampled at its
centre ``(c + 0.5, r + 0.5)``. Keypoints are integer pixel indices ``(x = c, y = r)`` with
``part_masks[p, y, x]`` True when visible; boxes are ``(x0, y0, x1, y1)`` with exclusive
``x1, y1`` (torchvision's XYXY convention).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import hashrng
from .partworld_classes import COLOURS, DRAW_ORDER, PART_SLOTS, SHAPES, class_table

# Hash streams: one per use, so no two uses share random numbers.
S_SCENE, S_BG, S_CLUTTER, S_OCCLUDER = 11, 12, 13, 14

BACKGROUNDS: dict[str, tuple[float, float, float]] = {
    "beige": (0.86, 0.80, 0.68), "pale blue": (0.70, 0.80, 0.90), "pale green": (0.72, 0.85, 0.70),
    "grey": (0.58, 0.58, 0.58), "dark grey": (0.28, 0.28, 0.30), "lavender": (0.80, 0.75, 0.88),
}
BACKGROUND_NAMES: tuple[str, ...] = tuple(BACKGROUNDS)


@dataclass
class Layers:
    """``L`` shapes per image, all ``[B, L]`` (colours ``[B, L, 3]``); lengths in pixels."""

    cx: torch.Tensor
    cy: torch.Tensor
    a: torch.Tensor          # half size along the shape's u axis
    b: torch.Tensor          # half size along the shape's v axis
    cos: torch.Tensor
    sin: torch.Tensor
    shape: torch.Tensor      # int64 index into SHAPES
    colour: torch.Tensor     # [B, L, 3]
    texture: torch.Tensor    # int64 index into TEXTURES (0 = plain)
    tex_freq: torch.Tensor
    tex_colour: torch.Tensor  # [B, L, 3]


@dataclass
class Scene:
    """Per-image draws that captions and meta need besides the pixels."""

    background: torch.Tensor  # [B] int64 index into BACKGROUNDS
    centre: torch.Tensor      # [B, 2] object centre in [-1, 1] image units (x, y)
    scale: torch.Tensor       # [B] object scale (fraction of the half image per object unit)


@dataclass
class Render:
    """Rendered batch. ``image`` ``[B, 3, H, W]`` float in [0, 1]; ``region`` ``[B, H, W]`` int64
    (0 background, else ``1 + 2 * layer + texture bit`` of the visible layer); ``flat`` ``[B, 3, H, W]``
    (untextured colours on a plain background) when asked for; ``keypoints`` ``[B, P, 3]`` float
    (x, y, visible); ``box`` ``[B, 4]`` float; ``part_masks`` ``[B, P, H, W]`` bool (visible pixels);
    ``occluder`` ``[B, H, W]`` bool (pixels covered by occluders in front of the object)."""

    image: torch.Tensor
    region: torch.Tensor
    flat: torch.Tensor | None
    keypoints: torch.Tensor
    box: torch.Tensor
    part_masks: torch.Tensor
    occluder: torch.Tensor
    scene: Scene


def _lerp(u: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    return lo + (hi - lo) * u


def rotation(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cos, sin)`` of the angle ``2 atan(t)``, from rational functions only."""
    t2 = t * t
    den = 1.0 + t2
    return (1.0 - t2) / den, (2.0 * t) / den


def _gauge(k: int, un: torch.Tensor, vn: torch.Tensor) -> torch.Tensor:
    """Shape ``SHAPES[k]`` as a gauge of normalised coordinates: inside iff the value is < 1."""
    name = SHAPES[k]
    au, av = un.abs(), vn.abs()
    if name == "ellipse":
        return torch.sqrt(un * un + vn * vn)
    if name == "rectangle":
        return torch.maximum(au, av)
    if name == "triangle":  # apex at v = -1, base on v = 1
        return torch.maximum(vn, 2.0 * au - vn)
    if name == "diamond":
        return au + av
    if name == "star":  # four-pointed astroid
        s = torch.sqrt(au) + torch.sqrt(av)
        return s * s
    if name == "ring":  # annulus between radii 0.6 and 1
        r = torch.sqrt(un * un + vn * vn)
        return torch.maximum(r, 1.6 - r)
    if name == "cross":
        return torch.maximum(torch.maximum(au, av), torch.minimum(au, av) * (1.0 / 0.35))
    if name == "hexagon":
        return torch.maximum(av * (1.0 / 0.866), au + 0.57735 * av)
    raise AssertionError(name)


def _texture(k: int, un: torch.Tensor, vn: torch.Tensor, freq: torch.Tensor) -> torch.Tensor:
    """Texture ``k`` (1 stripes, 2 dots, 3 checker) as 0/1 float on normalised coordinates."""
    su, sv = un * freq, vn * freq
    if k == 1:
        return ((su - su.floor()) < 0.5).float()
    if k == 2:
        fu = su - su.floor() - 0.5
        fv = sv - sv.floor() - 0.5
        return ((fu * fu + fv * fv) < 0.1).float()
    cells = su.floor() + sv.floor()
    return ((cells - 2.0 * (cells * 0.5).floor()) > 0.5).float()


def _grouped(fn, ids: torch.Tensor, n: int, un: torch.Tensor, vn: torch.Tensor, *extra: torch.Tensor,
             skip: tuple[int, ...] = (), fill: float = 0.0) -> torch.Tensor:
    """Evaluate ``fn(k, un, vn, *extra)`` only on the layers whose id is ``k`` (one call per id)."""
    flat_ids = ids.reshape(-1)
    shp = un.shape
    un, vn = un.reshape(-1, *shp[2:]), vn.reshape(-1, *shp[2:])
    extra = tuple(e.reshape(-1, 1, 1) for e in extra)
    out = torch.full_like(un, fill)
    for k in range(n):
        if k in skip:
            continue
        idx = (flat_ids == k).nonzero().squeeze(1)
        if idx.numel():
            out[idx] = fn(k, un[idx], vn[idx], *(e[idx] for e in extra))
    return out.reshape(shp)


def rasterise(layers: Layers, size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Coverage of every layer.

    Returns:
        ``alpha`` ``[B, L, H, W]`` anti-aliased coverage in [0, 1], ``inside`` ``[B, L, H, W]`` bool
        (``alpha > 0.5``), and the normalised shape coordinates ``un, vn`` ``[B, L, H, W]``.
    """
    grid = torch.arange(size, dtype=torch.float32) + 0.5
    dx = grid.view(1, 1, 1, size) - layers.cx[..., None, None]   # [B, L, 1, W]
    dy = grid.view(1, 1, size, 1) - layers.cy[..., None, None]   # [B, L, H, 1]
    c, s = layers.cos[..., None, None], layers.sin[..., None, None]
    un = (dx * c + dy * s) / layers.a[..., None, None]
    vn = (dy * c - dx * s) / layers.b[..., None, None]
    d = _grouped(_gauge, layers.shape, len(SHAPES), un, vn)
    # One pixel of soft edge: the gauge grows by about 1 / min(a, b) per pixel.
    soft = torch.minimum(layers.a, layers.b)[..., None, None]
    alpha = ((1.0 - d) * soft + 0.5).clamp(0.0, 1.0)
    return alpha, alpha > 0.5, un, vn


def texture_bits(layers: Layers, un: torch.Tensor, vn: torch.Tensor) -> torch.Tensor:
    """0/1 texture pattern of every layer ``[B, L, H, W]`` (0 for plain layers)."""
    return _grouped(_texture, layers.texture, 4, un, vn, layers.tex_freq, skip=(0,))


def composite(canvas: torch.Tensor, layers: Layers, alpha: torch.Tensor, tex: torch.Tensor | None,
              order: tuple[int, ...] | None = None) -> torch.Tensor:
    """Paint layers over ``canvas`` ``[B, 3, H, W]`` in ``order`` (default 0..L-1), mixing in each
    layer's texture colour where ``tex`` ``[B, L, H, W]`` is 1 (no texture when ``tex`` is None)."""
    order = tuple(range(alpha.shape[1])) if order is None else order
    for i in order:
        col = layers.colour[:, i, :, None, None]
        if tex is not None:
            col = col + (layers.tex_colour[:, i, :, None, None] - col) * tex[:, i, None]
        canvas = canvas + (col - canvas) * alpha[:, i, None]
    return canvas


def contrast_colour(rgb: torch.Tensor) -> torch.Tensor:
    """A darker (or, for dark colours, lighter) version of ``rgb`` ``[..., 3]`` for textures."""
    luma = 0.299 * rgb[..., 0:1] + 0.587 * rgb[..., 1:2] + 0.114 * rgb[..., 2:3]
    return torch.where(luma > 0.35, rgb * 0.45, rgb * 0.5 + 0.45)


def sample_scene(keys: torch.Tensor) -> Scene:
    """Background, object centre and scale of each image (cheap: no pixels)."""
    u = hashrng.uniform(keys, S_SCENE, 3)
    scale = _lerp(u[:, 0], 0.8, 1.05)
    centre = torch.stack([_lerp(u[:, 1], -0.1, 0.1), _lerp(u[:, 2], -0.1, 0.1)], 1)
    bg = hashrng.randint(keys, S_BG, 1, len(BACKGROUNDS))[:, 0]
    return Scene(bg, centre, scale)


def object_layers(class_ids: torch.Tensor, keys: torch.Tensor, size: int) -> tuple[Layers, Scene]:
    """The five part layers (slot order) of one object per image, with per-image nuisances."""
    table = class_table()
    B, P = class_ids.shape[0], len(PART_SLOTS)
    u = hashrng.uniform(keys, S_SCENE, 32)
    scene = sample_scene(keys)
    scale, centre = scene.scale, scene.centre
    oc, os_ = rotation(_lerp(u[:, 3], -0.18, 0.18))
    amp = torch.tensor([0.04, 0.08, 0.12, 0.12, 0.15])
    tilt = table.tilt[class_ids] + (2.0 * u[:, 4:9] - 1.0) * amp
    pc, ps = rotation(tilt)
    offset = table.offset[class_ids] + (2.0 * u[:, 9:19].view(B, P, 2) - 1.0) * 0.03
    # Rotate the layout by the object angle, scale it, then map [-1, 1] image units to pixels.
    ox, oy = offset[..., 0], offset[..., 1]
    rx = ox * oc[:, None] - oy * os_[:, None]
    ry = ox * os_[:, None] + oy * oc[:, None]
    half_px = size * 0.5
    cx = (centre[:, 0:1] + rx * scale[:, None] + 1.0) * half_px
    cy = (centre[:, 1:2] + ry * scale[:, None] + 1.0) * half_px
    half = table.half[class_ids] * (scale * half_px)[:, None, None]
    cos = pc * oc[:, None] - ps * os_[:, None]
    sin = ps * oc[:, None] + pc * os_[:, None]
    rgb = table.rgb()[class_ids] * _lerp(u[:, 19:24], 0.88, 1.08)[..., None]
    rgb = rgb.clamp(0.0, 1.0)
    layers = Layers(cx, cy, half[..., 0], half[..., 1], cos, sin, table.shape[class_ids], rgb,
                    table.texture[class_ids], table.tex_freq[class_ids], contrast_colour(rgb))
    return layers, scene


def random_layers(keys: torch.Tensor, stream: int, n: int, size: int, around: torch.Tensor | None = None,
                  spread: float = 1.0, size_range: tuple[float, float] = (0.05, 0.12)) -> Layers:
    """``n`` random shapes per image (clutter or occluders); centres uniform in the image, or within
    ``spread`` (image units) of ``around`` ``[B, 2]``."""
    B = keys.shape[0]
    u = hashrng.uniform(keys, stream, 10 * n).view(B, n, 10)
    ri = hashrng.randint(keys, stream + 100, 3 * n, 1 << 20).view(B, n, 3)
    base = torch.zeros(B, 2) if around is None else around
    cx = (base[:, None, 0] + (2.0 * u[..., 0] - 1.0) * spread + 1.0) * (size * 0.5)
    cy = (base[:, None, 1] + (2.0 * u[..., 1] - 1.0) * spread + 1.0) * (size * 0.5)
    a = _lerp(u[..., 2], *size_range) * size
    b = a * _lerp(u[..., 3], 0.35, 1.0)
    cos, sin = rotation(_lerp(u[..., 4], -1.0, 1.0))
    palette = torch.tensor(list(COLOURS.values()), dtype=torch.float32)
    rgb = palette[ri[..., 0] % len(COLOURS)] * _lerp(u[..., 5:6], 0.7, 1.0)
    return Layers(cx, cy, a, b, cos, sin, ri[..., 1] % len(SHAPES), rgb, ri[..., 2] % 4,
                  _lerp(u[..., 6], 1.2, 2.5), contrast_colour(rgb))


def background(keys: torch.Tensor, bg: torch.Tensor, size: int, plain: bool = False) -> torch.Tensor:
    """Backgrounds ``[B, 3, H, W]``: a tint, a soft linear gradient and a faint pattern."""
    B = keys.shape[0]
    base = torch.tensor(list(BACKGROUNDS.values()), dtype=torch.float32)[bg][:, :, None, None]
    if plain:
        return base.expand(B, 3, size, size).clone()
    u = hashrng.uniform(keys, S_BG + 50, 6)
    g = (torch.arange(size, dtype=torch.float32) + 0.5) * (2.0 / size) - 1.0
    gx, gy = _lerp(u[:, 0], -0.08, 0.08), _lerp(u[:, 1], -0.08, 0.08)
    ramp = g.view(1, 1, 1, size) * gx.view(B, 1, 1, 1) + g.view(1, 1, size, 1) * gy.view(B, 1, 1, 1)
    freq = _lerp(u[:, 2], 3.0, 8.0).view(B, 1, 1, 1)
    stripes = (g.view(1, 1, 1, size) + g.view(1, 1, size, 1) * (2.0 * u[:, 3] - 1.0).view(B, 1, 1, 1)) * freq
    pattern = ((stripes - stripes.floor()) < 0.5).float() * (u[:, 4] < 0.5).float().view(B, 1, 1, 1)
    return (base + ramp - 0.05 * pattern).clamp(0.0, 1.0)


def _keypoints(layers: Layers, visible: torch.Tensor) -> torch.Tensor:
    """Keypoint per part ``[B, P, 3]``: the visible pixel nearest to the part centre, so it always
    lies in the part's visible mask; ``visible = 0`` (and the clamped centre) if nothing is visible."""
    B, P, H, W = visible.shape
    grid = torch.arange(W, dtype=torch.float32) + 0.5
    dx = grid.view(1, 1, 1, W) - layers.cx[..., None, None]
    dy = grid.view(1, 1, H, 1) - layers.cy[..., None, None]
    d2 = torch.where(visible, dx * dx + dy * dy, torch.full((), float("inf")))
    idx = d2.view(B, P, H * W).argmin(-1)
    vis = visible.view(B, P, H * W).any(-1)
    x = torch.where(vis, idx % W, layers.cx.floor().long().clamp(0, W - 1))
    y = torch.where(vis, idx // W, layers.cy.floor().long().clamp(0, H - 1))
    return torch.stack([x.float(), y.float(), vis.float()], -1)


def _box(mask: torch.Tensor) -> torch.Tensor:
    """Tight XYXY box ``[B, 4]`` (exclusive max) of ``mask`` ``[B, H, W]``; zeros when empty."""
    B, H, W = mask.shape
    cols, rows = mask.any(1), mask.any(2)
    ar_w, ar_h = torch.arange(W), torch.arange(H)
    x0 = torch.where(cols, ar_w, W).min(1).values
    x1 = torch.where(cols, ar_w + 1, 0).max(1).values
    y0 = torch.where(rows, ar_h, H).min(1).values
    y1 = torch.where(rows, ar_h + 1, 0).max(1).values
    box = torch.stack([x0, y0, x1, y1], 1).float()
    return torch.where(mask.view(B, -1).any(1, keepdim=True), box, torch.zeros_like(box))


def render(class_ids: torch.Tensor, keys: torch.Tensor, size: int, clutter: int = 0, occluders: int = 0,
           want_flat: bool = False) -> Render:
    """Render one object per image.

    Args:
        class_ids: world class ids ``[B]``.
        keys: per-image hash keys ``[B]`` (see :func:`visionzoo.data.hashrng.combine`).
        size: image side ``H = W`` in pixels.
        clutter: random shapes drawn behind the object.
        occluders: random shapes drawn in front of the object (meta is not changed by them;
            their pixels are reported in ``occluder``).
        want_flat: also return the untextured ``flat`` image (for the cartoon style).
    """
    B = class_ids.shape[0]
    obj, scene = object_layers(class_ids, keys, size)
    alpha, inside, un, vn = rasterise(obj, size)
    canvas = background(keys, scene.background, size)
    flat = background(keys, scene.background, size, plain=True) if want_flat else None

    # Visible part masks: covered by the part and by no part painted after it.
    visible = torch.zeros_like(inside)
    covered = torch.zeros(B, size, size, dtype=torch.bool)
    for p in reversed(DRAW_ORDER):
        visible[:, p] = inside[:, p] & ~covered
        covered |= inside[:, p]
    bits = texture_bits(obj, un, vn)
    region = torch.zeros(B, size, size, dtype=torch.int64)
    for p in range(len(PART_SLOTS)):
        region = torch.where(visible[:, p], 1 + 2 * p + bits[:, p].long(), region)

    if clutter:
        cl = random_layers(keys, S_CLUTTER, clutter, size)
        ca, _, cu, cv = rasterise(cl, size)
        canvas = composite(canvas, cl, ca, texture_bits(cl, cu, cv))
    canvas = composite(canvas, obj, alpha, bits, DRAW_ORDER)
    if flat is not None:
        flat = composite(flat, obj, alpha, None, DRAW_ORDER)
    occ = torch.zeros(B, size, size, dtype=torch.bool)
    if occluders:
        ol = random_layers(keys, S_OCCLUDER, occluders, size, around=scene.centre, spread=0.3,
                           size_range=(0.08, 0.15))
        oa, oin, ou, ov = rasterise(ol, size)
        canvas = composite(canvas, ol, oa, texture_bits(ol, ou, ov))
        occ = oin.any(1)
    return Render(canvas.clamp(0.0, 1.0), region, flat, _keypoints(obj, visible), _box(visible.any(1)),
                  visible, occ, scene)
