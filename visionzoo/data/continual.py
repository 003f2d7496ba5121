"""Class-incremental splits and few-shot sampling.

:class:`ClassIncremental` shuffles the class order with a seed (default 1993, the common choice)
and cuts it into ``init`` classes for the first task and ``increment`` for each next one. Task
datasets relabel classes by their position in that order, so task ``t`` holds labels
``[start_t, end_t)`` and a head over "all classes seen so far" is a prefix of the label space.

Presets for the benchmarks of the project (10 tasks each): CIFAR-100 (10 + 10...), ImageNet-R
(20 + 20..., ``imagenet-r-cl``), CUB-200 (20 + 20..., the official train/test split) and
PartWorld's downstream classes (10 + 10...).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.utils.data import Dataset

CONTINUAL_PRESETS: dict[str, dict] = {
    "cifar100": {"dataset": "cifar100", "init": 10, "increment": 10},
    "imagenet-r": {"dataset": "imagenet-r-cl", "init": 20, "increment": 20},
    "cub": {"dataset": "cub", "init": 20, "increment": 20},
    "partworld": {"dataset": "partworld", "init": 10, "increment": 10},
}


def targets_of(dataset: Dataset) -> list[int]:
    """Labels of every item: ``dataset.targets`` when present, else read item by item."""
    t = getattr(dataset, "targets", None)
    if t is not None:
        return [int(x) for x in t]
    return [int(dataset[i][1]) for i in range(len(dataset))]


class RelabelledSubset(Dataset):
    """Items ``indices`` of ``dataset`` with labels mapped through ``label_map`` ``[num_classes]``."""

    def __init__(self, dataset: Dataset, indices: Sequence[int], label_map: torch.Tensor | None = None):
        self.dataset, self.indices = dataset, list(indices)
        self.label_map = label_map
        base = targets_of(dataset)
        self.targets = [self._map(base[i]) for i in self.indices]

    def _map(self, y: int) -> int:
        return int(self.label_map[y]) if self.label_map is not None else y

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int):
        item = self.dataset[self.indices[i]]
        return (item[0], self._map(int(item[1])), *item[2:])


class ClassIncremental:
    """A seeded class order cut into tasks.

    Args:
        num_classes: classes of the dataset.
        init: classes in the first task.
        increment: classes in each later task.
        seed: class-order seed (None keeps ``0..num_classes-1``).

    Attributes:
        order: ``[num_classes]`` original class ids in their new order.
        label_map: ``[num_classes]`` new label of each original class (``order``'s inverse).
        tasks: ``list[list[int]]`` original class ids of each task.
    """

    def __init__(self, num_classes: int, init: int = 10, increment: int = 10, seed: int | None = 1993):
        if init <= 0 or increment <= 0 or init > num_classes:
            raise ValueError(f"need 0 < init <= num_classes and increment > 0, got {init}, {increment}")
        if (num_classes - init) % increment:
            raise ValueError(f"{num_classes} classes do not split into {init} + k * {increment}")
        self.num_classes, self.init, self.increment, self.seed = num_classes, init, increment, seed
        if seed is None:
            order = torch.arange(num_classes)
        else:
            order = torch.randperm(num_classes, generator=torch.Generator().manual_seed(seed))
        self.order = order
        self.label_map = torch.empty_like(order)
        self.label_map[order] = torch.arange(num_classes)
        bounds = [0, init, *range(init + increment, num_classes + 1, increment)]
        self.bounds = bounds
        self.tasks = [order[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    @property
    def num_tasks(self) -> int:
        return len(self.tasks)

    def classes_seen(self, task: int) -> int:
        """Number of (relabelled) classes seen after ``task``: labels ``[0, classes_seen)``."""
        return self.bounds[task + 1]

    def task_labels(self, task: int) -> range:
        """The relabelled classes of ``task``."""
        return range(self.bounds[task], self.bounds[task + 1])

    def subset(self, dataset: Dataset, task: int, cumulative: bool = False) -> RelabelledSubset:
        """Items of ``task`` (or of tasks ``0..task`` when ``cumulative``, for evaluation), relabelled."""
        lo = 0 if cumulative else self.bounds[task]
        hi = self.bounds[task + 1]
        labels = targets_of(dataset)
        keep = [i for i, y in enumerate(labels) if lo <= int(self.label_map[y]) < hi]
        return RelabelledSubset(dataset, keep, self.label_map)

    def class_names(self, classes: Sequence[str]) -> list[str]:
        """``classes`` (original order) reordered to the new labels."""
        return [classes[i] for i in self.order.tolist()]


def few_shot_indices(targets: Sequence[int], shots: int, seed: int = 1) -> list[int]:
    """``shots`` item indices per class, drawn without replacement with ``seed`` (all of a class's
    items when it has fewer); sorted. Same seed and targets, same indices."""
    g = torch.Generator().manual_seed(seed)
    t = torch.as_tensor(list(targets))
    chosen: list[int] = []
    for c in torch.unique(t).tolist():
        idx = (t == c).nonzero().squeeze(1)
        perm = torch.randperm(idx.numel(), generator=g)[:shots]
        chosen.extend(idx[perm].tolist())
    return sorted(chosen)


def few_shot(dataset: Dataset, shots: int, seed: int = 1) -> RelabelledSubset:
    """A ``shots``-per-class subset of ``dataset`` (labels unchanged), e.g. 16-shot for prompt tuning."""
    return RelabelledSubset(dataset, few_shot_indices(targets_of(dataset), shots, seed))


def class_incremental(name: str, root: str | None = None, seed: int = 1993, **kwargs):
    """``(scenario, train, test)`` for a preset of :data:`CONTINUAL_PRESETS`; ``kwargs`` go to
    :func:`~visionzoo.data.build_dataset` (e.g. ``transform``, PartWorld's ``image_size``)."""
    from .registry import build_dataset

    if name not in CONTINUAL_PRESETS:
        raise ValueError(f"unknown continual preset {name!r}; known: {sorted(CONTINUAL_PRESETS)}")
    p = CONTINUAL_PRESETS[name]
    train = build_dataset(p["dataset"], root=root, split="train", **kwargs)
    test = build_dataset(p["dataset"], root=root, split="test", **kwargs)
    scenario = ClassIncremental(len(train.classes), p["init"], p["increment"], seed)
    return scenario, train, test
