"""Part-supervised pretraining (an ORACLE for part-awareness): class loss + a dense patch -> part loss.

``partsup_<timm ViT>`` (e.g. ``partsup_vit_tiny_partworld``) is the supervised classifier plus a
linear per-patch head that predicts, from the last block's (final-normed) patch tokens, the
ground-truth PartWorld part of each patch (5 part slots + background). It sees the part masks of
the *pretraining* classes, which no real backbone has: it tests whether a backbone with part-aware
patch features lets IVPT beat VPT-Deep, it is not a fair pretraining recipe.
Used by ``train.py pretrain --objective supervised --part-loss-weight W`` (W > 0).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchvision import tv_tensors
from torchvision.transforms import v2

from ...data.partworld import PART_SLOTS
from ...registry import register_family
from ..classify.model import Classifier

NUM_PART_LABELS = len(PART_SLOTS) + 1  # 5 part slots + background (last)
BACKGROUND = len(PART_SLOTS)
_LEFT, _RIGHT = PART_SLOTS.index("left limb"), PART_SLOTS.index("right limb")


class PartSupervised(Classifier):
    """A timm ViT classifier with a linear patch-part head (``D -> 6``) on its final-normed patch tokens."""

    def __init__(self, backbone: str, num_classes: int = 60, **kwargs: Any):
        super().__init__(backbone, num_classes=num_classes, **kwargs)
        if not hasattr(self.net, "num_prefix_tokens") or not hasattr(self.net, "patch_embed"):
            raise ValueError(f"partsup_* needs a timm ViT (patch tokens), got {backbone}")
        self.part_head = nn.Linear(self.net.num_features, NUM_PART_LABELS)

    def forward(self, x: Tensor, with_parts: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Class logits ``[B, C]``, or with ``with_parts`` also the part logits (training calls this through
        ``forward`` so that a DDP wrapper synchronises the gradients)."""
        return self.forward_with_parts(x) if with_parts else super().forward(x)

    def forward_with_parts(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``x`` [B, 3, H, W] -> class logits [B, C] and part logits [B, 6, H/p, W/p]."""
        tokens = self.net.forward_features(x)  # [B, prefix + h*w, D], after the final norm
        logits = self.net.forward_head(tokens)
        patches = tokens[:, self.net.num_prefix_tokens:]
        h, w = (s // p for s, p in zip(x.shape[-2:], self.net.patch_embed.patch_size, strict=True))
        part = self.part_head(patches).transpose(1, 2).reshape(len(x), NUM_PART_LABELS, h, w)
        return logits, part


def part_loss(logits: Tensor, target: Tensor, balanced: bool = True) -> Tensor:
    """Cross-entropy of part logits ``[B, 6, h, w]`` vs patch labels ``[B, h, w]``.

    ``balanced``: the mean over the labels present in the batch of each label's mean loss. Background
    and body own most patches; plain cross-entropy then never learns limbs and tail (rarely the
    majority of a patch), which is the part signal this oracle is meant to inject.
    """
    per_patch = F.cross_entropy(logits.float(), target, reduction="none").reshape(-1)
    if not balanced:
        return per_patch.mean()
    t = target.reshape(-1)
    sums = torch.zeros(NUM_PART_LABELS, device=t.device).index_add_(0, t, per_patch)
    counts = torch.bincount(t, minlength=NUM_PART_LABELS).float()
    present = counts > 0
    return (sums[present] / counts[present]).mean()


def patch_part_labels(label_map: Tensor, patch: int) -> Tensor:
    """Pixel labels ``[..., H, W]`` (0..4 parts, 5 background) -> patch labels ``[..., H/p, W/p]`` long.

    A patch is background unless parts cover at least half of its pixels; then it takes the part
    covering most of them (the rule of ``benchmarks/ivpt_part_awareness.py``).
    """
    onehot = F.one_hot(label_map.long(), NUM_PART_LABELS).movedim(-1, -3).float()  # [..., 6, H, W]
    lead = onehot.shape[:-3]
    frac = F.avg_pool2d(onehot.reshape(-1, *onehot.shape[-3:]), patch)
    part_frac, part = frac[:, :BACKGROUND].max(1)
    fg = frac[:, :BACKGROUND].sum(1) >= 0.5
    out = torch.where(fg, part, torch.full_like(part, BACKGROUND))
    return out.reshape(*lead, *out.shape[-2:])


def pixel_label_map(part_masks: Tensor) -> Tensor:
    """Disjoint part masks ``[..., 5, H, W]`` bool -> uint8 labels ``[..., H, W]`` (5 where no part)."""
    weights = torch.arange(1, len(PART_SLOTS) + 1).view(-1, 1, 1)
    code = (part_masks.long() * weights).sum(-3)  # 0 = no part, p + 1 = part p
    return torch.where(code > 0, code - 1, torch.full_like(code, BACKGROUND)).to(torch.uint8)


class PartMaskItems(torch.utils.data.Dataset):
    """PartWorld items as ``(image [3, S, S] normalised, label, patch part labels [S/p, S/p] long)``.

    Renders images and part masks once (uint8, in memory). Training augmentation: a random resized
    crop applied jointly to image and mask, then a horizontal flip that also swaps the left/right
    limb labels (PartWorld's "left limb" is the one on the image's left, as in the eval images).
    Draws use the global RNG, which :class:`~visionzoo.engine.data.SeededItems` seeds per item.
    """

    def __init__(self, dataset, size: int, patch: int, mean, std, crop_scale: float = 0.6, chunk: int = 256):
        n = len(dataset)
        self.labels = torch.as_tensor(dataset.targets)
        images, maps = [], []
        for lo in range(0, n, chunk):
            batch = dataset.generate_batch(list(range(lo, min(n, lo + chunk))), meta=True)
            images.append(batch["image"])
            maps.append(pixel_label_map(batch["part_masks"]))
        self.images, self.maps = torch.cat(images), torch.cat(maps)
        self.patch = patch
        self.crop = v2.RandomResizedCrop((size, size), scale=(crop_scale, 1.0), ratio=(0.85, 1.15), antialias=True)
        self.norm = v2.Normalize(list(mean), list(std))

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[Tensor, int, Tensor]:
        image = tv_tensors.Image(self.images[i].float().div(255.0))
        label_map = tv_tensors.Mask(self.maps[i])
        image, label_map = self.crop(image, label_map)  # nearest-neighbour for the mask
        image, label_map = image.as_subclass(Tensor), label_map.as_subclass(Tensor)
        if float(torch.rand(())) < 0.5:
            image, label_map = image.flip(-1), label_map.flip(-1).clone()
            left, right = label_map == _LEFT, label_map == _RIGHT
            label_map[left], label_map[right] = _RIGHT, _LEFT
        return self.norm(image), int(self.labels[i]), patch_part_labels(label_map, self.patch)


@register_family("partsup", default_backbones=["vit_tiny_partworld"],
                 backbone_check=lambda name: __import__("timm").is_model(name))
def partsup(backbone: str, **kwargs: Any) -> PartSupervised:
    return PartSupervised(backbone, **kwargs)
