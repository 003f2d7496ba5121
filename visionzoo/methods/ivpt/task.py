"""``train.py ivpt`` / ``train.py vpt`` and ``eval.py ivpt`` / ``eval.py vpt``.

Training: classification data (PartWorld downstream classes by default, CUB-200 with
``--dataset cub --data-root ...``). Evaluation: accuracy, consistency and stability from part
keypoints (``--dataset-args`` as for training; PartWorld's ground-truth keypoints or CUB's 15
parts), IVPT and the VPT-Deep baseline in one report (``--vpt-checkpoint``), plus
``--visualize N`` part-map figures. See ``docs/ivpt.md``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...cli import parse_kv
from ...data import build_dataset
from ...engine.data import SeededItems
from ...engine.task import Task, TaskParts, register_task
from ...factory import create_model, create_transforms
from .equivariance import sample_affine, warp
from .losses import LossWeights, ivpt_loss

# The paper's CUB recipe (Adam, base lr 1e-6 x 1e4 for head/prompts/grouping = 1e-2, prototypes
# x 2e2 = 2e-4 -> --proto-lr-mult 0.02, batch 16, 25 epochs, clip 2, lr halved every 4 epochs).
PAPER_RECIPE: dict[str, Any] = {"opt": "adam", "lr": 1e-2, "weight_decay": 0.0, "batch_size": 16, "epochs": 25,
                                "clip_grad": 2.0, "schedule": "step", "step_epochs": 4.0, "step_gamma": 0.5}
_COMMON_DEFAULTS: dict[str, Any] = {"opt": "adamw", "lr": 1e-3, "weight_decay": 0.05, "batch_size": 32,
                                    "epochs": 10, "clip_grad": None, "schedule": "cosine", "step_epochs": 4.0,
                                    "step_gamma": 0.5}


@dataclass
class PromptTaskConfig:
    """Flags shared by ``ivpt`` and ``vpt``."""

    train_split: str = field(default="train", metadata={"help": "dataset split used for training"})
    eval_split: str = field(default="test", metadata={"help": "split evaluated after each epoch and by eval.py"})
    eval_dataset_args: list[str] | None = field(
        default=None, metadata={"help": "KEY=VALUE overrides of --dataset-args for the evaluation split only "
                                        "(e.g. images_per_class=20)"})
    proto_lr_mult: float = field(default=0.02, metadata={
        "help": "lr multiplier of prototypes/spatial biases (IVPT) or prompts (VPT) relative to --lr"})
    recipe: Literal["auto", "paper", "none"] = field(default="auto", metadata={
        "help": "paper: Adam, lr 1e-2, wd 0, batch 16, 25 epochs, clip 2, step schedule (x0.5 every 4 epochs) for "
                "every one of those flags left at its default; auto: paper on cub datasets, none elsewhere"})
    vpt_maps: str = field(default="last,best", metadata={
        "help": "eval.py: VPT-Deep prompt-attention maps to report, comma-separated (one row each): last (the last "
                "prompted block), best (the block with the highest consistency), or layer<i>"})
    half_size: int = field(default=36, metadata={"help": "eval.py: half side (px at 224) of the hit box around a peak"})
    part_thresh: float = field(default=0.8, metadata={"help": "eval.py: hit rate that makes a prototype consistent"})
    noise_std: float = field(default=0.2, metadata={"help": "eval.py: stability noise std (normalised input)"})
    noise_clip: float = field(default=0.25, metadata={"help": "eval.py: stability noise clip"})


@dataclass
class IVPTTaskConfig(PromptTaskConfig):
    """``ivpt`` flags: loss weights, equivariance warp, evaluation extras."""

    w_classification: float = field(default=1.0, metadata={"help": "weight of the cross-entropy"})
    w_consistency: float = field(default=1.0, metadata={"help": "weight of KL(final maps || grouped layer maps)"})
    w_presence: float = field(default=1.0, metadata={"help": "weight of the part presence loss"})
    w_enforced_presence: float = field(default=1.0, metadata={"help": "weight of the background-at-border loss"})
    w_total_variation: float = field(default=1.0, metadata={"help": "weight of the map smoothness loss"})
    w_entropy: float = field(default=1.0, metadata={"help": "weight of the pixel-wise entropy loss"})
    w_orthogonality: float = field(default=1.0, metadata={"help": "weight of the part-feature orthogonality loss"})
    w_equivariance: float = field(default=1.0, metadata={"help": "weight of the equivariance loss (0 skips its "
                                                                 "second forward pass)"})
    w_part_presence: float = field(default=0.0, metadata={
        "help": "weight of a per-image presence loss on the final parts (not in the reference; for data where "
                "every part is visible in every image)"})
    presence_pool: int = field(default=3, metadata={
        "help": "average pooling (k x k) in the presence and background losses; 3 as the reference (37x37 "
                "tokens), smaller for small token grids"})
    eq_degrees: float = field(default=90.0, metadata={"help": "equivariance warp: max rotation (degrees)"})
    eq_translate: float = field(default=0.11, metadata={"help": "equivariance warp: max shift (fraction of side)"})
    eq_scale: list[float] = field(default_factory=lambda: [0.8, 1.4],
                                  metadata={"help": "equivariance warp: scale range MIN MAX"})
    vpt_checkpoint: str | None = field(default=None, metadata={
        "help": "eval.py: a VPT-Deep checkpoint (folder, card name, hf-hub:) scored in the same run"})
    ivpt_maps: str = field(default="auto", metadata={
        "help": "eval.py: IVPT maps to headline: auto (the n_pro[-3] stage, as the reference), parts, or stage<i>"})
    visualize: int = field(default=0, metadata={"help": "eval.py: write N part-map figures (PNG)"})
    proto_init: Literal["random", "kmeans"] = field(default="random", metadata={
        "help": "prototype init: random N(0, 0.05) as the reference, or kmeans of the features each stage sees on "
                "--proto-init-images training images (background = the cluster holding the image border)"})
    proto_init_images: int = field(default=256, metadata={"help": "training images used by --proto-init kmeans"})

    def weights(self) -> LossWeights:
        return LossWeights(classification=self.w_classification, consistency=self.w_consistency,
                           presence=self.w_presence, enforced_presence=self.w_enforced_presence,
                           total_variation=self.w_total_variation, entropy=self.w_entropy,
                           orthogonality=self.w_orthogonality, equivariance=self.w_equivariance,
                           part_presence=self.w_part_presence)


def apply_recipe(args: argparse.Namespace, recipe: str) -> dict[str, Any]:
    """Set the paper recipe on the training flags still at their defaults; returns what changed."""
    use = recipe == "paper" or (recipe == "auto" and str(args.dataset).startswith("cub"))
    changed = {}
    if use:
        for key, value in PAPER_RECIPE.items():
            if hasattr(args, key) and getattr(args, key) == _COMMON_DEFAULTS[key]:
                setattr(args, key, value)
                changed[key] = value
    if changed and not getattr(args, "quiet", False):
        print(f"paper recipe applied: {changed}", file=sys.stderr)
    return changed


def dataset_kwargs(args: argparse.Namespace, extra: list[str] | dict | None = None) -> dict[str, Any]:
    """``--dataset-args`` (+ overrides); PartWorld defaults to its 100 downstream classes."""
    kw = dict(args.dataset_args or {})
    if args.dataset == "partworld":
        kw.setdefault("classes", "downstream")
    kw.update(extra if isinstance(extra, dict) else parse_kv(extra))
    return kw


class _PromptTask(Task):
    """Model + datasets + parameter groups shared by ``ivpt`` and ``vpt``."""

    metric = "acc1"
    default_dataset = "partworld"

    def build_model(self, args: argparse.Namespace, classes: list[str]) -> nn.Module:
        model = create_model(args.model, pretrained=args.pretrained or False,
                             **{"num_classes": len(classes), "class_names": classes, **(args.model_args or {})})
        if getattr(model, "class_names", None) is None:
            model.class_names = classes
        return model

    def build(self, args: argparse.Namespace, training: bool) -> TaskParts:
        cfg = self.config_from_args(args)
        if training:
            apply_recipe(args, cfg.recipe)
        eval_raw = build_dataset(args.dataset, root=args.data_root, split=cfg.eval_split,
                                 **dataset_kwargs(args, cfg.eval_dataset_args))
        classes = list(eval_raw.classes)
        model = self.build_model(args, classes)
        eval_set = SeededItems(eval_raw, create_transforms(model, training=False), args.seed)
        train_set = None
        if training:
            train_raw = build_dataset(args.dataset, root=args.data_root, split=cfg.train_split, **dataset_kwargs(args))
            if list(train_raw.classes) != classes:
                raise ValueError(f"{args.dataset}: the {cfg.train_split!r} and {cfg.eval_split!r} splits list "
                                 "different classes.")
            train_set = SeededItems(train_raw, create_transforms(model, training=True), args.seed)
        return TaskParts(model=model, train_set=train_set, eval_set=eval_set)

    def param_groups(self, model: nn.Module, args: argparse.Namespace) -> list[dict[str, Any]]:
        roles = model.param_groups_by_role()
        cfg = self.config_from_args(args)
        decay = [p for p in roles["head"] if p.ndim > 1]
        no_decay = [p for p in roles["head"] if p.ndim <= 1]
        groups = [{"params": decay}, {"params": no_decay, "weight_decay": 0.0},
                  {"params": roles["prototypes"], "lr": args.lr * cfg.proto_lr_mult, "weight_decay": 0.0}]
        return [g for g in groups if g["params"]]

    @torch.no_grad()
    def eval_step(self, model: nn.Module, batch, args: argparse.Namespace) -> dict[str, float]:
        images, target = batch[0], batch[1]
        logits = model(images).float()
        k = min(5, logits.shape[1])
        return {"correct1": int((logits.argmax(1) == target).sum()),
                "correct5": int((logits.topk(k, 1).indices == target[:, None]).any(1).sum()),
                "loss_sum": float(F.cross_entropy(logits, target, reduction="sum")), "count": len(target)}

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        n = max(1.0, sums.get("count", 0.0))
        return {"acc1": 100.0 * sums.get("correct1", 0.0) / n, "acc5": 100.0 * sums.get("correct5", 0.0) / n,
                "loss": sums.get("loss_sum", 0.0) / n, "count": int(sums.get("count", 0))}

    def run_eval(self, args: argparse.Namespace, info, log) -> dict[str, Any]:
        from .report import run_interp_eval

        return run_interp_eval(self, args, info, log)


def init_from_data(model: nn.Module, train_set, count: int, seed: int) -> None:
    """k-means prototype init (:meth:`IVPT.init_prototypes_from_data`) from ``count`` training images
    spread over the set."""
    n = min(max(1, count), len(train_set))
    picks = torch.linspace(0, len(train_set) - 1, n).round().long().unique().tolist()
    images = torch.stack([train_set[i][0] for i in picks])
    model.init_prototypes_from_data(images, seed=seed)


@register_task
class IVPTTask(_PromptTask):
    name = "ivpt"
    help = "IVPT: interpretable concept-prototype prompts on a frozen timm ViT (accuracy, consistency, stability)"
    Config = IVPTTaskConfig

    def build(self, args: argparse.Namespace, training: bool) -> TaskParts:
        parts = super().build(args, training)
        cfg: IVPTTaskConfig = self.config_from_args(args)
        if training and cfg.proto_init == "kmeans" and not args.resume and parts.train_set is not None:
            init_from_data(parts.model, parts.train_set, cfg.proto_init_images, args.seed)
        return parts

    def loss(self, model: nn.Module, batch, args: argparse.Namespace) -> dict[str, Tensor]:
        cfg: IVPTTaskConfig = self.config_from_args(args)
        images, target = batch[0], batch[1]
        out = model(images, return_all=True)
        out_w = params = None
        weights = cfg.weights()
        if weights.equivariance:
            if len(cfg.eq_scale) != 2 or not 0 < cfg.eq_scale[0] <= cfg.eq_scale[1]:
                raise ValueError(f"--eq-scale takes MIN MAX with 0 < MIN <= MAX, got {cfg.eq_scale}.")
            lo, hi = cfg.eq_scale
            params = sample_affine(images.shape[0], cfg.eq_degrees, cfg.eq_translate, (lo, hi), device=images.device)
            out_w = model(warp(images, params), return_all=True)
        return ivpt_loss(out, target, weights, out_w, params, pool=cfg.presence_pool)


@register_task
class VPTTask(_PromptTask):
    name = "vpt"
    help = "VPT-Deep baseline on a frozen timm ViT (accuracy; eval.py adds prompt-attention consistency/stability)"
    Config = PromptTaskConfig

    def loss(self, model: nn.Module, batch, args: argparse.Namespace) -> dict[str, Tensor]:
        images, target = batch[0], batch[1]
        return {"loss": F.cross_entropy(model(images).float(), target)}
