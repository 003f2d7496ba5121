"""``train.py ram`` / ``train.py ram --finetune`` / ``eval.py ram``: the RAM family's jobs.

* ``train.py ram``: supervised training over a mixture of operators (one operator per batch,
  drawn from the batch's seed), random crops of any dataset (``natural-train`` by default), the
  paper's per-task weighted L1 loss (:mod:`.mixture`); validation PSNR per operator on fixed crops
  held out of the *training* images (:mod:`.crops`), never on evaluation images.
* ``train.py ram --finetune``: self-supervised fine-tuning on a new operator from measurements alone
  (:mod:`.finetune_job`).
* ``eval.py ram``: PSNR/SSIM per operator with baselines, tables and a figure (:mod:`.eval_job`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

import torch
from deepinv.loss.metric import PSNR
from torch import Tensor, nn

from ...data import build_dataset
from ...engine import fit
from ...engine.data import SeededItems
from ...engine.task import Task, TaskParts, register_task
from ...errors import VisionZooError
from ...factory import create_model
from .crops import OperatorCrops
from .mixture import (
    DEFAULT_OPERATORS,
    check_operators,
    draw_operator,
    mixture_channels,
    operator_probabilities,
    parse_operators,
    task_weight,
    weighted_l1,
)
from .operators import OPERATOR_HELP, OPERATORS, OperatorSpec, simulate

TRAIN_DATASET = "natural-train"
EVAL_DATASET = "natural-eval"
BASELINE_NAMES = ("adjoint", "pinv", "tv_pgd", "deepinv_ram")
_EVAL_ONLY = {"natural-eval"}  # datasets that must never feed a supervised training run

_OPS_HELP = ("operator strings NAME[:KEY=VALUE,...], e.g. 'blur:sigma=2,noise=gaussian:0.05'; names: "
             + ", ".join(OPERATORS) + " (parameters and defaults: see the list at the end of --help)")


@dataclass
class RAMTaskConfig:
    # ---------------------------------------------------------------- operators (all jobs)
    operators: list[str] = field(default_factory=lambda: list(DEFAULT_OPERATORS), metadata={
        "help": "training: the operator mixture (one drawn per batch); eval: the operators measured. " + _OPS_HELP})
    operator_weights: list[float] | None = field(default=None, metadata={
        "help": "sampling weights of --operators in training (default: uniform)"})
    channels: int = field(default=3, metadata={"choices": [1, 3], "help": "image channels (3 = RGB, 1 = grey)"})
    # ---------------------------------------------------------------- supervised training
    crop_size: int = field(default=64, metadata={"help": "training/validation crop side in pixels"})
    resize: int = field(default=384, metadata={"help": "resize the training images' short side first (0 = keep)"})
    scale_min: float = field(default=0.5, metadata={
        "help": "random resized crops: windows of crop/s pixels, s uniform in [scale_min, 1]"})
    crops_per_image: int = field(default=100, metadata={"help": "training crops per image and epoch"})
    val_split: str = field(default="region", metadata={
        "choices": ["region", "images"],
        "help": "validation crops from a held-out strip of every training image (region) or from held-out "
                "images (images)"})
    val_fraction: float = field(default=0.15, metadata={"help": "share of each image / of the images held out"})
    val_crops: int = field(default=2, metadata={"help": "fixed validation crops per held-out image (or strip)"})
    task_weighting: bool = field(default=True, metadata={
        "help": "weight the L1 loss per task by ω = ‖Aᵀy‖/σ (the paper's weighting)"})
    sigma_floor: float = field(default=0.01, metadata={"help": "smallest σ in ω (noiseless operators)"})
    fast_multiscale: bool = field(default=True, metadata={
        "help": "FFT multiscale operators in training (same maths as deepinv's, ~20 %% faster)"})
    # ---------------------------------------------------------------- self-supervised fine-tuning
    finetune: bool = field(default=False, metadata={
        "help": "self-supervised fine-tuning of --pretrained on --finetune-operator from measurements alone"})
    finetune_operator: str = field(default="demosaic", metadata={"help": "the new operator (an operator string)"})
    finetune_images: int = field(default=1, metadata={
        "help": "measurements to fine-tune on (the first N images of --dataset; 1 = single measurement)"})
    finetune_epochs: int = field(default=50, metadata={"help": "maximum passes over the measurements"})
    finetune_lr: float = field(default=1e-4, metadata={"help": "Adam learning rate of the fine-tuning"})
    finetune_patience: int = field(default=10, metadata={"help": "early stopping: epochs without a better "
                                                                 "held-out self-supervised loss"})
    finetune_transform: str = field(default="auto", metadata={
        "choices": ["auto", "shift", "rotate"], "help": "Equivariant Imaging transform"})
    finetune_eval_dataset: str = field(default=EVAL_DATASET, metadata={
        "help": "also report PSNR before/after on measurements of this dataset ('' = none)"})
    # ---------------------------------------------------------------- evaluation
    image_size: int = field(default=256, metadata={
        "help": "eval and fine-tuning images: short side resized to this, centred square crop (0 = keep)"})
    eval_images: int = field(default=0, metadata={"help": "evaluate on the first N images (0 = all)"})
    baselines: list[str] = field(default_factory=lambda: list(BASELINE_NAMES), metadata={
        "choices": list(BASELINE_NAMES),
        "help": "baselines in the same run: adjoint (Aᵀy), pinv (A†y), tv_pgd (TV proximal gradient), "
                "deepinv_ram (deepinv.models.RAM with the same weights; ram_base only)"})
    tv_iterations: int = field(default=100, metadata={"help": "iterations of the TV-PGD baseline"})


EPILOG = f"""\
examples:
  train.py ram --model ram_tiny --operators 'blur:sigma=2,noise=gaussian:0.05' 'inpainting:ratio=0.5' \\
      --crop-size 64 --batch-size 8 --epochs 10 --lr 1e-3 --output-dir runs/ram
  train.py ram --finetune --model ram_tiny --pretrained true --finetune-operator demosaic --finetune-images 1
  eval.py ram --model ram_tiny --pretrained true --operators 'sr:factor=2' 'denoise:noise=gaussian:0.1'

--dataset defaults to {TRAIN_DATASET} (training, fine-tuning measurements) and {EVAL_DATASET} (eval.py).

{OPERATOR_HELP}
"""


def _specs_key(args: argparse.Namespace) -> tuple[str, ...]:
    return tuple(args.operators)


def metric_keys(specs: list[OperatorSpec]) -> list[str]:
    """One short, unique key per operator for metric names: ``blur``, ``sr``, ``blur_2`` ..."""
    keys: list[str] = []
    for spec in specs:
        key, n = spec.name, 2
        while key in keys:
            key, n = f"{spec.name}_{n}", n + 1
        keys.append(key)
    return keys


def build_reconstructor(args: argparse.Namespace, channels: tuple[int, ...] | None = None) -> nn.Module:
    """``create_model(--model, --pretrained, **--model-args)``; a new model gets heads for ``channels``."""
    kwargs = dict(args.model_args or {})
    if not args.pretrained and channels is not None and "in_channels" not in kwargs:
        kwargs["in_channels"] = list(channels)
    model = create_model(args.model, pretrained=args.pretrained or False, **kwargs)
    if not hasattr(model, "in_channels"):
        raise VisionZooError(f"{args.model} is not a RAM-family reconstructor (called as model(y, physics)); "
                             "use ram_tiny, ram_small or ram_base.")
    return model


@register_task
class RAMTask(Task):
    name = "ram"
    help = ("RAM family: multi-operator supervised training, self-supervised fine-tuning (--finetune), "
            "evaluation with baselines (eval.py)")
    Config = RAMTaskConfig
    metric = "psnr"
    default_dataset = None  # natural-train for training, natural-eval for eval.py (see EPILOG)
    epilog = EPILOG

    def __init__(self) -> None:
        self._parsed: dict[tuple[str, ...], list[OperatorSpec]] = {}

    def specs(self, args: argparse.Namespace) -> list[OperatorSpec]:
        """The parsed ``--operators`` (parsed once per run)."""
        key = _specs_key(args)
        if key not in self._parsed:
            self._parsed[key] = parse_operators(list(key))
        return self._parsed[key]

    # ------------------------------------------------------------------------------- build
    def build(self, args: argparse.Namespace, training: bool) -> TaskParts:
        cfg: RAMTaskConfig = self.config_from_args(args)
        specs = self.specs(args)
        operator_probabilities(len(specs), cfg.operator_weights)  # validates the weights
        model = build_reconstructor(args, mixture_channels(specs, cfg.channels))
        check_operators(specs, cfg.channels, cfg.crop_size, model.in_channels)
        model.fast_multiscale = cfg.fast_multiscale
        dataset = args.dataset or TRAIN_DATASET
        if dataset in _EVAL_ONLY:
            raise VisionZooError(f"{dataset} is kept for evaluation and never used for training; train on "
                                 f"{TRAIN_DATASET} (or another training set).")
        base = build_dataset(dataset, root=args.data_root, split="train", **(args.dataset_args or {}))
        common = dict(crop=cfg.crop_size, val_fraction=cfg.val_fraction, val_split=cfg.val_split,
                      resize=cfg.resize, scale_min=cfg.scale_min, channels=cfg.channels, seed=args.seed)
        eval_set = OperatorCrops(base, "val", crops_per_image=cfg.val_crops, **common)
        eval_set[0]  # region sizes are checked now, not after the first epoch
        train_set = None
        if training:
            crops = OperatorCrops(base, "train", crops_per_image=cfg.crops_per_image, **common)
            train_set = SeededItems(crops, None, args.seed)
            train_set[0]
        return TaskParts(model=model, train_set=train_set, eval_set=eval_set)

    # ------------------------------------------------------------------------------- training
    def loss(self, model: nn.Module, batch: Any, args: argparse.Namespace) -> dict[str, Tensor]:
        """One operator for the whole batch, picked and seeded by the first item's operator seed."""
        x, seeds = batch[0], batch[2]
        specs = self.specs(args)
        seed = int(seeds[0])
        j = draw_operator(seed, operator_probabilities(len(specs), args.operator_weights))
        x_op, y, physics = simulate(specs[j], x, seed=seed)
        x_hat = model(y, physics)
        weight = task_weight(physics, y, args.sigma_floor) if args.task_weighting else None
        loss, l1 = weighted_l1(x_hat, x_op, weight)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            # DDP needs a gradient for every parameter; heads of other channel counts get a zero one.
            loss = loss + 0.0 * sum(p.sum() for p in model.parameters() if p.requires_grad)
        return {"loss": loss, "l1": l1.mean(), "omega": weight.mean() if weight is not None else torch.ones(()),
                "operator": torch.tensor(float(j))}

    # ------------------------------------------------------------------------------- validation
    @torch.no_grad()
    def eval_step(self, model: nn.Module, batch: Any, args: argparse.Namespace) -> dict[str, float]:
        """PSNR sums of the model and of ``Aᵀy`` for every operator on the validation crops."""
        x, seeds = batch[0], batch[2]
        specs = self.specs(args)
        sums: dict[str, float] = {"count": float(x.shape[0])}
        for j, (spec, key) in enumerate(zip(specs, metric_keys(specs), strict=True)):
            x_op, y, physics = simulate(spec, x, seed=int(seeds[0]) + j)
            psnr = PSNR(max_pixel=1.0, complex_abs=x_op.shape[1] == 2)
            x_hat = model(y, physics).float().clamp(0, 1)
            sums[f"psnr_{key}"] = float(psnr(x_hat, x_op).sum())
            sums[f"adjoint_psnr_{key}"] = float(psnr(physics.A_adjoint(y).float().clamp(0, 1), x_op).sum())
        return sums

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        n = max(1.0, sums.get("count", 0.0))
        per_op = {k: v / n for k, v in sums.items() if k.startswith("psnr_")}
        adj = {k: v / n for k, v in sums.items() if k.startswith("adjoint_psnr_")}
        out = {"psnr": sum(per_op.values()) / max(1, len(per_op)),
               "adjoint_psnr": sum(adj.values()) / max(1, len(adj))}
        return {**out, **per_op, "count": int(sums.get("count", 0))}

    # ------------------------------------------------------------------------------- hooks
    def run_train(self, args: argparse.Namespace) -> dict[str, Any]:
        """``--finetune``: self-supervised fine-tuning; otherwise the engine's supervised ``fit``."""
        if args.finetune:
            from .finetune_job import run_finetune

            return run_finetune(self, args)
        self.specs(args)  # bad operator strings fail before anything is built
        args.dataset = args.dataset or TRAIN_DATASET
        return fit(self, args)

    def run_eval(self, args: argparse.Namespace, info: Any, log: Any) -> dict[str, Any]:
        from .eval_job import run_ram_eval

        args.dataset = args.dataset or EVAL_DATASET
        return run_ram_eval(self, args, info, log)
