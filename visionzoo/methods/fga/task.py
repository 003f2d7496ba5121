"""``train.py coop`` / ``train.py cocoop`` / ``train.py fga`` (CoOp / CoCoOp / SAPT prompt tuning) and
``eval.py fga`` (every method).

Training is few-shot (``--shots`` per class, drawn with ``--few-shot-seed``) on the dataset's
``--train-split``; only the context vectors (and CoCoOp's Meta-Net) train. ``train.py fga`` is SAPT: the engine's SAM step
(``--sam-rho``, ``--sam-lambda``) on the context; when ``--sam-rho`` is left at 0 it becomes
:data:`~.config.SAPT_RHO`. ``eval.py coop`` reports plain top-1 accuracy; ``eval.py fga`` runs
the multi-method harness (:mod:`.evaluate`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import Dataset, Subset

from ...cli import parse_pretrained
from ...data import build_dataset
from ...data.continual import few_shot
from ...engine.data import SeededItems
from ...engine.task import Task, TaskParts, register_task
from ...errors import VisionZooError
from ...factory import create_model, create_transforms
from .cocoop import TEXT_CHUNK, CoCoOpCLIP
from .config import (
    DEFAULT_CTX_INIT,
    N_VIEWS,
    SAPT_RHO,
    STSS_KEEP,
    STSS_LAMBDA,
    STSS_R,
    STSS_RHO,
    TPT_KEEP,
    TPT_LR,
    TPT_STEPS,
    ZERO_KEEP,
)
from .harness import METHODS, fetch_items, spread_indices
from .model import PromptCLIP


@dataclass
class CoOpConfig:
    n_ctx: int | None = field(default=None, metadata={
        "help": "context vectors (default: the token count of --ctx-init, 16 when random)"})
    ctx_init: str = field(default=DEFAULT_CTX_INIT, metadata={
        "help": "phrase whose token embeddings initialise the context ('' = random)"})
    class_specific: bool = field(default=False, metadata={"help": "one context per class (CoOp's CSC)"})
    clip_weights: str = field(default="true", metadata={
        "help": "CLIP weights when --pretrained is not given: true (shipped / open_clip's first tag), false "
                "(random), an open_clip tag, a file or local-dir folder, hf-hub:org/repo or a URL"})
    shots: int = field(default=16, metadata={"help": "training images per class (0 = all)"})
    few_shot_seed: int = field(default=1, metadata={"help": "seed of the few-shot draw"})
    train_split: str = field(default="train", metadata={"help": "split the few-shot images come from"})
    eval_split: str = field(default="val", metadata={"help": "split evaluated after each epoch / by eval.py coop"})
    eval_limit: int = field(default=0, metadata={
        "help": "evaluate on at most this many images, spread evenly over the split (0 = all)"})


@dataclass
class CoCoOpTrainConfig(CoOpConfig):
    text_chunk: int = field(default=TEXT_CHUNK, metadata={
        "help": "CoCoOp: prompts (images x classes) per text-encoder call; bounds inference memory only"})


@dataclass
class FGAConfig(CoOpConfig):
    method: list[str] = field(default_factory=lambda: ["all"], metadata={
        "help": "eval.py fga: methods to compare, from: all (every method whose prompt is available), "
                + ", ".join(METHODS)})
    coop_pretrained: str | None = field(default=None, metadata={
        "help": "eval.py fga: CoOp checkpoint (folder, card, hf-hub: or URL) for coop, tpt+coop, zero+coop, stss+coop"})
    cocoop_pretrained: str | None = field(default=None, metadata={
        "help": "eval.py fga: CoCoOp checkpoint (folder, card, hf-hub: or URL) for cocoop"})
    cocoop_chunk: int = field(default=TEXT_CHUNK, metadata={
        "help": "eval.py fga: CoCoOp prompts (images x classes) per text-encoder call (memory bound)"})
    eval_sets: list[str] | None = field(default=None, metadata={
        "help": "eval.py fga: sets as DATASET[:STYLE][=ROOT], first = in-distribution (default: PartWorld's source "
                "and shifted styles, or --dataset)"})
    test_split: str = field(default="test", metadata={"help": "eval.py fga: split of the evaluation sets"})
    images_per_set: int = field(default=0, metadata={
        "help": "eval.py fga: images per set, spread evenly (0 = all)"})
    views: int = field(default=N_VIEWS, metadata={"help": "eval.py fga: views per image (view 0 = the original)"})
    augmix: bool = field(default=False, metadata={"help": "eval.py fga: AugMix the views (TPT's fine-grained setting)"})
    view_seed: int = field(default=0, metadata={"help": "eval.py fga: seed of the view sampling"})
    image_batch: int = field(default=8, metadata={"help": "eval.py fga: images whose views are encoded together"})
    stss_r: int = field(default=STSS_R, metadata={"help": "STSS: random prompt perturbations R"})
    stss_keep: int = field(default=STSS_KEEP, metadata={"help": "STSS: views kept s (lowest sharpness score)"})
    stss_rho: float = field(default=STSS_RHO, metadata={"help": "STSS: perturbation radius rho'"})
    stss_lambda: float = field(default=STSS_LAMBDA, metadata={"help": "STSS: weight lambda of the sharpness term"})
    stss_seed: int = field(default=0, metadata={"help": "STSS: seed of the perturbation directions"})
    stss_sweep: list[str] | None = field(default=None, metadata={
        "help": "eval.py fga: extra STSS settings on the same views, e.g. rho=0.2,keep=10 keep=20 (keys: rho, keep, "
                "r, lambda, seed); reported as fga@<setting>"})
    tpt_lr: float = field(default=TPT_LR, metadata={"help": "TPT: AdamW learning rate"})
    tpt_steps: int = field(default=TPT_STEPS, metadata={"help": "TPT: optimisation steps per image"})
    tpt_keep: float = field(default=TPT_KEEP, metadata={"help": "TPT: fraction of lowest-entropy views used"})
    tpt_class_chunk: int | None = field(default=None, metadata={
        "help": "TPT: back-propagate the text encoder this many classes at a time (less memory, same gradient)"})
    zero_keep: float = field(default=ZERO_KEEP, metadata={"help": "Zero: fraction of most confident views voting"})
    figures: int = field(default=0, metadata={
        "help": "eval.py fga: PNGs of this many test images' views, marked kept/dropped by FGA (or STSS)"})


def build_prompt_model(args: argparse.Namespace, cfg: CoOpConfig, classes: list[str]) -> PromptCLIP:
    """The prompt model of ``--model``: from ``--pretrained`` when given, else freshly initialised."""
    extra = dict(args.model_args or {})
    if args.pretrained:
        model = create_model(args.model, pretrained=args.pretrained, class_names=classes, **extra)
    else:
        model = create_model(args.model, class_names=classes, n_ctx=cfg.n_ctx, ctx_init=cfg.ctx_init,
                             class_specific=cfg.class_specific, backbone_pretrained=parse_pretrained(cfg.clip_weights),
                             **extra)
    if not isinstance(model, PromptCLIP):
        raise VisionZooError(f"{args.model} is not a prompt model; use coop_<open_clip name>, cocoop_<open_clip name> "
                             "or fga_<open_clip name> (e.g. coop_clip_tiny_partworld).")
    return model


def _limited(dataset, limit: int):
    if not limit or limit >= len(dataset):
        return dataset
    sub = Subset(dataset, spread_indices(len(dataset), limit))
    sub.classes = dataset.classes
    return sub


class CachedItems(Dataset):
    """All items of a small dataset, fetched once (batched where the dataset supports it).

    Few-shot sets are re-read every epoch; for rendered data (PartWorld) that means re-rendering, so
    they are kept in memory when they fit in ``budget_mb``; otherwise the dataset is used as it is.
    """

    def __init__(self, dataset: Dataset, budget_mb: float = 1024.0, chunk: int = 64):
        self.dataset = dataset
        self.classes = getattr(dataset, "classes", None)
        self.items: list | None = None
        n = len(dataset)
        first = dataset[0]
        if not isinstance(first[0], Tensor) or n * first[0].numel() * first[0].element_size() > budget_mb * 2**20:
            return
        items: list = []
        for i in range(0, n, chunk):
            items += fetch_items(dataset, list(range(i, min(n, i + chunk))))
        self.items = items
        self.targets = [int(it[1]) for it in items]

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int):
        return self.items[i] if self.items is not None else self.dataset[i]


@register_task
class CoOpTask(Task):
    name = "coop"
    help = "CoOp: few-shot prompt-context tuning of a frozen open_clip model (coop_<open_clip name>)"
    Config = CoOpConfig
    metric = "acc1"
    default_dataset = "partworld"

    def build(self, args: argparse.Namespace, training: bool) -> TaskParts:
        cfg = self.config_from_args(args)
        ds_kwargs = dict(args.dataset_args or {})
        eval_raw = build_dataset(args.dataset, root=args.data_root, split=cfg.eval_split, **ds_kwargs)
        classes = list(eval_raw.classes)
        model = build_prompt_model(args, cfg, classes)
        eval_set = SeededItems(CachedItems(_limited(eval_raw, cfg.eval_limit)), create_transforms(model, training=False),
                               args.seed)
        train_set = None
        if training:
            train_raw = build_dataset(args.dataset, root=args.data_root, split=cfg.train_split, **ds_kwargs)
            if list(train_raw.classes) != classes:
                raise VisionZooError(f"{args.dataset}: the {cfg.train_split!r} and {cfg.eval_split!r} splits list "
                                     "different classes.")
            if cfg.shots:
                train_raw = few_shot(train_raw, cfg.shots, cfg.few_shot_seed)
            train_set = SeededItems(CachedItems(train_raw), create_transforms(model, training=True), args.seed)
            self.prepare_training(args)
        return TaskParts(model=model, train_set=train_set, eval_set=eval_set)

    def prepare_training(self, args: argparse.Namespace) -> None:
        """Hook for subclasses (SAPT sets its SAM radius here)."""

    _memo: tuple[Tensor, Tensor] | None = None

    def loss(self, model: nn.Module, batch, args: argparse.Namespace) -> dict[str, Tensor]:
        images, target = batch[0], batch[1]
        # The image tower is frozen: encode a batch once, even when SAM evaluates the loss twice.
        if self._memo is None or self._memo[0] is not images:
            with torch.no_grad():
                self._memo = (images, getattr(model, "module", model).encode_image(images))
        logits = model(image_features=self._memo[1])
        return {"loss": F.cross_entropy(logits.float(), target)}

    @torch.no_grad()
    def eval_step(self, model: nn.Module, batch, args: argparse.Namespace) -> dict[str, float]:
        images, target = batch[0], batch[1]
        logits = model(images).float()
        return {"correct1": int((logits.argmax(1) == target).sum()),
                "loss_sum": float(F.cross_entropy(logits, target, reduction="sum")), "count": len(target)}

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        n = max(1.0, sums.get("count", 0.0))
        return {"acc1": 100.0 * sums.get("correct1", 0.0) / n, "loss": sums.get("loss_sum", 0.0) / n,
                "count": int(sums.get("count", 0))}


@register_task
class CoCoOpTask(CoOpTask):
    name = "cocoop"
    help = ("CoCoOp: few-shot tuning of a shared prompt context plus a Meta-Net that shifts it per image, over a "
            "frozen open_clip model (cocoop_<open_clip name>)")
    Config = CoCoOpTrainConfig
    epilog = ("The engine's defaults (AdamW, lr 1e-3) apply unless given. The paper: --opt sgd --lr 0.002\n"
              "--batch-size 1 --epochs 10 --shots 16. Each image encodes its own C class prompts, so a step costs\n"
              "batch-size x C text-encoder passes, forward and backward (CoOp: C). The shipped tiny-CLIP prompt\n"
              "used CoOp's recipe, for a like-for-like comparison:\n"
              "  train.py cocoop --model cocoop_clip_tiny_partworld --dataset-args classes=downstream --shots 16 \\\n"
              "    --epochs 10 --batch-size 32 --opt sgd --lr 0.01 --momentum 0.9 --weight-decay 5e-4 --warmup-epochs 1")

    def build(self, args: argparse.Namespace, training: bool) -> TaskParts:
        parts = super().build(args, training)
        if not isinstance(parts.model, CoCoOpCLIP):
            raise VisionZooError(f"train.py cocoop needs a cocoop_<open_clip name> model (e.g. "
                                 f"cocoop_clip_tiny_partworld), not {args.model}.")
        parts.model.text_chunk = self.config_from_args(args).text_chunk
        return parts


@register_task
class FGATask(CoOpTask):
    name = "fga"
    help = ("FGA: train.py = SAPT (sharpness-aware prompt tuning, --sam-rho); eval.py = STSS and every baseline "
            "(zero-shot, ensemble, CoOp, TPT, Zero and combinations) on the same views")
    Config = FGAConfig
    epilog = ("examples:\n"
              "  train.py fga --model fga_clip_tiny_partworld --sam-rho 0.3 --opt sgd --lr 0.002 --epochs 50\n"
              "  eval.py fga --model fga_clip_tiny_partworld --pretrained runs/sapt/final "
              "--coop-pretrained runs/coop/final --method all --images-per-set 500")

    def prepare_training(self, args: argparse.Namespace) -> None:
        if args.sam_rho <= 0:  # SAPT is SAM on the context; plain training is `train.py coop`
            args.sam_rho = SAPT_RHO
            if not args.quiet:
                print(f"train.py fga: SAPT with --sam-rho {SAPT_RHO} (pass --sam-rho to change it)", flush=True)

    def run_eval(self, args: argparse.Namespace, info, log) -> dict:
        from .evaluate import run_fga_eval
        return run_fga_eval(self, args, info, log)
