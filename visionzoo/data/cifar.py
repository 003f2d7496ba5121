"""CIFAR-100 from torchvision's ``cifar-100-python`` files (downloaded by torchvision on request).

Layout under ``root``: ``cifar-100-python/{train,test,meta}`` (the pickles of the official tarball).
``download=True`` lets :class:`torchvision.datasets.CIFAR100` fetch and verify the tarball first
(needs the internet); reading is done here, so a copy whose checksums torchvision does not know
(e.g. a re-pickled one) still loads. Labels are the 100 fine classes (``label_type="coarse"``: the
20 superclasses); ``classes`` are prompt names ("aquarium fish").
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path

import torch
from torch.utils.data import Dataset

from .folders import layout_error
from .registry import register_dataset

FOLDER = "cifar-100-python"


class CIFAR100(Dataset):
    """CIFAR-100 ``split`` (``"train"`` or ``"test"``); items ``(image [3, 32, 32] float, label)``."""

    def __init__(self, root: str | Path, split: str = "train", transform: Callable | None = None,
                 download: bool = False, label_type: str = "fine"):
        if split not in ("train", "test"):
            raise ValueError(f"cifar100 split must be 'train' or 'test', got {split!r}")
        if label_type not in ("fine", "coarse"):
            raise ValueError(f"label_type must be 'fine' or 'coarse', got {label_type!r}")
        root = Path(root)
        folder = root / FOLDER
        if download and not (folder / split).is_file():
            from torchvision.datasets import CIFAR100 as TVCIFAR100

            TVCIFAR100(str(root), train=split == "train", download=True)
        if not (folder / split).is_file() or not (folder / "meta").is_file():
            raise layout_error("cifar100", f"{FOLDER}/{split} and {FOLDER}/meta under {root} "
                               "(pass download=True to fetch them with torchvision)",
                               folder if folder.is_dir() else root)
        with (folder / split).open("rb") as f:
            data = pickle.load(f, encoding="latin1")
        with (folder / "meta").open("rb") as f:
            meta = pickle.load(f, encoding="latin1")
        self.images = torch.from_numpy(data["data"]).reshape(-1, 3, 32, 32)  # uint8
        self.targets: list[int] = list(data[f"{label_type}_labels"])
        self.classes = [n.replace("_", " ") for n in meta[f"{label_type}_label_names"]]
        self.transform = transform

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i: int):
        image = self.images[i].float().div(255.0)
        if self.transform is not None:
            image = self.transform(image)
        return image, self.targets[i]


@register_dataset("cifar100")
def build_cifar100(root: str | None = None, split: str = "train", transform: Callable | None = None,
                   **kwargs) -> CIFAR100:
    """CIFAR-100 (``download=True`` to fetch it through torchvision)."""
    if root is None:
        raise ValueError("cifar100 needs root=<folder holding cifar-100-python/>")
    return CIFAR100(root, split, transform, **kwargs)
