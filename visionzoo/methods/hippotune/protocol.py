"""The class-incremental protocol: datasets, the seeded class order and the task split.

``--dataset`` is a preset of :data:`visionzoo.data.continual.CONTINUAL_PRESETS` (``partworld`` =
PartWorld's 100 downstream classes, ``cifar100``, ``imagenet-r`` = ``imagenet-r-cl``, ``cub``) or
any registered dataset with ``train``/``test`` splits. The split comes from
:class:`~visionzoo.data.continual.ClassIncremental` (seed 1993 by default); a split that does not
cover the classes is refused with :class:`SplitError` before anything is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import Dataset

from ...data import build_dataset
from ...data.continual import CONTINUAL_PRESETS, ClassIncremental, RelabelledSubset, few_shot, targets_of
from ...errors import VisionZooError
from .config import ContinualConfig


class SplitError(VisionZooError, ValueError):
    """A class-incremental split that does not cover the dataset's classes exactly once."""


class OrderedClassIncremental(ClassIncremental):
    """:class:`ClassIncremental` with an explicit class order (original ids by new label)."""

    def __init__(self, order: Sequence[int], init: int, increment: int):
        super().__init__(len(order), init, increment, seed=None)
        self.order = torch.as_tensor(list(order), dtype=torch.long)
        self.label_map = torch.empty_like(self.order)
        self.label_map[self.order] = torch.arange(len(order))
        self.tasks = [self.order[a:b].tolist() for a, b in zip(self.bounds[:-1], self.bounds[1:], strict=True)]


def split_sizes(num_classes: int, tasks: int, init_classes: int = 0) -> tuple[int, int]:
    """``(init, increment)`` that cut ``num_classes`` into ``tasks`` tasks, or :class:`SplitError`."""
    if tasks < 1:
        raise SplitError(f"--tasks must be >= 1, got {tasks}.")
    if tasks == 1:
        if init_classes not in (0, num_classes):
            raise SplitError(f"one task must hold all {num_classes} classes, not --init-classes {init_classes}.")
        return num_classes, num_classes
    if init_classes == 0:
        if num_classes % tasks:
            divisors = [k for k in range(2, min(num_classes, 50) + 1) if num_classes % k == 0]
            raise SplitError(f"the split does not cover the classes: {num_classes} classes do not cut into "
                             f"{tasks} equal tasks. Use --tasks in {divisors}, or --init-classes N with "
                             f"({num_classes} - N) divisible by {tasks - 1}.")
        size = num_classes // tasks
        return size, size
    rest = num_classes - init_classes
    if init_classes < 1 or rest < tasks - 1 or rest % (tasks - 1):
        raise SplitError(f"the split does not cover the classes: --init-classes {init_classes} leaves {rest} "
                         f"of {num_classes} classes, which do not cut into {tasks - 1} equal tasks.")
    return init_classes, rest // (tasks - 1)


def make_scenario(num_classes: int, cfg: ContinualConfig) -> ClassIncremental:
    """The seeded (or explicit) class order cut into ``cfg.tasks`` tasks."""
    init, inc = split_sizes(num_classes, cfg.tasks, cfg.init_classes)
    if cfg.class_order:
        order = [int(c) for c in cfg.class_order]
        missing = sorted(set(range(num_classes)) - set(order))
        extra = sorted({c for c in order if not 0 <= c < num_classes})
        repeated = sorted({c for c in order if order.count(c) > 1})
        if missing or extra or repeated or len(order) != num_classes:
            raise SplitError(f"--class-order must list each of the {num_classes} classes (0..{num_classes - 1}) "
                             f"exactly once; missing {missing[:10]}, out of range {extra[:10]}, repeated "
                             f"{repeated[:10]}.")
        return OrderedClassIncremental(order, init, inc)
    return ClassIncremental(num_classes, init, inc, seed=cfg.class_order_seed)


@dataclass
class Protocol:
    """Everything a class-incremental run needs from the data side.

    ``train``/``test`` hold all classes with their original labels; :meth:`train_set` and
    :meth:`test_set` relabel into the run's class order (task ``t`` = labels ``[bounds[t], bounds[t+1])``).
    """

    dataset: str
    scenario: ClassIncremental
    train: Dataset
    test: Dataset
    classes: list[str]  # original order

    @property
    def num_tasks(self) -> int:
        return self.scenario.num_tasks

    @property
    def num_classes(self) -> int:
        return self.scenario.num_classes

    @property
    def bounds(self) -> list[int]:
        return list(self.scenario.bounds)

    def names_in_order(self) -> list[str]:
        return self.scenario.class_names(self.classes)

    def train_set(self, task: int, cumulative: bool = False) -> RelabelledSubset:
        return self.scenario.subset(self.train, task, cumulative=cumulative)

    def test_set(self, task: int) -> RelabelledSubset:
        """Test items of every class seen after ``task``."""
        return self.scenario.subset(self.test, task, cumulative=True)

    def task_of_label(self) -> torch.Tensor:
        """``[C]`` task index of each relabelled class."""
        out = torch.empty(self.num_classes, dtype=torch.long)
        for t in range(self.num_tasks):
            out[self.bounds[t]:self.bounds[t + 1]] = t
        return out


def _limit(ds: Dataset, per_class: int, seed: int) -> Dataset:
    return few_shot(ds, per_class, seed) if per_class > 0 else ds


def build_protocol(dataset: str, root: str | None, dataset_args: dict[str, Any], cfg: ContinualConfig,
                   seed: int = 0) -> Protocol:
    """Datasets and split for ``dataset`` (a preset name or any registered dataset)."""
    name = CONTINUAL_PRESETS[dataset]["dataset"] if dataset in CONTINUAL_PRESETS else dataset
    kw = dict(dataset_args or {})
    train_kw, test_kw = dict(kw), dict(kw)
    partworld = name == "partworld"
    if partworld:
        if cfg.train_per_class:
            train_kw.setdefault("images_per_class", cfg.train_per_class)
        if cfg.test_per_class:
            test_kw.setdefault("images_per_class", cfg.test_per_class)
        if root is None:  # rendered once per run, then reused by every task and epoch
            train_kw.setdefault("in_memory", True)
            test_kw.setdefault("in_memory", True)
    train = build_dataset(name, root=root, split="train", **train_kw)
    test = build_dataset(name, root=root, split=cfg.eval_split, **test_kw)
    classes = list(train.classes)
    if list(test.classes) != classes:
        raise SplitError(f"{dataset}: the train and {cfg.eval_split} splits list different classes.")
    if not partworld:
        train = _limit(train, cfg.train_per_class, seed)
        test = _limit(test, cfg.test_per_class, seed + 1)
    for split, ds in (("train", train), (cfg.eval_split, test)):
        present = set(targets_of(ds))
        empty = [c for c in range(len(classes)) if c not in present]
        if empty:
            raise SplitError(f"the {split} split of {dataset} has no images of {len(empty)} classes (e.g. "
                             f"{[classes[c] for c in empty[:3]]}); every class of the split needs data.")
    return Protocol(dataset, make_scenario(len(classes), cfg), train, test, classes)
