"""PartWorld text: prompts from class names and captions from each image's attributes."""

from __future__ import annotations

import torch

from .partworld_classes import COLOUR_NAMES, SHAPES, TEXTURE_WORDS, TEXTURES, class_table
from .partworld_render import BACKGROUND_NAMES, Scene

DEFAULT_TEMPLATE = "a photo of a {}."


def class_prompts(names: list[str] | tuple[str, ...], template: str = DEFAULT_TEMPLATE) -> list[str]:
    """``template.format(name)`` for every class name, e.g. ``"a photo of a striped red horned glider."``."""
    return [template.format(n) for n in names]


def _a(phrase: str) -> str:
    return ("an " if phrase[:1] in "aeiou" else "a ") + phrase


def _position(x: float) -> str:
    if x < -0.05:
        return "on the left"
    if x > 0.05:
        return "on the right"
    return "in the middle"


def _size(scale: float) -> str:
    if scale < 0.88:
        return "small "
    if scale > 0.97:
        return "large "
    return ""


def captions(class_ids: torch.Tensor, scene: Scene, phrase: str) -> list[str]:
    """One caption per image from its class attributes, scene draws and style phrase.

    Example: ``"a sketch of a large striped red horned glider with blue star limbs and a red ring
    tail, on the left, on a beige background."``
    """
    table = class_table()
    out = []
    for i, c in enumerate(class_ids.tolist()):
        limb_col, tail_col = COLOUR_NAMES[int(table.colour[c, 2])], COLOUR_NAMES[int(table.colour[c, 4])]
        limb, tail = SHAPES[int(table.shape[c, 2])], SHAPES[int(table.shape[c, 4])]
        tail_tex = TEXTURES[int(table.texture[c, 4])]
        tail_desc = f"{tail_col} {tail}" if tail_tex == "plain" else f"{TEXTURE_WORDS[tail_tex]} {tail_col} {tail}"
        size = _size(float(scene.scale[i]))
        bg = BACKGROUND_NAMES[int(scene.background[i])]
        out.append(f"{phrase} {_a(size + table.names[c])} with {limb_col} {limb} limbs "
                   f"and {_a(tail_desc)} tail, {_position(float(scene.centre[i, 0]))}, on a {bg} background.")
    return out
