"""``vpt_deep_<timm vit>``: the VPT-Deep baseline (Jia et al., 2022) on the same frozen ViTs as IVPT.

``P`` learned prompt tokens are appended at each prompted block (fresh ones per block, removed
after it); a linear head reads the backbone's own pooled feature (class token, or the mean of the
patch tokens for ViTs without one).

For the interpretability metrics VPT-Deep has no prototypes; as in the IVPT paper's comparison
its "prototype" maps are the attention of each prompt token to the patch tokens (mean over
heads) in a prompted block: :meth:`VPTDeep.prototype_maps`.
"""

from __future__ import annotations

import math
import os
from typing import Any

import timm
import torch
from torch import Tensor, nn

from ...backbones import preprocessing_from_timm
from ...registry import register_family
from .backbone import FrozenViTMixin, build_frozen_vit, embed, grid_of, record_attention, wrap_last_blocks
from .config import VPTConfig


class VPTDeep(FrozenViTMixin, nn.Module):
    """VPT-Deep on a frozen timm ViT. ``forward(images)`` -> logits [B, C]."""

    def __init__(self, backbone: str, num_classes: int = 200, backbone_pretrained: bool | str | os.PathLike = False,
                 class_names: list[str] | None = None, num_prompts: int = 10, prompt_layers: int = 0,
                 prompt_dropout: float = 0.0, **timm_kwargs: Any):
        super().__init__()
        self.config = VPTConfig(num_prompts=int(num_prompts), prompt_layers=int(prompt_layers),
                                prompt_dropout=float(prompt_dropout))
        self.config.validate()
        depth = timm_kwargs.get("depth")
        layers = self.config.prompt_layers or (depth if depth else _depth_of(backbone, timm_kwargs))
        self.backbone, source = build_frozen_vit(backbone, backbone_pretrained, layers, **timm_kwargs)
        self.prompted_idx = wrap_last_blocks(self.backbone, layers)
        self.grid = grid_of(self.backbone)
        self.num_prefix = int(self.backbone.num_prefix_tokens)
        dim = int(self.backbone.embed_dim)
        self.num_classes = int(num_classes)

        patch = self.backbone.patch_embed.patch_size
        bound = math.sqrt(6.0 / float(3 * patch[0] * patch[1] + dim))  # VPT's uniform init
        self.prompts = nn.Parameter(torch.empty(layers, self.config.num_prompts, dim).uniform_(-bound, bound))
        self.prompt_dropout = nn.Dropout(self.config.prompt_dropout)
        self.head = nn.Linear(dim, self.num_classes)
        nn.init.trunc_normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)

        self.base_weights_source = source
        self.backbone_info = {"name": backbone, "source": source, "timm_kwargs": timm_kwargs}
        self.pretrained_cfg = preprocessing_from_timm(self.backbone)
        self.class_names = class_names

    def _tokens(self, images: Tensor) -> Tensor:
        """Output tokens of the last block [B, N, D] (prompts removed)."""
        with torch.set_grad_enabled(False):
            x = embed(self.backbone, images)
            for blk in self.backbone.blocks[:self.prompted_idx[0]]:
                x = blk(x)
        b = x.shape[0]
        for j, i in enumerate(self.prompted_idx):
            x = self.backbone.blocks[i](x, self.prompt_dropout(self.prompts[j]).expand(b, -1, -1))
        return x

    def forward(self, images: Tensor) -> Tensor:
        """``images`` [B, 3, H, W] normalised -> logits [B, C]."""
        x = self.backbone.norm(self._tokens(images))
        return self.head(self.backbone.forward_head(x, pre_logits=True))

    @torch.no_grad()
    def prototype_maps(self, images: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """Logits [B, C] and, per prompted block ``i``, ``{"layer<i>": [B, P, H, W]}``: the attention of
        each prompt token to the patch tokens, averaged over heads."""
        blocks = [self.backbone.blocks[i].block for i in self.prompted_idx]
        p, (h, w) = self.config.num_prompts, self.grid
        with record_attention(blocks, rows=p) as attn:
            logits = self(images)
        maps = {}
        for i, a in zip(self.prompted_idx, attn, strict=True):
            patches = a.mean(dim=1)[..., self.num_prefix:self.num_prefix + h * w]  # [B, P, HW]
            maps[f"layer{i}"] = patches.reshape(a.shape[0], p, h, w)
        return logits, maps

    def param_groups_by_role(self) -> dict[str, list[nn.Parameter]]:
        """``prototypes``: the prompts; ``head``: the classifier."""
        return {"prototypes": [self.prompts], "head": list(self.head.parameters())}

    def extra_repr(self) -> str:
        return f"num_prompts={self.config.num_prompts}, prompted_blocks={self.prompted_idx}"


def _depth_of(backbone: str, timm_kwargs: dict[str, Any]) -> int:
    kw = {k: v for k, v in timm_kwargs.items() if k != "dynamic_img_size"}
    with torch.device("meta"):
        probe = timm.create_model(backbone, pretrained=False, num_classes=0, **kw)
    blocks = getattr(probe, "blocks", None)
    return len(blocks) if blocks is not None else 1  # a non-ViT fails the ViT check next, with a clear error


@register_family("vpt_deep", default_backbones=["vit_tiny_partworld", "vit_base_patch14_reg4_dinov2",
                                                 "deit_small_patch16_224"],
                 backbone_check=lambda n: timm.is_model(n))
def vpt_deep(backbone: str, **kwargs: Any) -> VPTDeep:
    """VPT-Deep on ``backbone`` (any timm ViT); kwargs: :class:`VPTDeep` arguments and timm kwargs."""
    return VPTDeep(backbone, **kwargs)
