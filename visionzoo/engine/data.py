"""Resumable, DDP-aware sampling and per-sample seeded augmentation.

Exact resume needs the same batches in the same order with the same augmentations. The sampler
draws each epoch's permutation from ``seed + epoch`` (not from the global RNG), can start in the
middle of an epoch, and splits indices over ranks like DistributedSampler. ``SeededItems`` seeds
the RNG of each item from (seed, epoch, index), so augmentations do not depend on how many
workers there are or where a run was resumed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils.data import Dataset, Sampler


class ResumableSampler(Sampler[int]):
    """Indices for one rank; ``set_epoch(e, start=k)`` skips the first ``k`` indices of epoch ``e``."""

    def __init__(self, length: int, seed: int = 0, shuffle: bool = True, rank: int = 0, world_size: int = 1,
                 pad: bool = True):
        self.length, self.seed, self.shuffle = length, seed, shuffle
        self.rank, self.world_size, self.pad = rank, world_size, pad
        self.epoch, self.start = 0, 0

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        self.epoch, self.start = epoch, start

    def _indices(self) -> list[int]:
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed * 100003 + self.epoch)
            idx = torch.randperm(self.length, generator=g).tolist()
        else:
            idx = list(range(self.length))
        if self.world_size > 1:
            if self.pad:  # every rank gets the same number of batches (DDP needs it in training)
                total = math.ceil(self.length / self.world_size) * self.world_size
                idx += idx[: total - len(idx)]
            idx = idx[self.rank::self.world_size]
        return idx

    def per_epoch(self) -> int:
        return len(self._indices())

    def __iter__(self) -> Iterator[int]:
        return iter(self._indices()[self.start:])

    def __len__(self) -> int:
        return max(0, self.per_epoch() - self.start)


class SeededItems(Dataset):
    """Wraps a dataset: applies ``transform`` to the image of each item under a per-item seed."""

    def __init__(self, dataset: Dataset, transform: Callable | None = None, seed: int = 0):
        self.dataset, self.transform, self.seed = dataset, transform, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, i: int) -> Any:
        item_seed = (self.seed * 1_000_003 + self.epoch * 7_919 + i) % (2**63)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(item_seed)
            state = random.getstate()
            random.seed(item_seed)
            try:
                item = self.dataset[i]
                if self.transform is not None:
                    item = (self.transform(item[0]), *item[1:])
            finally:
                random.setstate(state)
        return item

    def __getattr__(self, name: str) -> Any:  # expose .classes etc. of the wrapped dataset
        # Never forward dunders: DataLoader would find the wrapped dataset's __getitems__ and
        # fetch batches around this wrapper, skipping the transform and the per-item seeding.
        if name.startswith("__") or name in ("dataset", "transform", "seed", "epoch"):
            raise AttributeError(name)
        return getattr(self.dataset, name)
