"""CUB-200-2011 with object boxes and the 15 part keypoints, full images or cropped to the box.

Expected layout (``root`` is ``CUB_200_2011/`` or the folder holding it)::

    images/<NNN.Class_name>/<file>.jpg
    images.txt               <image id> <relative path>
    image_class_labels.txt   <image id> <class id 1..200>
    train_test_split.txt     <image id> <1 train | 0 test>
    classes.txt              <class id> <NNN.Class_name>
    bounding_boxes.txt       <image id> <x> <y> <width> <height>
    parts/parts.txt          <part id 1..15> <part name>
    parts/part_locs.txt      <image id> <part id> <x> <y> <visible 0|1>

Labels are ``class id - 1``; ``classes`` are prompt names ("Black footed Albatross").
With ``with_meta=True`` items are ``(image, label, meta)``: ``keypoints`` ``[15, 3]`` (x, y, visible)
in pixel coordinates of the returned image, in ``parts/parts.txt`` order (``part_names``), and
``box`` ``[4]`` (x0, y0, x1, y1) with ``x1 = x + width``. ``cropped=True`` crops every image to
its box (the EvalProtoPNet protocol IVPT's metrics use): keypoints are shifted and those outside
the crop become invisible. Invisible keypoints keep the file's coordinates (usually 0, 0).
CUB has no part masks.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch.utils.data import Dataset

from .folders import layout_error, pretty, read_image
from .meta import apply_transform
from .registry import register_dataset

NUM_PARTS = 15
_FILES = ("images.txt", "image_class_labels.txt", "train_test_split.txt", "classes.txt", "bounding_boxes.txt")


def _rows(path: Path) -> list[list[str]]:
    return [ln.split() for ln in path.read_text().splitlines() if ln.strip()]


def find_cub_root(root: str | Path) -> Path:
    """``root`` or ``root/CUB_200_2011``, whichever holds ``images.txt``; else a layout error."""
    base = Path(root)
    for cand in (base, base / "CUB_200_2011"):
        if (cand / "images.txt").is_file():
            missing = [f for f in _FILES if not (cand / f).is_file()]
            if not (cand / "images").is_dir():
                missing.append("images/")
            if missing:
                raise layout_error("cub", f"CUB_200_2011 metadata files {list(_FILES)} and images/ "
                                   f"(missing: {missing})", cand)
            return cand
    raise layout_error("cub", "CUB_200_2011/ with images.txt, image_class_labels.txt, train_test_split.txt, "
                       "classes.txt, bounding_boxes.txt, parts/ and images/", base)


class CUB200(Dataset):
    """CUB-200-2011 ``split`` (``"train"``, ``"test"`` or ``"all"``); see the module docstring."""

    def __init__(self, root: str | Path, split: str = "train", transform: Callable | None = None,
                 with_meta: bool = False, cropped: bool = False):
        if split not in ("train", "test", "all"):
            raise ValueError(f"cub split must be 'train', 'test' or 'all', got {split!r}")
        self.root = find_cub_root(root)
        self.transform, self.with_meta, self.cropped = transform, with_meta, cropped
        paths = {int(i): p for i, p in _rows(self.root / "images.txt")}
        labels = {int(i): int(c) - 1 for i, c in _rows(self.root / "image_class_labels.txt")}
        is_train = {int(i): t == "1" for i, t in _rows(self.root / "train_test_split.txt")}
        self.folders = [name for _, name in sorted(_rows(self.root / "classes.txt"), key=lambda r: int(r[0]))]
        self.classes = [pretty(f) for f in self.folders]
        ids = sorted(i for i in paths if split == "all" or is_train[i] == (split == "train"))
        self.image_ids = ids
        self.paths = [self.root / "images" / paths[i] for i in ids]
        self.targets = [labels[i] for i in ids]
        boxes = {int(r[0]): [float(v) for v in r[1:5]] for r in _rows(self.root / "bounding_boxes.txt")}
        xywh = torch.tensor([boxes[i] for i in ids], dtype=torch.float32).reshape(-1, 4)
        self.boxes = torch.cat([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], 1)  # [N, 4] XYXY
        self._keypoints: torch.Tensor | None = None
        parts = self.root / "parts" / "parts.txt"
        self.part_names = [" ".join(r[1:]) for r in _rows(parts)] if parts.is_file() else []
        if self.paths and not self.paths[0].is_file():
            raise layout_error("cub", f"image files listed in images.txt under {self.root / 'images'} "
                               f"(first: {self.paths[0]})", self.paths[0].parent)

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def keypoints(self) -> torch.Tensor:
        """Part keypoints ``[N, 15, 3]`` (x, y, visible) in original-image pixels, read on first use."""
        if self._keypoints is None:
            locs = self.root / "parts" / "part_locs.txt"
            if not locs.is_file():
                raise layout_error("cub", "parts/part_locs.txt (needed for with_meta=True)", self.root / "parts")
            pos = {img: n for n, img in enumerate(self.image_ids)}
            kp = torch.zeros(len(self.image_ids), NUM_PARTS, 3)
            for r in _rows(locs):
                n = pos.get(int(r[0]))
                if n is not None:
                    kp[n, int(r[1]) - 1] = torch.tensor([float(r[2]), float(r[3]), float(r[4])])
            self._keypoints = kp
        return self._keypoints

    def __getitem__(self, i: int):
        image = read_image(self.paths[i])
        h, w = image.shape[-2:]
        box = self.boxes[i].clone()
        meta = None
        if self.with_meta:
            meta = {"keypoints": self.keypoints[i].clone(), "box": box}
        if self.cropped:
            x0, y0 = int(box[0].clamp(0, w - 1)), int(box[1].clamp(0, h - 1))
            x1, y1 = max(x0 + 1, min(w, int(box[2].ceil()))), max(y0 + 1, min(h, int(box[3].ceil())))
            image = image[:, y0:y1, x0:x1]
            if meta is not None:
                kp = meta["keypoints"]
                shifted = kp[:, :2] - torch.tensor([float(x0), float(y0)])
                inside = ((shifted[:, 0] >= 0) & (shifted[:, 0] < x1 - x0)
                          & (shifted[:, 1] >= 0) & (shifted[:, 1] < y1 - y0))
                vis = kp[:, 2] * inside.float()
                kp = torch.cat([torch.where(vis[:, None] > 0, shifted, kp[:, :2]), vis[:, None]], 1)
                meta = {"keypoints": kp, "box": torch.tensor([0.0, 0.0, float(x1 - x0), float(y1 - y0)])}
        image = image.float().div_(255.0)
        image, meta = apply_transform(self.transform, image, meta)
        label = self.targets[i]
        return (image, label, meta) if self.with_meta else (image, label)


@register_dataset("cub")
def build_cub(root: str | None = None, split: str = "train", transform: Callable | None = None,
              **kwargs) -> CUB200:
    """CUB-200-2011 (``with_meta``, ``cropped`` as in :class:`CUB200`)."""
    if root is None:
        raise ValueError("cub needs root=<CUB_200_2011 folder or its parent>")
    return CUB200(root, split, transform, **kwargs)


@register_dataset("cub-cropped")
def build_cub_cropped(root: str | None = None, split: str = "train", transform: Callable | None = None,
                      **kwargs) -> CUB200:
    """CUB-200-2011 with every image cropped to its bird box."""
    if root is None:
        raise ValueError("cub-cropped needs root=<CUB_200_2011 folder or its parent>")
    return CUB200(root, split, transform, cropped=True, **kwargs)
