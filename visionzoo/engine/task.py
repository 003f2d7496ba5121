"""The contract between a method and the engine, and the task registry.

A method subclasses :class:`Task`, gives its flags as a dataclass (``Config``; each field becomes
``--field-name`` on the command line, so flags cannot drift from the code) and registers itself
with ``@register_task``. The engine owns everything else: devices, DDP, AMP, schedule,
checkpoints, logging, resume.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.data import Dataset

from ..errors import unknown_name


@dataclass
class NoConfig:
    """A task without method-specific flags."""


@dataclass
class TaskParts:
    """What a task builds for a run."""

    model: nn.Module
    train_set: Dataset | None = None
    eval_set: Dataset | None = None
    collate_fn: Callable | None = None


class Task:
    """Base class of a trainable/evaluable method.

    Subclasses set ``name``, ``help``, ``Config`` and ``metric`` and implement :meth:`build`,
    :meth:`loss`, :meth:`eval_step` and :meth:`summarize`.
    """

    name: str = ""
    help: str = ""
    Config: type = NoConfig
    metric: str = "acc1"  # primary metric, higher is better; picks the best checkpoint
    default_dataset: str | None = None

    def config_from_args(self, args: argparse.Namespace) -> Any:
        """The method config dataclass filled from parsed flags."""
        return self.Config(**{f.name: getattr(args, f.name) for f in fields(self.Config) if hasattr(args, f.name)})

    def build(self, args: argparse.Namespace, training: bool) -> TaskParts:
        """Model and datasets for training (``training=True``) or evaluation."""
        raise NotImplementedError

    def param_groups(self, model: nn.Module, args: argparse.Namespace) -> list[dict[str, Any]]:
        """Optimizer parameter groups; default: every trainable parameter, weight decay on >1-D ones."""
        decay, no_decay = [], []
        for _, p in model.named_parameters():
            if p.requires_grad:
                (decay if p.ndim > 1 else no_decay).append(p)
        groups = [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]
        return [g for g in groups if g["params"]]

    def loss(self, model: nn.Module, batch: Any, args: argparse.Namespace) -> dict[str, Tensor]:
        """Forward one training batch; must return ``{"loss": scalar, ...other scalars}``."""
        raise NotImplementedError

    @torch.no_grad()
    def eval_step(self, model: nn.Module, batch: Any, args: argparse.Namespace) -> dict[str, float]:
        """Sums over one evaluation batch (e.g. ``correct``, ``count``); summed over batches and ranks."""
        raise NotImplementedError

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        """Metrics from the summed ``eval_step`` outputs."""
        raise NotImplementedError

    # Optional hooks (define them in a subclass to use them):
    #   run_train(args) -> dict: replaces the single engine.fit call of train.py (e.g. a sequence of
    #       fits over class-incremental tasks); it should still call engine.fit for each stage.
    #   run_eval(args, info, log) -> dict: replaces the single evaluation of eval.py (several methods
    #       or baselines in one report).


_TASKS: dict[str, type[Task]] = {}


def register_task(cls: type[Task]) -> type[Task]:
    """Class decorator: make a task available to ``train.py``/``eval.py`` under ``cls.name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in _TASKS and _TASKS[cls.name] is not cls:
        raise ValueError(f"task {cls.name!r} is registered twice")
    _TASKS[cls.name] = cls
    return cls


def _ensure_loaded() -> None:
    from .. import methods  # noqa: F401


def list_tasks() -> list[str]:
    """Names of the registered tasks (the first word of ``train.py``/``eval.py``)."""
    _ensure_loaded()
    return sorted(_TASKS)


def get_task(name: str) -> Task:
    """A fresh instance of task ``name``."""
    _ensure_loaded()
    if name not in _TASKS:
        raise unknown_name("task", name, _TASKS)
    return _TASKS[name]()
