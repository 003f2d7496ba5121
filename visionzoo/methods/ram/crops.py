"""Image crops for training and validating a reconstructor, from any dataset of the data layer.

The training and validation crops never overlap. Two ways to split (``val_split``):

* ``"region"`` (for a few large images, e.g. ``natural-train``): every image is cut into a
  training part (left) and a validation strip (the right-most ``max(crop, val_fraction * W)``
  columns); training crops come from the left part only, validation crops from the strip;
* ``"images"``: every ``round(1 / val_fraction)``-th image is held out for validation.

Training crops are random resized crops (a square window of side ``crop / s``, ``s`` uniform in
``[scale_min, 1]``, resized to ``crop``) with random horizontal flips and 90° rotations; their
randomness comes from torch's global generator, which
:class:`~visionzoo.engine.data.SeededItems` seeds per (seed, epoch, item). Validation crops are
fixed by ``seed``. Every item also carries an ``operator seed`` (an int) that picks and seeds the
operator a batch is measured with, so a resumed run sees the same measurements.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.data import Dataset

from ...errors import VisionZooError

SEED_RANGE = 2**31 - 1
CACHE_LIMIT = 256  # cache prepared images of datasets up to this size (natural-* have 5 and 10)


def to_channels(img: Tensor, channels: int) -> Tensor:
    """``[C, H, W]`` -> ``[channels, H, W]`` (grey repeated to RGB, RGB to ITU-R BT.601 luma)."""
    if img.shape[0] == channels:
        return img
    if channels == 3 and img.shape[0] == 1:
        return img.expand(3, -1, -1).contiguous()
    if channels == 1 and img.shape[0] == 3:
        w = torch.tensor([0.299, 0.587, 0.114], dtype=img.dtype).view(3, 1, 1)
        return (img * w).sum(0, keepdim=True)
    raise VisionZooError(f"cannot turn a {img.shape[0]}-channel image into {channels} channels; "
                         "use images with 1 or 3 channels.")


def resize_short_side(img: Tensor, short: int) -> Tensor:
    """Resize ``[C, H, W]`` (antialiased bicubic, clamped to [0, 1]) so that min(H, W) = ``short``."""
    h, w = img.shape[-2:]
    if not short or min(h, w) == short:
        return img
    s = short / min(h, w)
    size = (max(1, round(h * s)), max(1, round(w * s)))
    out = F.interpolate(img[None], size=size, mode="bicubic", antialias=True, align_corners=False)[0]
    return out.clamp(0.0, 1.0)


def center_square(img: Tensor, side: int) -> Tensor:
    """The centred ``side x side`` crop of ``[C, H, W]`` (``side`` must fit)."""
    h, w = img.shape[-2:]
    if side > min(h, w):
        raise VisionZooError(f"a {side}x{side} crop does not fit an image of {h}x{w}; choose a smaller size.")
    top, left = (h - side) // 2, (w - side) // 2
    return img[:, top:top + side, left:left + side]


def prepare_eval_image(img: Tensor, channels: int, size: int) -> Tensor:
    """Evaluation image: ``channels`` channels, short side resized to ``size``, centred square crop.

    ``size = 0`` keeps the image as it is (any size, not necessarily square).
    """
    img = to_channels(img.float(), channels)
    if not size:
        return img
    return center_square(resize_short_side(img, size), size).contiguous()


class OperatorCrops(Dataset):
    """Training or validation crops of a dataset's images: items ``(crop [C, c, c], image index, op seed)``.

    Args:
        base: any dataset whose items start with a float image ``[C, H, W]`` in [0, 1].
        part: ``"train"`` (random crops) or ``"val"`` (fixed crops).
        crop: crop side ``c`` in pixels.
        crops_per_image: items per image (the epoch length is images x crops_per_image).
        val_fraction: share of each image (``region``) or of the images (``images``) held out.
        val_split: ``"region"`` or ``"images"`` (see the module docstring).
        resize: resize each image so its short side has this many pixels first (0 = as loaded).
        scale_min: smallest scale of the random resized crops (1 = plain crops).
        channels: 3 (RGB) or 1 (grey).
        seed: fixes the validation crops and their operator seeds.
    """

    def __init__(self, base: Dataset, part: str, crop: int = 64, crops_per_image: int = 100,
                 val_fraction: float = 0.15, val_split: str = "region", resize: int = 0, scale_min: float = 0.5,
                 channels: int = 3, seed: int = 0):
        if part not in ("train", "val"):
            raise ValueError(f"part must be 'train' or 'val', got {part!r}")
        if val_split not in ("region", "images"):
            raise VisionZooError(f"val_split must be 'region' or 'images', got {val_split!r}.")
        if not 0 < val_fraction < 1:
            raise VisionZooError(f"val_fraction must be in (0, 1), got {val_fraction}.")
        if not 0 < scale_min <= 1:
            raise VisionZooError(f"scale_min must be in (0, 1], got {scale_min}.")
        if crop < 8 or crops_per_image < 1:
            raise VisionZooError(f"need crop >= 8 px and crops_per_image >= 1, got {crop} and {crops_per_image}.")
        self.base, self.part, self.crop = base, part, int(crop)
        self.crops_per_image, self.val_fraction, self.val_split = int(crops_per_image), val_fraction, val_split
        self.resize, self.scale_min, self.channels, self.seed = int(resize), float(scale_min), int(channels), seed
        n = len(base)  # type: ignore[arg-type]
        if val_split == "images":
            every = max(2, round(1 / val_fraction))
            held = [i for i in range(n) if i % every == 0]
            self.indices = held if part == "val" else [i for i in range(n) if i % every]
        else:
            self.indices = list(range(n))
        if not self.indices:
            raise VisionZooError(f"the dataset has {n} images: none left for the {part} part "
                                 f"(val_split={val_split}, val_fraction={val_fraction}).")
        self._cache: dict[int, Tensor] = {}
        self.classes = getattr(base, "classes", None)

    def __len__(self) -> int:
        return len(self.indices) * self.crops_per_image

    # ------------------------------------------------------------------------------- images
    def image(self, k: int) -> Tensor:
        """Image ``k`` of the base dataset, prepared (channels, resize): ``[C, H, W]``."""
        if k in self._cache:
            return self._cache[k]
        item = self.base[k]
        img = item[0] if isinstance(item, (tuple, list)) else item
        if not isinstance(img, Tensor) or img.ndim != 3:
            raise VisionZooError(f"item {k} of the dataset is not an image tensor [C, H, W] (got "
                                 f"{type(img).__name__}); use a dataset without a transform.")
        img = resize_short_side(to_channels(img.float(), self.channels), self.resize)
        if len(self.base) <= CACHE_LIMIT:  # type: ignore[arg-type]
            self._cache[k] = img
        return img

    def region(self, img: Tensor) -> tuple[int, int, int, int]:
        """``(top, left, height, width)`` of the part of ``img`` this split may crop from."""
        h, w = img.shape[-2:]
        if self.val_split == "images":
            box = (0, 0, h, w)
        else:
            strip = max(self.crop, math.ceil(self.val_fraction * w))
            box = (0, w - strip, h, strip) if self.part == "val" else (0, 0, h, w - strip)
        if box[2] < self.crop or box[3] < self.crop:
            raise VisionZooError(
                f"a {h}x{w} image leaves a {box[2]}x{box[3]} {self.part} region, too small for {self.crop} px "
                "crops; use a smaller --crop-size, a larger --resize, or --val-split images.")
        return box

    # ------------------------------------------------------------------------------- items
    def __getitem__(self, i: int) -> tuple[Tensor, int, int]:
        if not 0 <= i < len(self):
            raise IndexError(i)
        k = self.indices[i % len(self.indices)]
        img = self.image(k)
        top, left, h, w = self.region(img)
        if self.part == "val":
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
            y0 = top + int(torch.randint(0, h - self.crop + 1, (1,), generator=g))
            x0 = left + int(torch.randint(0, w - self.crop + 1, (1,), generator=g))
            patch = img[:, y0:y0 + self.crop, x0:x0 + self.crop]
            return patch.clone(), k, int(torch.randint(0, SEED_RANGE, (1,), generator=g))
        return self._random_crop(img, top, left, h, w), k, int(torch.randint(0, SEED_RANGE, (1,)))

    def _random_crop(self, img: Tensor, top: int, left: int, h: int, w: int) -> Tensor:
        s = self.scale_min + (1 - self.scale_min) * float(torch.rand(()))
        win = min(round(self.crop / s), h, w)
        y0 = top + int(torch.randint(0, h - win + 1, (1,)))
        x0 = left + int(torch.randint(0, w - win + 1, (1,)))
        patch = img[:, y0:y0 + win, x0:x0 + win]
        if win != self.crop:
            patch = F.interpolate(patch[None], size=(self.crop, self.crop), mode="bicubic", antialias=True,
                                  align_corners=False)[0].clamp(0.0, 1.0)
        if float(torch.rand(())) < 0.5:
            patch = patch.flip(-1)
        patch = torch.rot90(patch, int(torch.randint(0, 4, (1,))), dims=(-2, -1))
        return patch.contiguous()

    def describe(self) -> dict[str, Any]:
        return {"part": self.part, "images": len(self.indices), "items": len(self), "crop": self.crop,
                "val_split": self.val_split, "val_fraction": self.val_fraction, "resize": self.resize}


def load_images(dataset: Dataset, channels: int = 3, size: int = 256, limit: int = 0) -> dict[str, Tensor]:
    """The first ``limit`` images of ``dataset`` (0 = all) for evaluation: name -> ``[C, H, W]``.

    Each image goes through :func:`prepare_eval_image`; names come from ``dataset.classes`` when
    the label indexes it (as for ``natural-*``), else from the item index.
    """
    classes = getattr(dataset, "classes", None)
    n = len(dataset) if not limit else min(limit, len(dataset))  # type: ignore[arg-type]
    images: dict[str, Tensor] = {}
    for i in range(n):
        item = dataset[i]
        img, label = (item[0], item[1]) if isinstance(item, (tuple, list)) and len(item) > 1 else (item, None)
        if not isinstance(img, Tensor) or img.ndim != 3:
            raise VisionZooError(f"item {i} of the dataset is not an image tensor [C, H, W]; use a dataset "
                                 "without a transform.")
        name = str(i)
        if classes is not None and isinstance(label, int) and 0 <= label < len(classes):
            name = str(classes[label])
        while name in images:
            name += f"_{i}"
        images[name] = prepare_eval_image(img, channels, size)
    if not images:
        raise VisionZooError("the dataset holds no images.")
    return images
