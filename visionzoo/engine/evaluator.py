"""The evaluation loop: sums from ``task.eval_step`` over batches and ranks, then ``task.summarize``."""

from __future__ import annotations

import argparse
from collections import defaultdict

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from .data import ResumableSampler
from .distributed import DistInfo, all_reduce_sums
from .precision import autocast
from .runlog import RunLogger
from .task import Task


def eval_loader(dataset: Dataset, args: argparse.Namespace, info: DistInfo, collate_fn=None) -> DataLoader:
    sampler = ResumableSampler(len(dataset), shuffle=False, rank=info.rank, world_size=info.world_size, pad=False)
    return DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers,
                      collate_fn=collate_fn, pin_memory=info.device.type == "cuda")


def evaluate(task: Task, model: nn.Module, dataset: Dataset, args: argparse.Namespace, info: DistInfo,
             logger: RunLogger | None = None, collate_fn=None) -> dict[str, float]:
    """Run ``task.eval_step`` over ``dataset`` (split over ranks) and return ``task.summarize``."""
    loader = eval_loader(dataset, args, info, collate_fn)
    was_training = model.training
    model.eval()
    sums: dict[str, float] = defaultdict(float)
    batches = logger.progress(loader, len(loader), "eval") if logger else loader
    with torch.inference_mode(), autocast(args.precision, info.device):
        for batch in batches:
            for k, v in task.eval_step(model, _to_device(batch, info.device), args).items():
                sums[k] += float(v)
    model.train(was_training)
    return task.summarize(all_reduce_sums(dict(sums), info))


def _to_device(batch, device: torch.device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_device(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    return batch


to_device = _to_device
