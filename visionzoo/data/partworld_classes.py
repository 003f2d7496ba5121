"""PartWorld's object types: 160 classes built from parts, their names and the class split.

Every class is an object made of the same five semantic part *slots* (:data:`PART_SLOTS`):
body, head, left limb, right limb, tail. A class fixes, per slot, the shape, colour, texture,
size and placement relative to the body, and the overall layout (``flat``: a horizontal body with
legs, head on the right and tail on the left; ``upright``: a tall body with arms, head on top and
tail below). Images then vary position, scale, rotation, pose, colour and background.

Classes never change with the dataset seed: they are drawn once from :data:`WORLD_KEY`.
Class ``0..59`` are the *pretraining* classes, ``60..159`` the *downstream* classes (disjoint;
100 downstream classes allow 10 continual-learning tasks of 10 classes).

Names are readable and built from attributes: ``"{texture} {body colour} {head} {noun}"`` where
the noun is given by body shape and layout, e.g. ``"striped red horned glider"``. Names are unique.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

from . import hashrng

WORLD_KEY = 20260501
NUM_CLASSES = 160
PRETRAIN_CLASSES: tuple[int, ...] = tuple(range(0, 60))
DOWNSTREAM_CLASSES: tuple[int, ...] = tuple(range(60, 160))

PART_SLOTS: tuple[str, ...] = ("body", "head", "left limb", "right limb", "tail")
DRAW_ORDER: tuple[int, ...] = (4, 2, 3, 0, 1)  # painter's order: tail, limbs, body, head on top

SHAPES: tuple[str, ...] = ("ellipse", "rectangle", "triangle", "diamond", "star", "ring", "cross", "hexagon")
TEXTURES: tuple[str, ...] = ("plain", "stripes", "dots", "checker")
LAYOUTS: tuple[str, ...] = ("flat", "upright")

COLOURS: dict[str, tuple[float, float, float]] = {
    "red": (0.85, 0.15, 0.15), "orange": (0.95, 0.55, 0.10), "yellow": (0.95, 0.85, 0.15),
    "lime": (0.60, 0.90, 0.20), "green": (0.15, 0.55, 0.20), "teal": (0.10, 0.55, 0.55),
    "blue": (0.15, 0.35, 0.85), "purple": (0.55, 0.25, 0.75), "pink": (0.95, 0.50, 0.70),
    "brown": (0.50, 0.30, 0.12), "white": (0.96, 0.96, 0.94), "black": (0.10, 0.10, 0.12),
}
COLOUR_NAMES: tuple[str, ...] = tuple(COLOURS)

TEXTURE_WORDS = {"plain": "smooth", "stripes": "striped", "dots": "spotted", "checker": "checkered"}
HEAD_WORDS = {"ellipse": "round", "rectangle": "boxy", "triangle": "horned", "diamond": "beaked",
              "star": "spiky", "ring": "ringed", "cross": "crested", "hexagon": "helmeted"}
NOUNS = {
    "flat": {"ellipse": "glider", "rectangle": "crawler", "triangle": "skimmer", "diamond": "darter",
             "star": "drifter", "ring": "roller", "cross": "skater", "hexagon": "trundler"},
    "upright": {"ellipse": "bobber", "rectangle": "walker", "triangle": "hopper", "diamond": "dancer",
                "star": "stomper", "ring": "wobbler", "cross": "strider", "hexagon": "lumberer"},
}


@dataclass(frozen=True)
class ClassTable:
    """Per-class part parameters, all ``[C, P, ...]`` with ``P = 5`` slots in :data:`PART_SLOTS` order.

    Lengths are in *object units* (the object spans roughly ``[-1, 1]``; body centred at 0).
    """

    names: tuple[str, ...]
    layout: torch.Tensor        # [C] int64, index into LAYOUTS
    shape: torch.Tensor         # [C, P] int64, index into SHAPES
    colour: torch.Tensor        # [C, P] int64, index into COLOURS
    texture: torch.Tensor       # [C, P] int64, index into TEXTURES
    tex_freq: torch.Tensor      # [C, P] float32, texture cycles across a part's half-size
    offset: torch.Tensor        # [C, P, 2] float32, part centre (x, y) relative to the body centre
    half: torch.Tensor          # [C, P, 2] float32, half sizes along the part's own (u, v) axes
    tilt: torch.Tensor          # [C, P] float32, part rotation as t = tan(angle / 2)

    def rgb(self) -> torch.Tensor:
        """Part colours ``[C, P, 3]`` float32 in [0, 1]."""
        return _palette()[self.colour]


def _palette() -> torch.Tensor:
    return torch.tensor(list(COLOURS.values()), dtype=torch.float32)


def _lerp(u: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    return lo + (hi - lo) * u


def _draw_name_tuple(j: int) -> tuple[int, int, int, int, int]:
    """Candidate ``(texture, body colour, head shape, body shape, layout)`` number ``j``."""
    r = hashrng.randint(hashrng.combine(WORLD_KEY, 1, j), stream=1, n=5, high=1 << 20)
    sizes = (len(TEXTURES), len(COLOURS), len(SHAPES), len(SHAPES), len(LAYOUTS))
    t, c, h, b, lay = (int(r[i]) % sizes[i] for i in range(5))
    return t, c, h, b, lay


@lru_cache(maxsize=1)
def class_table() -> ClassTable:
    """The fixed table of all :data:`NUM_CLASSES` classes (cached)."""
    tuples: list[tuple[int, int, int, int, int]] = []
    seen: set[tuple[int, int, int, int, int]] = set()
    j = 0
    while len(tuples) < NUM_CLASSES:
        cand = _draw_name_tuple(j)
        j += 1
        if cand not in seen:
            seen.add(cand)
            tuples.append(cand)
    tup = torch.tensor(tuples, dtype=torch.int64)  # [C, 5]
    tex_body, col_body, head_shape, body_shape, layout = tup.unbind(1)
    C = NUM_CLASSES
    keys = hashrng.combine(WORLD_KEY, 2, torch.arange(C))
    u = hashrng.uniform(keys, stream=2, n=32)  # [C, 32] class-level draws
    ri = hashrng.randint(keys, stream=3, n=8, high=1 << 20)

    shape = torch.stack([body_shape, head_shape, ri[:, 0] % len(SHAPES), ri[:, 0] % len(SHAPES),
                         ri[:, 1] % len(SHAPES)], 1)
    accent = (col_body + 1 + ri[:, 2] % (len(COLOURS) - 1)) % len(COLOURS)  # never the body colour
    limb_col = torch.where(u[:, 0] < 0.5, accent, col_body)
    tail_col = torch.where(u[:, 1] < 0.5, accent, col_body)
    colour = torch.stack([col_body, accent, limb_col, limb_col, tail_col], 1)
    limb_tex = torch.where(u[:, 2] < 0.4, tex_body, torch.zeros_like(tex_body))
    head_tex = torch.where(u[:, 3] < 0.3, 1 + ri[:, 3] % 3, torch.zeros_like(tex_body))
    texture = torch.stack([tex_body, head_tex, limb_tex, limb_tex,
                           ri[:, 4] % len(TEXTURES)], 1)
    tex_freq = _lerp(u[:, 4:9], 1.2, 2.2)

    flat = layout == 0
    bw = torch.where(flat, _lerp(u[:, 10], 0.42, 0.55), _lerp(u[:, 10], 0.24, 0.34))
    bh = torch.where(flat, _lerp(u[:, 11], 0.24, 0.34), _lerp(u[:, 11], 0.40, 0.52))
    hs = _lerp(u[:, 12], 0.15, 0.23)
    ll = _lerp(u[:, 13], 0.15, 0.24)   # limb length (half)
    lw = _lerp(u[:, 14], 0.07, 0.12)   # limb width (half)
    tl = _lerp(u[:, 15], 0.13, 0.22)   # tail length (half)
    tw = _lerp(u[:, 16], 0.06, 0.12)
    zero = torch.zeros_like(bw)
    head_xy = torch.where(flat[:, None], torch.stack([bw + 0.55 * hs, -0.6 * bh], 1),
                          torch.stack([zero, -bh - 0.55 * hs], 1))
    limb_x = torch.where(flat, 0.45 * bw, bw + 0.55 * ll)
    limb_y = torch.where(flat, bh + 0.6 * ll, -0.25 * bh)
    tail_xy = torch.where(flat[:, None], torch.stack([-bw - 0.55 * tl, -0.3 * bh], 1),
                          torch.stack([zero, bh + 0.55 * tl], 1))
    offset = torch.stack([torch.zeros(C, 2), head_xy, torch.stack([-limb_x, limb_y], 1),
                          torch.stack([limb_x, limb_y], 1), tail_xy], 1)
    # Limbs are long along v for legs (flat) and along u for arms (upright); tails along the body axis.
    limb_half = torch.where(flat[:, None], torch.stack([lw, ll], 1), torch.stack([ll, lw], 1))
    tail_half = torch.where(flat[:, None], torch.stack([tl, tw], 1), torch.stack([tw, tl], 1))
    half = torch.stack([torch.stack([bw, bh], 1), torch.stack([hs, hs * _lerp(u[:, 17], 0.8, 1.1)], 1),
                        limb_half, limb_half, tail_half], 1)
    limb_tilt = _lerp(u[:, 18], -0.3, 0.3)
    tilt = torch.stack([_lerp(u[:, 19], -0.08, 0.08), _lerp(u[:, 20], -0.15, 0.15), limb_tilt, -limb_tilt,
                        _lerp(u[:, 21], -0.3, 0.3)], 1)
    names = tuple(class_name(*t) for t in tuples)
    assert len(set(names)) == C
    return ClassTable(names, layout, shape, colour, texture, tex_freq.contiguous(), offset.contiguous(),
                      half.contiguous(), tilt.contiguous())


def class_name(texture: int, colour: int, head: int, body: int, layout: int) -> str:
    """The readable class name of a ``(texture, colour, head shape, body shape, layout)`` tuple."""
    lay = LAYOUTS[layout]
    return " ".join([TEXTURE_WORDS[TEXTURES[texture]], COLOUR_NAMES[colour], HEAD_WORDS[SHAPES[head]],
                     NOUNS[lay][SHAPES[body]]])


def class_ids(classes: str | list[int] | tuple[int, ...]) -> tuple[int, ...]:
    """World class ids of ``"pretrain"``, ``"downstream"``, ``"all"`` or an explicit list."""
    if isinstance(classes, str):
        table = {"pretrain": PRETRAIN_CLASSES, "downstream": DOWNSTREAM_CLASSES,
                 "all": tuple(range(NUM_CLASSES))}
        if classes not in table:
            raise ValueError(f"classes must be one of {sorted(table)} or a list of ids, got {classes!r}")
        return table[classes]
    ids = tuple(int(c) for c in classes)
    bad = [c for c in ids if not 0 <= c < NUM_CLASSES]
    if bad:
        raise ValueError(f"PartWorld class ids must lie in [0, {NUM_CLASSES}), got {bad}")
    return ids
