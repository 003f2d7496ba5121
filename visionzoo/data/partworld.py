"""PartWorld: a procedurally generated, labelled world of objects made of parts.

``build_dataset("partworld", split="train", classes="downstream", style="clean", image_size=64)``.

* 160 classes (object types), 60 *pretraining* + 100 *downstream*, never overlapping
  (:mod:`visionzoo.data.partworld_classes`); labels are ``0..len(classes) - 1`` in the order of
  :attr:`PartWorld.class_ids`.
* Every image has its ground truth: class, object box, 5 part keypoints and part masks
  (``with_meta=True``), and a caption (:meth:`PartWorld.caption`).
* Styles are domain shifts (:mod:`visionzoo.data.partworld_styles`): ``clean`` is the source
  style, :data:`SHIFTED_STYLES` the shifted ones. A style changes pixels only: the scene (class,
  pose, background, keypoints, masks, box) of item ``i`` is the same in every style.
* Deterministic: item ``i`` is a pure function of ``(seed, split, class id, instance)`` through
  integer hashing (:mod:`visionzoo.data.hashrng`), independent of batching, workers and machine.
  The same class and instance are the same image whichever class subset is chosen.
* Items are rendered on demand; ``DataLoader`` fetches whole batches through ``__getitems__``
  (one vectorised render per batch). ``in_memory=True`` keeps rendered images (uint8) for later
  epochs and renders misses 64 items at a time. ``cache_dir=`` writes an ImageFolder with an
  annotations file once and reads it back (:mod:`visionzoo.data.partworld_cache`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch.utils.data import Dataset

from . import hashrng
from .meta import apply_transform, to_float_image
from .partworld_classes import PART_SLOTS, class_table
from .partworld_classes import class_ids as resolve_class_ids
from .partworld_render import render, sample_scene
from .partworld_styles import SHIFTED_STYLES, SOURCE_STYLE, STYLES, get_style
from .partworld_text import DEFAULT_TEMPLATE, captions, class_prompts
from .registry import register_dataset

__all__ = ["PartWorld", "SHIFTED_STYLES", "SOURCE_STYLE", "STYLES", "SPLITS", "PART_SLOTS"]

SPLITS: tuple[str, ...] = ("train", "val", "test")
DEFAULT_IMAGES_PER_CLASS = {"train": 500, "val": 50, "test": 100}
MIN_SIZE, MAX_SIZE = 32, 224
MEMORY_CHUNK = 64


def to_uint8(img: torch.Tensor) -> torch.Tensor:
    """Float ``[..., H, W]`` in [0, 1] -> uint8 by rounding half up (exact, machine-independent)."""
    return (img * 255.0 + 0.5).floor().clamp(0, 255).to(torch.uint8)


class PartWorld(Dataset):
    """PartWorld images of some classes in one split and style.

    Args:
        split: ``"train"``, ``"val"`` or ``"test"`` (disjoint draws).
        classes: ``"pretrain"`` (60), ``"downstream"`` (100), ``"all"`` (160) or a list of world ids.
        style: one of :data:`STYLES` (``"source"`` means ``"clean"``).
        image_size: side in pixels, 32..224.
        images_per_class: default 500 / 50 / 100 for train / val / test.
        seed: changes every image (not the classes).
        with_meta: items are ``(image, label, meta)`` with ``meta`` = ``keypoints`` ``[5, 3]`` float
            (x, y, visible; integer pixel indices of the visible pixel of the part nearest to its
            centre, so ``part_masks[p, y, x]`` holds when visible), ``box`` ``[4]`` (x0, y0, x1, y1;
            tight around the visible object, exclusive max), ``part_masks`` ``[5, H, W]`` bool
            (visible pixels of each part, disjoint) and ``occluder`` ``[H, W]`` bool (pixels hidden by
            the occluders of the ``occluded`` style). Part order is :data:`PART_SLOTS`. Coordinates are
            those of the returned image: torchvision v2 transforms move them (see
            :mod:`visionzoo.data.meta`).
        transform: applied to the float image ``[3, H, W]`` in [0, 1].
        in_memory: keep rendered images (uint8, ``3 * H * W`` bytes each) for later epochs; a miss
            renders the 64 neighbouring items at once (several times cheaper per item than single
            renders). Meta is always rendered afresh.
    """

    def __init__(self, split: str = "train", classes: str | Sequence[int] = "downstream",
                 style: str = SOURCE_STYLE, image_size: int = 64, images_per_class: int | None = None,
                 seed: int = 0, with_meta: bool = False, transform: Callable | None = None,
                 in_memory: bool = False):
        if split not in SPLITS:
            raise ValueError(f"PartWorld split must be one of {SPLITS}, got {split!r}")
        if not MIN_SIZE <= int(image_size) <= MAX_SIZE:
            raise ValueError(f"image_size must lie in [{MIN_SIZE}, {MAX_SIZE}], got {image_size}")
        self.split, self.image_size, self.seed = split, int(image_size), int(seed)
        self.style = get_style(style)
        self.class_ids: tuple[int, ...] = resolve_class_ids(classes)
        self.classes: list[str] = [class_table().names[c] for c in self.class_ids]
        self.images_per_class = int(images_per_class or DEFAULT_IMAGES_PER_CLASS[split])
        self.with_meta, self.transform = with_meta, transform
        n = len(self.class_ids) * self.images_per_class
        self.targets: list[int] = [i // self.images_per_class for i in range(n)]
        self._world_ids = torch.tensor(self.class_ids, dtype=torch.int64)
        side = self.image_size
        self._memory = torch.empty(n, 3, side, side, dtype=torch.uint8) if in_memory else None
        self._filled = torch.zeros(n, dtype=torch.bool)

    def __len__(self) -> int:
        return len(self.targets)

    def config(self) -> dict:
        """Everything that determines the pixels (used to name caches)."""
        return {"split": self.split, "class_ids": list(self.class_ids), "style": self.style.name,
                "image_size": self.image_size, "images_per_class": self.images_per_class, "seed": self.seed}

    def _indices(self, indices: Sequence[int] | torch.Tensor) -> torch.Tensor:
        idx = torch.as_tensor(indices, dtype=torch.int64).reshape(-1)
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= len(self)):
            raise IndexError(f"PartWorld index out of range [0, {len(self)})")
        return idx

    def keys(self, indices: Sequence[int] | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """World class ids ``[B]`` and hash keys ``[B]`` of items ``indices``."""
        idx = self._indices(indices)
        world = self._world_ids[idx // self.images_per_class]
        instance = idx % self.images_per_class
        return world, hashrng.combine(self.seed, SPLITS.index(self.split), world, instance)

    def generate_batch(self, indices: Sequence[int] | torch.Tensor, meta: bool = True) -> dict[str, torch.Tensor]:
        """Render items ``indices`` in one vectorised call.

        Returns a dict: ``image`` uint8 ``[B, 3, H, W]``, ``label`` int64 ``[B]`` and, with ``meta``,
        ``keypoints`` ``[B, 5, 3]``, ``box`` ``[B, 4]``, ``part_masks`` ``[B, 5, H, W]`` bool and
        ``occluder`` ``[B, H, W]`` bool (semantics as in the class docstring).
        """
        idx = self._indices(indices)
        if self._memory is not None and not meta:
            self._fill(idx)
            return {"image": self._memory[idx], "label": idx // self.images_per_class}
        return self._render(idx, meta)

    def _render(self, idx: torch.Tensor, meta: bool) -> dict[str, torch.Tensor]:
        world, keys = self.keys(idx)
        st = self.style
        r = render(world, keys, self.image_size, clutter=st.clutter, occluders=st.occluders,
                   want_flat=st.want_flat)
        img = r.image if st.post is None else st.post(r, keys)
        out = {"image": to_uint8(img), "label": idx // self.images_per_class}
        if meta:
            out.update(keypoints=r.keypoints, box=r.box, part_masks=r.part_masks, occluder=r.occluder)
        return out

    def _fill(self, idx: torch.Tensor) -> None:
        """Render the missing items of ``idx`` into memory, a whole chunk of neighbours at a time
        (single-item access then costs a batched render once per chunk, not once per item)."""
        missing = idx[~self._filled[idx]]
        if missing.numel():
            chunks = torch.unique(missing // MEMORY_CHUNK)
            todo = (chunks[:, None] * MEMORY_CHUNK + torch.arange(MEMORY_CHUNK)).reshape(-1)
            todo = todo[todo < len(self)]
            self._memory[todo] = self._render(todo, meta=False)["image"]
            self._filled[todo] = True

    def _items(self, batch: dict[str, torch.Tensor]) -> list[tuple]:
        items = []
        for j in range(batch["label"].shape[0]):
            image = to_float_image(batch["image"][j])
            label = int(batch["label"][j])
            if self.with_meta:
                meta = {k: batch[k][j] for k in ("keypoints", "box", "part_masks", "occluder")}
                image, meta = apply_transform(self.transform, image, meta)
                items.append((image, label, meta))
            else:
                image, _ = apply_transform(self.transform, image)
                items.append((image, label))
        return items

    def __getitem__(self, i: int):
        return self._items(self.generate_batch([i], meta=self.with_meta))[0]

    def __getitems__(self, indices: list[int]) -> list[tuple]:
        """Batched fetch used by ``torch.utils.data.DataLoader`` (one render per batch)."""
        return self._items(self.generate_batch(indices, meta=self.with_meta))

    def captions(self, indices: Sequence[int] | torch.Tensor | None = None) -> list[str]:
        """Captions of items ``indices`` (default: all), built from class attributes, the image's
        scene draws and the style, e.g. ``"a sketch of a small striped red horned glider with ..."``."""
        idx = torch.arange(len(self)) if indices is None else self._indices(indices)
        world, keys = self.keys(idx)
        return captions(world, sample_scene(keys), self.style.phrase)

    def caption(self, i: int) -> str:
        """Caption of item ``i``."""
        return self.captions([i])[0]

    def class_prompts(self, template: str = DEFAULT_TEMPLATE) -> list[str]:
        """One prompt per class: ``template.format(class name)``."""
        return class_prompts(self.classes, template)


@register_dataset("partworld")
def build_partworld(root: str | None = None, split: str = "train", transform: Callable | None = None,
                    cache_dir: str | None = None, **kwargs) -> Dataset:
    """PartWorld (see :class:`PartWorld` for ``kwargs``). With ``cache_dir`` (or ``root``) the
    images are written once as an ImageFolder + ``annotations.json`` and read back from there."""
    ds = PartWorld(split=split, transform=transform, **kwargs)
    cache_dir = cache_dir or root
    if cache_dir:
        from .partworld_cache import cached_partworld

        return cached_partworld(ds, cache_dir)
    return ds
