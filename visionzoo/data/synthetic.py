"""``random-blobs``: a tiny seeded classification set for smoke tests of the spine.

Class ``c`` is a Gaussian blob at a class-specific position on noise; it is learnable in a few
steps, which is all the engine tests need. Real work uses PartWorld or real datasets.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.data import Dataset

from .registry import register_dataset


class RandomBlobs(Dataset):
    """``length`` images ``[3, size, size]`` in [0, 1], ``num_classes`` classes, fixed by ``seed``."""

    def __init__(self, length: int = 64, num_classes: int = 4, size: int = 32, seed: int = 0,
                 transform: Callable | None = None):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.arange(length) % num_classes
        centers = torch.rand(num_classes, 2, generator=g) * 0.6 + 0.2
        yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
        noise = torch.rand(length, 3, size, size, generator=g) * 0.3
        c = centers[self.labels]  # [N, 2]
        d2 = (yy[None] - c[:, 0, None, None]) ** 2 + (xx[None] - c[:, 1, None, None]) ** 2
        blob = torch.exp(-d2 / 0.01)[:, None]  # [N, 1, H, W]
        colors = torch.rand(num_classes, 3, generator=g)[self.labels][:, :, None, None]
        self.images = (noise + 0.7 * blob * colors).clamp(0, 1)
        self.classes = [f"blob{i}" for i in range(num_classes)]
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        img = self.images[i]
        if self.transform is not None:
            img = self.transform(img)
        return img, int(self.labels[i])


@register_dataset("random-blobs")
def random_blobs(root=None, split="train", transform=None, **kwargs) -> RandomBlobs:
    seed = {"train": 0, "val": 1, "test": 2}.get(split, 3) + int(kwargs.pop("seed", 0)) * 10
    return RandomBlobs(seed=seed, transform=transform, **kwargs)
