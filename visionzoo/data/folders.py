"""Image files on disk: decoding, class-folder scanning, layout errors, and the ``imagefolder`` dataset.

``build_dataset("imagefolder", root, split="train", classes=None)`` reads ``root/<split>/<class>/*``
when ``root/<split>`` exists, else ``root/<class>/*``. ``classes`` fixes the class list (folder
names, in label order); otherwise the sorted folder names are used. Class names for prompts come
from ``class_names=`` or from a ``classes.txt`` next to the class folders (one name per line, in
label order), else from the folder names with ``_`` turned into spaces.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from ..errors import DatasetLayoutError
from .registry import register_dataset

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def read_image(path: str | os.PathLike) -> torch.Tensor:
    """Decode an image file to uint8 ``[3, H, W]`` RGB with PIL (grey, palette and CMYK files are
    converted; torchvision's decoders are deprecated since 0.29)."""
    with Image.open(path) as im:
        return torch.from_numpy(np.asarray(im.convert("RGB")).copy()).permute(2, 0, 1).contiguous()


def write_image(image: torch.Tensor, path: str | os.PathLike) -> None:
    """Save uint8 ``[C, H, W]`` (C = 1 or 3) losslessly when ``path`` ends in ``.png``."""
    arr = image.permute(1, 2, 0).numpy()
    Image.fromarray(arr[..., 0] if arr.shape[-1] == 1 else arr).save(path)


def describe(path: Path, limit: int = 8) -> str:
    """A short description of what is at ``path`` (for layout errors)."""
    if not path.exists():
        return f"{path} does not exist"
    if not path.is_dir():
        return f"{path} is a file, not a folder"
    entries = sorted(path.iterdir())
    if not entries:
        return f"{path} is empty"
    shown = [e.name + ("/" if e.is_dir() else "") for e in entries[:limit]]
    more = f" ... ({len(entries)} entries)" if len(entries) > limit else ""
    return f"{path} holds " + ", ".join(shown) + more


def layout_error(dataset: str, expected: str, path: Path) -> DatasetLayoutError:
    """A :class:`DatasetLayoutError` naming what was expected and what was found at ``path``."""
    return DatasetLayoutError(f"{dataset}: expected {expected}; found: {describe(path)}.")


def is_image(path: Path) -> bool:
    return path.suffix.lower() in IMG_EXTENSIONS and not path.name.startswith(".")


def scan_class_folders(root: Path, class_to_label: dict[str, int]) -> list[tuple[str, int]]:
    """``(path, label)`` of every image in ``root/<folder>/`` for the folders of ``class_to_label``,
    in label order, files sorted (recursively), so the order does not depend on the file system."""
    samples = []
    for folder in sorted(class_to_label, key=lambda f: (class_to_label[f], f)):
        d = root / folder
        if d.is_dir():
            files = sorted(p for p in d.rglob("*") if p.is_file() and is_image(p))
            samples.extend((str(p), class_to_label[folder]) for p in files)
    return samples


class ImageList(Dataset):
    """Images from ``(path, label)`` pairs; items ``(image, label)`` with the image a float
    ``[3, H, W]`` in [0, 1] passed through ``transform``.

    Loaders may add: ``missing_classes`` (class folders absent on disk) and ``imagenet_indices``
    ``[K]`` (positions of the K classes among ImageNet's 1000, for the A/R subsets).
    """

    missing_classes: Sequence[str] = ()
    imagenet_indices: torch.Tensor | None = None

    def __init__(self, samples: list[tuple[str, int]], classes: list[str], transform: Callable | None = None,
                 folders: list[str] | None = None):
        self.samples, self.classes, self.transform = samples, classes, transform
        self.folders = folders  # the class folder (or wnid) of each label, where there is one
        self.targets = [label for _, label in samples]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int):
        path, label = self.samples[i]
        image = read_image(path).float().div_(255.0)
        if self.transform is not None:
            image = self.transform(image)
        return image, label


def pretty(folder: str) -> str:
    """A prompt-friendly class name from a folder name: ``"001.Black_footed_Albatross"`` ->
    ``"Black footed Albatross"``."""
    name = folder.split(".", 1)[1] if folder[:1].isdigit() and "." in folder else folder
    return name.replace("_", " ").strip()


def image_folder(root: str | os.PathLike, split: str | None = "train", classes: Sequence[str] | None = None,
                 class_names: Sequence[str] | None = None, transform: Callable | None = None,
                 dataset: str = "imagefolder") -> ImageList:
    """An :class:`ImageList` over class folders (see module docstring)."""
    base = Path(root)
    top = base / split if split and (base / split).is_dir() else base
    if not top.is_dir():
        raise layout_error(dataset, f"a folder of class sub-folders at {top}", top)
    found = sorted(d.name for d in top.iterdir() if d.is_dir() and not d.name.startswith("."))
    folders = list(classes) if classes is not None else found
    missing = [c for c in folders if c not in found]
    if not folders or missing:
        want = f"class folders {missing[:5]}" if missing else "at least one class folder"
        raise layout_error(dataset, f"{want} with images inside {top} (layout <root>/[<split>/]<class>/<image>)",
                           top)
    samples = scan_class_folders(top, {c: i for i, c in enumerate(folders)})
    if not samples:
        raise layout_error(dataset, f"image files ({', '.join(IMG_EXTENSIONS)}) inside the class folders", top)
    if class_names is None and (top / "classes.txt").is_file():
        class_names = [ln.strip() for ln in (top / "classes.txt").read_text().splitlines() if ln.strip()]
    names = list(class_names) if class_names is not None else [pretty(f) for f in folders]
    if len(names) != len(folders):
        raise ValueError(f"{len(names)} class names for {len(folders)} class folders")
    return ImageList(samples, names, transform, folders)


@register_dataset("imagefolder")
def build_imagefolder(root: str | None = None, split: str = "train", transform: Callable | None = None,
                      **kwargs) -> ImageList:
    """Generic class-folder dataset: ``root/[<split>/]<class>/<image>``."""
    if root is None:
        raise ValueError("imagefolder needs root=<folder of class folders>")
    return image_folder(root, split, transform=transform, **kwargs)
