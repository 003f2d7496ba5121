"""DINO-style self-distillation for timm ViTs, with an optional iBOT-style masked-patch term.

``dino_<timm name>`` (e.g. ``dino_vit_tiny_partworld``) holds a student and an EMA teacher (same
backbone + projection head). ``net`` is the *teacher* backbone: it is what ``export_backbone``
writes (as in DINO, the teacher is the better encoder). Used by ``train.py pretrain --objective dino``.

Loss per batch (views: 2 global crops, ``n`` local crops):

* image level (DINO): cross-entropy between the teacher's centred, sharpened distribution of each
  global view and the student's distribution of every *other* view;
* patch level (iBOT, ``ibot_weight > 0``): the student sees its global views with some patch
  tokens replaced by a learned mask token and must predict, at the masked positions, the teacher's
  centred, sharpened distribution of the unmasked patch.

Centres (one for the class token, one for patch tokens) are running means of the teacher outputs;
the teacher follows the student by EMA with a momentum rising from ``ema_momentum`` to 1 (cosine).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...backbones import create_timm_backbone, preprocessing_from_timm
from ...registry import register_family


class DinoHead(nn.Module):
    """MLP ``D -> hidden -> hidden -> bottleneck``, L2-normalised, then cosine prototypes ``-> out_dim``.

    ``x`` ``[..., D]`` -> logits ``[..., out_dim]`` in [-1, 1] (unit-norm prototype rows, as DINO's
    weight-normalised last layer with its gain frozen at 1).
    """

    def __init__(self, dim: int, out_dim: int = 1024, hidden: int = 256, bottleneck: int = 64):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                                 nn.Linear(hidden, bottleneck))
        self.prototypes = nn.Parameter(torch.randn(out_dim, bottleneck) * 0.02)

    def forward(self, x: Tensor) -> Tensor:
        z = F.normalize(self.mlp(x), dim=-1)
        return F.linear(z, F.normalize(self.prototypes, dim=-1))


def _encode(net: nn.Module, x: Tensor, mask: Tensor | None = None, mask_token: Tensor | None = None) -> Tensor:
    """Tokens after the final norm ``[B, prefix + N, D]`` of a timm ViT built with ``dynamic_img_size``.

    ``mask`` ``[B, h, w]`` bool: those patch embeddings are replaced by ``mask_token`` ``[D]``
    before the position embedding (as iBOT), so the student must infer them from context.
    """
    t = net.patch_embed(x)  # [B, h, w, D] (dynamic_img_size keeps the grid)
    if mask is not None:
        t = torch.where(mask[..., None], mask_token.to(t.dtype), t)
    t = net.norm_pre(net.patch_drop(net._pos_embed(t)))
    return net.norm(net.blocks(t))


def _cross_entropy(teacher_probs: Tensor, student_logits: Tensor, temp: float) -> Tensor:
    """Mean over rows of ``-sum p_t log softmax(s / temp)``; rows ``[..., K]``."""
    return -(teacher_probs * F.log_softmax(student_logits / temp, dim=-1)).sum(-1).mean()


class Dino(nn.Module):
    """Student/teacher pair over one timm ViT architecture.

    Args:
        backbone: timm ViT name (class token required).
        out_dim: prototypes of the projection head (shared by class and patch tokens).
        student_temp / teacher_temp: softmax temperatures (teacher sharpening).
        center_momentum: running-mean momentum of the centres.
        ema_momentum: teacher EMA momentum at step 0 (rises to 1 by ``total_steps``, cosine).
        ibot_weight: weight of the masked-patch term (0 turns masking off).
        mask_ratio: (min, max) fraction of patches masked in a masked global view; half of the
            global views are masked.
    """

    def __init__(self, backbone: str, backbone_pretrained: bool | str = False, out_dim: int = 1024,
                 student_temp: float = 0.1, teacher_temp: float = 0.04, center_momentum: float = 0.9,
                 ema_momentum: float = 0.99, ibot_weight: float = 1.0, mask_ratio: tuple[float, float] = (0.1, 0.5),
                 class_names: list[str] | None = None, **timm_kwargs: Any):
        super().__init__()
        timm_kwargs = {**timm_kwargs, "num_classes": 0, "dynamic_img_size": True}
        self.student, source = create_timm_backbone(backbone, backbone_pretrained, **timm_kwargs)
        if getattr(self.student, "cls_token", None) is None:
            raise ValueError(f"dino needs a ViT with a class token; {backbone} has none")
        dim = self.student.embed_dim
        self.student_head = DinoHead(dim, out_dim)
        self.net = copy.deepcopy(self.student)  # the teacher backbone (exported)
        self.teacher_head = copy.deepcopy(self.student_head)
        for p in (*self.net.parameters(), *self.teacher_head.parameters()):
            p.requires_grad_(False)
        self.mask_token = nn.Parameter(torch.zeros(dim))
        nn.init.normal_(self.mask_token, std=0.02)
        self.register_buffer("center", torch.zeros(out_dim))
        self.register_buffer("patch_center", torch.zeros(out_dim))
        self.register_buffer("ema_steps", torch.zeros((), dtype=torch.long))
        self.student_temp, self.teacher_temp, self.center_momentum = student_temp, teacher_temp, center_momentum
        self.ema_momentum, self.ibot_weight, self.mask_ratio = ema_momentum, ibot_weight, tuple(mask_ratio)
        self.total_steps = 0  # set by the task (0: constant momentum)
        self.base_weights_source = None  # everything is trained: checkpoints hold the full state
        self.backbone_info = {"name": backbone, "source": source, "timm_kwargs": timm_kwargs}
        self.pretrained_cfg = preprocessing_from_timm(self.student)
        self.class_names = class_names

    def train(self, mode: bool = True) -> Dino:
        super().train(mode)
        self.net.eval()  # the teacher never runs in training mode (no dropout / drop-path)
        self.teacher_head.eval()
        return self

    def forward(self, x: Tensor | list[Tensor]) -> Tensor | dict[str, Tensor]:
        """A batch of images ``[B, 3, H, W]`` -> teacher class-token features ``[B, D]``; a list of crops
        (global first) -> the training losses of :meth:`loss`. Training goes through ``forward`` so that a
        DDP wrapper sees it and synchronises the gradients."""
        if isinstance(x, (list, tuple)):
            return self.loss(list(x))
        return self.net(x)

    def momentum(self) -> float:
        """EMA momentum at the current step (cosine from ``ema_momentum`` to 1 over ``total_steps``)."""
        if self.total_steps <= 0:
            return self.ema_momentum
        t = min(1.0, float(self.ema_steps) / self.total_steps)
        return 1.0 - (1.0 - self.ema_momentum) * (math.cos(math.pi * t) + 1) / 2

    @torch.no_grad()
    def update_teacher(self) -> float:
        """``teacher = m * teacher + (1 - m) * student``; returns ``m`` and advances the step count."""
        m = self.momentum()
        for src, dst in ((self.student, self.net), (self.student_head, self.teacher_head)):
            for ps, pt in zip(src.parameters(), dst.parameters(), strict=True):
                pt.mul_(m).add_(ps.detach(), alpha=1 - m)
        self.ema_steps += 1
        return m

    def random_masks(self, n: int, h: int, w: int, device: torch.device) -> Tensor:
        """``[n, h, w]`` bool; every second image unmasked, the others mask a random fraction in ``mask_ratio``."""
        lo, hi = self.mask_ratio
        ratio = lo + (hi - lo) * torch.rand(n, 1, device=device)
        ratio[1::2] = 0.0
        scores = torch.rand(n, h * w, device=device)
        k = (ratio * h * w).round().long()
        ranks = scores.argsort(1).argsort(1)
        return (ranks < k).view(n, h, w)

    def loss(self, views: list[Tensor]) -> dict[str, Tensor]:
        """``views``: 2 global crops ``[B, 3, G, G]`` then local crops ``[B, 3, L, L]``; returns loss terms."""
        globals_, locals_ = views[:2], views[2:]
        b = globals_[0].shape[0]
        g = torch.cat(globals_)
        ps = self.student.patch_embed.patch_size
        h, w = g.shape[-2] // ps[0], g.shape[-1] // ps[1]
        with torch.no_grad():
            t_tok = _encode(self.net, g)
            t_cls = self.teacher_head(t_tok[:, 0]).float()
            t_patch = self.teacher_head(t_tok[:, self.net.num_prefix_tokens:]).float() if self.ibot_weight > 0 else None
            p_cls = F.softmax((t_cls - self.center) / self.teacher_temp, dim=-1).chunk(2)
        mask = self.random_masks(2 * b, h, w, g.device) if self.ibot_weight > 0 else None
        s_tok = _encode(self.student, g, mask, self.mask_token)
        s_cls = self.student_head(s_tok[:, 0]).float().chunk(2)
        s_local = [self.student_head(_encode(self.student, v)[:, 0]).float() for v in locals_]
        terms = []
        for i, p in enumerate(p_cls):
            for j, s in enumerate([*s_cls, *s_local]):
                if j != i:
                    terms.append(_cross_entropy(p, s, self.student_temp))
        out = {"dino": torch.stack(terms).mean()}
        loss = out["dino"]
        if t_patch is not None:
            flat = mask.flatten(1)
            s_patch = self.student_head(s_tok[:, self.student.num_prefix_tokens:][flat]).float()
            with torch.no_grad():
                p_patch = F.softmax((t_patch[flat] - self.patch_center) / self.teacher_temp, dim=-1)
            out["ibot"] = _cross_entropy(p_patch, s_patch, self.student_temp) if flat.any() else s_cls[0].sum() * 0
            loss = loss + self.ibot_weight * out["ibot"]
        self.update_centers(t_cls, t_patch)
        out["loss"] = loss
        return out

    @torch.no_grad()
    def update_centers(self, t_cls: Tensor, t_patch: Tensor | None) -> None:
        """Running means of the teacher outputs (class token ``[N, K]``, patch tokens ``[N, P, K]``)."""
        m = self.center_momentum
        self.center.mul_(m).add_(t_cls.mean(0), alpha=1 - m)
        if t_patch is not None:
            self.patch_center.mul_(m).add_(t_patch.flatten(0, 1).mean(0), alpha=1 - m)


@register_family("dino", default_backbones=["vit_tiny_partworld"],
                 backbone_check=lambda name: __import__("timm").is_model(name))
def dino(backbone: str, **kwargs: Any) -> Dino:
    return Dino(backbone, **kwargs)
