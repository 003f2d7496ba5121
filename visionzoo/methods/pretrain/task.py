"""``train.py pretrain`` / ``eval.py pretrain``: the project's tiny backbones on PartWorld.

* timm backbones (``--model vit_tiny_partworld``): supervised classification of PartWorld's
  pretraining classes in the source style; the export is a timm state dict (safetensors).
* open_clip backbones (``--model clip_tiny_partworld``): contrastive image–caption training on the
  same images; the export is an open_clip ``local-dir:`` folder (config + fp16 safetensors).
* ``--objective dino`` (timm ViTs): self-supervised DINO self-distillation with multi-crop and an
  iBOT-style masked-patch term (:mod:`.dino`), no labels used; the export is the EMA teacher
  backbone (timm state dict, no head).
* ``--part-loss-weight W`` (supervised ViTs, default 0 = off): adds a dense auxiliary loss, a
  linear per-patch head predicting each patch's ground-truth PartWorld part (:mod:`.part_sup`).
  This is an ORACLE for part-awareness (it sees the part masks of the pretraining classes), not a
  fair recipe; the export is the timm classifier as for plain supervised training.

``eval.py pretrain`` measures the "before adaptation" rows on the *downstream* classes, per style:
linear-probe accuracy for ViTs, zero-shot accuracy (single prompt and style-phrase ensemble) for CLIP.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import open_clip
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...data import build_dataset
from ...data.partworld_styles import STYLES
from ...engine import fit
from ...engine.data import SeededItems
from ...engine.task import Task, TaskParts, register_task
from ...factory import create_model, create_transforms
from .clip_model import OpenClip, _is_open_clip
from .dino import Dino
from .export import export_backbone
from .multicrop import MultiCrop
from .part_sup import PartMaskItems, PartSupervised, part_loss
from .probe import run_backbone_eval


@dataclass
class PretrainConfig:
    objective: str = field(default="supervised", metadata={
        "choices": ["supervised", "dino"],
        "help": "ViT objective: supervised classification or self-supervised DINO (+ iBOT masked patches); "
                "CLIP models are always contrastive"})
    images_per_class: int = field(default=300, metadata={"help": "PartWorld training images per pretraining class"})
    image_size: int = field(default=64, metadata={"help": "PartWorld image side in pixels"})
    label_smoothing: float = field(default=0.1, metadata={"help": "cross-entropy label smoothing (ViT)"})
    crop_scale: float = field(default=0.6, metadata={"help": "smallest area fraction of the random resized crop"})
    short_caption_prob: float = field(default=0.5, metadata={
        "help": "CLIP: probability of using the bare class prompt instead of the full caption"})
    export: str | None = field(default=None, metadata={
        "help": "also write the backbone here (timm: a .safetensors file; open_clip: a local-dir folder)"})
    export_fp16: bool = field(default=False, metadata={"help": "timm export in fp16 (half the file size)"})
    part_loss_weight: float = field(default=0.0, metadata={
        "help": "supervised ViT: weight of an ORACLE dense loss, a linear head predicting each patch's "
                "ground-truth PartWorld part from the last block's patch tokens (0: off)"})
    part_loss: str = field(default="balanced", metadata={
        "choices": ["balanced", "plain"],
        "help": "part loss: cross-entropy averaged per part label (balanced) or over patches (plain)"})
    dino_local_crops: int = field(default=6, metadata={"help": "dino: local crops per image (besides 2 global)"})
    dino_local_size: int = field(default=32, metadata={"help": "dino: local crop side in pixels"})
    dino_out_dim: int = field(default=1024, metadata={"help": "dino: prototypes of the projection head"})
    dino_teacher_temp: float = field(default=0.04, metadata={"help": "dino: teacher softmax temperature"})
    dino_ema: float = field(default=0.99, metadata={"help": "dino: teacher EMA momentum at step 0 (cosine to 1)"})
    dino_ibot_weight: float = field(default=1.0, metadata={"help": "dino: weight of the masked-patch term (0: off)"})
    probe_images_per_class: int = field(default=40, metadata={"help": "eval: linear-probe training images per class"})
    test_images_per_class: int = field(default=20, metadata={"help": "eval: test images per class and style"})
    eval_styles: list[str] = field(default_factory=lambda: list(STYLES), metadata={"help": "eval: PartWorld styles"})


class CaptionItems(torch.utils.data.Dataset):
    """PartWorld items as ``(image, caption tokens [L], label)`` for contrastive training.

    With probability ``short_prob`` the caption is the bare class prompt ("a photo of a {name}.")
    instead of the full attribute caption: full captions alone can be matched through instance
    details (position, background, size) and leave class names weakly aligned, which is what
    zero-shot classification needs. The draw uses the global RNG, which the engine seeds per item.
    """

    def __init__(self, dataset, tokens: Tensor, class_tokens: Tensor, labels: Tensor, short_prob: float = 0.5):
        self.dataset, self.tokens, self.class_tokens = dataset, tokens, class_tokens
        self.labels, self.short_prob = labels, short_prob

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int):
        image, label = self.dataset[i][:2]
        short = float(torch.rand(())) < self.short_prob
        return image, (self.class_tokens[int(self.labels[i])] if short else self.tokens[i]), label


def _train_transform(model: nn.Module, crop_scale: float, flip: bool):
    from torchvision.transforms import v2 as T
    cfg = model.pretrained_cfg
    ops = [T.ToImage(), T.ToDtype(torch.float32, scale=True),
           T.RandomResizedCrop(tuple(cfg["input_size"][1:]), scale=(crop_scale, 1.0), ratio=(0.85, 1.15),
                               antialias=True)]
    if flip:  # not for CLIP: captions say "on the left/right"
        ops.append(T.RandomHorizontalFlip())
    return T.Compose([*ops, T.Normalize(list(cfg["mean"]), list(cfg["std"]))])


@register_task
class PretrainTask(Task):
    name = "pretrain"
    help = "pretrain a tiny backbone on PartWorld (ViT: supervised; CLIP: contrastive) and export it"
    Config = PretrainConfig
    metric = "acc1"
    default_dataset = "partworld"

    def _data(self, args: argparse.Namespace, cfg: PretrainConfig, split: str, per_class: int):
        kwargs = {"classes": "pretrain", "style": "clean", "image_size": cfg.image_size,
                  "images_per_class": per_class, "in_memory": True, "seed": args.seed, **(args.dataset_args or {})}
        return build_dataset(args.dataset, root=args.data_root, split=split, **kwargs)

    def build(self, args: argparse.Namespace, training: bool) -> TaskParts:
        cfg: PretrainConfig = self.config_from_args(args)
        val_raw = self._data(args, cfg, "val", 20)
        classes = list(val_raw.classes)
        if _is_open_clip(args.model) and cfg.objective != "supervised":
            raise ValueError(f"--objective {cfg.objective} is for timm ViTs; {args.model} trains contrastively")
        if _is_open_clip(args.model) and cfg.part_loss_weight > 0:
            raise ValueError(f"--part-loss-weight is for timm ViTs; {args.model} trains contrastively")
        if _is_open_clip(args.model):
            model = create_model(f"clip_{args.model}", backbone_pretrained=args.pretrained or False,
                                 class_names=classes, **(args.model_args or {}))
        elif cfg.objective == "dino":
            return self._build_dino(args, cfg, val_raw, classes, training)
        else:  # supervised; with --part-loss-weight also the patch -> part head (partsup_)
            family = "partsup" if cfg.part_loss_weight > 0 else "classifier"
            model = create_model(f"{family}_{args.model}", backbone_pretrained=args.pretrained or False,
                                 num_classes=len(classes), class_names=classes, **(args.model_args or {}))
        eval_set = SeededItems(val_raw, create_transforms(model), args.seed)
        train_set = None
        if training:
            raw = self._data(args, cfg, "train", cfg.images_per_class)
            is_clip = isinstance(model, OpenClip)
            if isinstance(model, PartSupervised):  # images and part masks cropped together
                pc = model.pretrained_cfg
                items = PartMaskItems(raw, cfg.image_size, model.net.patch_embed.patch_size[0], pc["mean"],
                                      pc["std"], crop_scale=cfg.crop_scale)
                return TaskParts(model=model, train_set=SeededItems(items, None, args.seed), eval_set=eval_set)
            items = SeededItems(raw, _train_transform(model, cfg.crop_scale, flip=not is_clip), args.seed)
            if is_clip:
                labels = torch.as_tensor([int(t) for t in raw.targets])
                train_set = CaptionItems(items, model.tokenize(raw.captions()),
                                         model.tokenize(raw.class_prompts()), labels, cfg.short_caption_prob)
            else:
                train_set = items
        return TaskParts(model=model, train_set=train_set, eval_set=eval_set)

    def _build_dino(self, args: argparse.Namespace, cfg: PretrainConfig, val_raw, classes: list[str],
                    training: bool) -> TaskParts:
        if cfg.part_loss_weight > 0:
            raise ValueError("--part-loss-weight is for --objective supervised")
        if getattr(args, "sam_rho", 0) > 0:
            raise ValueError("--objective dino does not combine with --sam-rho (the teacher follows each step once)")
        model = create_model(f"dino_{args.model}", backbone_pretrained=args.pretrained or False, class_names=classes,
                             out_dim=cfg.dino_out_dim, teacher_temp=cfg.dino_teacher_temp, ema_momentum=cfg.dino_ema,
                             ibot_weight=cfg.dino_ibot_weight, **(args.model_args or {}))
        eval_set = SeededItems(val_raw, create_transforms(model), args.seed)
        train_set = None
        if training:
            raw = self._data(args, cfg, "train", cfg.images_per_class)
            pc = model.pretrained_cfg
            crops = MultiCrop(pc["mean"], pc["std"], global_size=cfg.image_size, local_size=cfg.dino_local_size,
                              n_local=cfg.dino_local_crops)
            train_set = SeededItems(raw, crops, args.seed)
            model.total_steps = math.ceil(len(raw) / args.batch_size) * args.epochs
        return TaskParts(model=model, train_set=train_set, eval_set=eval_set)

    def loss(self, model: nn.Module, batch, args: argparse.Namespace) -> dict[str, Tensor]:
        core = getattr(model, "module", model)
        if isinstance(core, PartSupervised):
            logits, part_logits = model(batch[0], with_parts=True)  # through the (DDP) wrapper
            cls = F.cross_entropy(logits.float(), batch[1], label_smoothing=args.label_smoothing)
            part = part_loss(part_logits, batch[2], balanced=args.part_loss == "balanced")
            part_acc = (part_logits.argmax(1) == batch[2]).float().mean()
            return {"loss": cls + args.part_loss_weight * part, "cls": cls.detach(), "part": part.detach(),
                    "part_acc": part_acc}
        if isinstance(core, Dino):
            # the teacher takes the student's weights after the previous optimizer step
            momentum = core.update_teacher()
            out = model(batch[0])  # the crops -> losses, through the (DDP) wrapper
            return {**out, "ema": torch.tensor(momentum)}
        if isinstance(core, OpenClip):
            images, tokens = batch[0], batch[1]
            img, txt, scale = model(images, tokens)
            loss = _clip_loss(img, txt, scale)
            return {"loss": loss, "logit_scale": scale.detach()}
        logits = model(batch[0])
        return {"loss": F.cross_entropy(logits.float(), batch[1], label_smoothing=args.label_smoothing)}

    @torch.no_grad()
    def eval_step(self, model: nn.Module, batch, args: argparse.Namespace) -> dict[str, float]:
        images, target = batch[0], batch[1]
        if isinstance(model, Dino):
            return _batch_knn(model(images), target)
        if isinstance(model, OpenClip):
            prompts = [[f"a photo of a {n}."] for n in model.class_names]
            text = model.class_text_features(prompts)
            logits = model.net.encode_image(images, normalize=True) @ text.T
        else:
            logits = model(images)
        return {"correct": float((logits.argmax(1) == target).sum()), "count": float(len(target))}

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        return {"acc1": 100.0 * sums.get("correct", 0.0) / max(1.0, sums.get("count", 0.0)),
                "count": int(sums.get("count", 0))}

    def run_train(self, args: argparse.Namespace) -> dict[str, Any]:
        results = fit(self, args)
        if results.get("final"):
            out = Path(args.output_dir)
            targets = [out / "backbone"] + ([Path(args.export)] if args.export else [])
            for target in targets:
                dtype = torch.float16 if args.export_fp16 else None
                results.setdefault("exported", []).append(str(export_backbone(results["final"], target, dtype)))
            (out / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
            print(f"exported: {', '.join(results['exported'])}", flush=True)
        return results

    def run_eval(self, args: argparse.Namespace, info, log) -> dict[str, Any]:
        return run_backbone_eval(self.config_from_args(args), args, log)


def _batch_knn(feats: Tensor, target: Tensor) -> dict[str, float]:
    """Leave-one-out 1-nearest-neighbour (cosine) accuracy of features ``[B, D]`` within one batch.

    The DINO objective has no classifier; this cheap proxy (reported as ``acc1``) picks the best
    checkpoint. The eval batches follow the dataset order, so only few classes share a batch.
    """
    f = F.normalize(feats.float(), dim=1)
    sim = f @ f.T
    sim.fill_diagonal_(-2.0)
    pred = target[sim.argmax(1)]
    n = len(target) if len(target) > 1 else 0
    return {"correct": float((pred == target).sum()) if n else 0.0, "count": float(n)}


def _clip_loss(img: Tensor, txt: Tensor, scale: Tensor) -> Tensor:
    """Symmetric InfoNCE (open_clip's ClipLoss, gathering features over DDP ranks when there are several)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        loss_fn = open_clip.ClipLoss(gather_with_grad=True, rank=torch.distributed.get_rank(),
                                     world_size=torch.distributed.get_world_size())
    else:
        loss_fn = open_clip.ClipLoss()
    return loss_fn(img.float(), txt.float(), scale.float())
