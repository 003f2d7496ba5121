"""Images with part annotations through torchvision v2 transforms (meta follows the geometry).

A meta dict holds ``keypoints`` ``[P, 3]`` (x, y, visible) in pixel coordinates, ``box`` ``[4]``
(x0, y0, x1, y1) and optionally ``part_masks`` ``[P, H, W]`` bool. Geometric v2 transforms (resize,
crop, flip, affine...) move them with the image because they travel as ``tv_tensors``; keypoints
that leave the image become invisible.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torchvision import tv_tensors
from torchvision.transforms import v2


def to_float_image(image: torch.Tensor) -> torch.Tensor:
    """uint8 ``[C, H, W]`` -> float32 in [0, 1]; float input is returned unchanged."""
    return image.float().div_(255.0) if image.dtype == torch.uint8 else image


def apply_transform(transform: Callable | None, image: torch.Tensor,
                    meta: dict[str, torch.Tensor] | None = None) -> tuple[torch.Tensor, dict | None]:
    """Apply ``transform`` to ``image`` ``[C, H, W]`` and, jointly, to ``meta`` (if given).

    With meta the transform must be a torchvision ``v2`` transform (or a ``v2.Compose``), otherwise
    a transform that changes the image size raises ``ValueError``: the annotations could not follow.
    """
    if transform is None:
        return image, meta
    if meta is None:
        return transform(image), None
    h, w = image.shape[-2:]
    if not isinstance(transform, v2.Transform):
        out = transform(image)
        if tuple(out.shape[-2:]) != (h, w):
            raise ValueError("with_meta=True needs a torchvision.transforms.v2 transform when the transform "
                             "changes the image geometry, so keypoints, boxes and masks can follow it")
        return out, meta
    packed: dict[str, torch.Tensor] = {
        "keypoints": tv_tensors.KeyPoints(meta["keypoints"][:, :2], canvas_size=(h, w)),
        "box": tv_tensors.BoundingBoxes(meta["box"][None], format="XYXY", canvas_size=(h, w)),
    }
    if "part_masks" in meta:
        packed["part_masks"] = tv_tensors.Mask(meta["part_masks"])
    out_img, out = transform(tv_tensors.Image(image), packed)
    oh, ow = out_img.shape[-2:]
    xy = out["keypoints"].as_subclass(torch.Tensor).float()
    inside = (xy[:, 0] >= 0) & (xy[:, 0] < ow) & (xy[:, 1] >= 0) & (xy[:, 1] < oh)
    vis = meta["keypoints"][:, 2] * inside.float()
    new = dict(meta)
    new["keypoints"] = torch.cat([xy, vis[:, None]], 1)
    new["box"] = out["box"].as_subclass(torch.Tensor)[0].float()
    if "part_masks" in out:
        new["part_masks"] = out["part_masks"].as_subclass(torch.Tensor).bool()
    return out_img.as_subclass(torch.Tensor), new
