"""``train.py classify`` / ``eval.py classify``: supervised image classification."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...data import build_dataset
from ...engine.data import SeededItems
from ...engine.task import Task, TaskParts, register_task
from ...factory import create_model, create_transforms


@dataclass
class ClassifyConfig:
    linear_probe: bool = field(default=False, metadata={"help": "freeze the backbone, train only the head"})
    label_smoothing: float = field(default=0.0, metadata={"help": "label smoothing of the cross-entropy"})
    train_split: str = field(default="train", metadata={"help": "dataset split used for training"})
    eval_split: str = field(default="val", metadata={"help": "dataset split evaluated after each epoch / by eval.py"})


def top_k_correct(logits: Tensor, target: Tensor, k: int) -> int:
    k = min(k, logits.shape[1])
    return int((logits.topk(k, dim=1).indices == target[:, None]).any(dim=1).sum())


@register_task
class ClassifyTask(Task):
    name = "classify"
    help = "supervised classification (fine-tuning or linear probe) of a timm backbone"
    Config = ClassifyConfig
    metric = "acc1"
    default_dataset = "random-blobs"

    def build(self, args: argparse.Namespace, training: bool) -> TaskParts:
        cfg: ClassifyConfig = self.config_from_args(args)
        ds_kwargs = dict(args.dataset_args or {})
        eval_raw = build_dataset(args.dataset, root=args.data_root, split=cfg.eval_split, **ds_kwargs)
        classes = list(eval_raw.classes)
        overrides = {"num_classes": len(classes), "class_names": classes}
        if training:  # for evaluation a checkpoint keeps the trainability it was saved with
            overrides["linear_probe"] = cfg.linear_probe
        model = create_model(args.model, pretrained=args.pretrained or False,
                             **{**overrides, **(args.model_args or {})})
        if getattr(model, "class_names", None) is None:
            model.class_names = classes
        eval_set = SeededItems(eval_raw, create_transforms(model, training=False), args.seed)
        train_set = None
        if training:
            train_raw = build_dataset(args.dataset, root=args.data_root, split=cfg.train_split, **ds_kwargs)
            if list(train_raw.classes) != classes:
                raise ValueError(f"{args.dataset}: the {cfg.train_split!r} and {cfg.eval_split!r} splits list "
                                 "different classes.")
            train_set = SeededItems(train_raw, create_transforms(model, training=True), args.seed)
        return TaskParts(model=model, train_set=train_set, eval_set=eval_set)

    def loss(self, model: nn.Module, batch, args: argparse.Namespace) -> dict[str, Tensor]:
        images, target = batch[0], batch[1]
        logits = model(images)
        loss = F.cross_entropy(logits.float(), target, label_smoothing=args.label_smoothing)
        return {"loss": loss}

    @torch.no_grad()
    def eval_step(self, model: nn.Module, batch, args: argparse.Namespace) -> dict[str, float]:
        images, target = batch[0], batch[1]
        logits = model(images).float()
        return {"correct1": top_k_correct(logits, target, 1), "correct5": top_k_correct(logits, target, 5),
                "loss_sum": float(F.cross_entropy(logits, target, reduction="sum")), "count": len(target)}

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        n = max(1.0, sums.get("count", 0.0))
        return {"acc1": 100.0 * sums.get("correct1", 0.0) / n, "acc5": 100.0 * sums.get("correct5", 0.0) / n,
                "loss": sums.get("loss_sum", 0.0) / n, "count": int(sums.get("count", 0))}
