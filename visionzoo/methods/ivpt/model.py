"""``ivpt_<timm vit>``: interpretable visual prompt tuning with cross-layer concept prototypes.

Per prompted block (the last ``L`` blocks of a frozen timm ViT), with the block's input tokens:

1. ``e = LN_final(x.detach())`` on the patch tokens -> [B, D, H, W] (the backbone's final norm);
2. prototype maps ``A = softmax_k(-||e - q_k||^2 + b_k)`` -> [B, n, H, W];
3. region features of each prototype (``onehot(argmax A) * A``-weighted mean of ``e``, A detached);
4. grouping ``G`` of the ``n - 1`` foreground prototypes into the ``K`` final parts;
5. ``K`` prompts ``p_k`` = G-weighted mean of the region features -> LayerNorm -> Linear, appended
   to the block input and removed after it;
6. grouped maps ``sum_p G[p, k] A_p`` (+ background), used by the consistency loss.

Head: final maps from the last stage on the last block's output, part features, LayerNorm over
[D, K + 1] ("modulation"), one bias-free linear classifier per part feature, logits = mean over
the K foreground parts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import timm
import torch
from torch import Tensor, nn

from ...backbones import preprocessing_from_timm
from ...registry import register_family
from .backbone import (
    FrozenViTMixin,
    build_frozen_vit,
    embed,
    final_norm,
    grid_of,
    patch_grid,
    wrap_last_blocks,
)
from .config import IVPTConfig
from .prototypes import (
    Grouping,
    PromptProjector,
    PrototypeStage,
    group_maps,
    kmeans_prototypes,
    region_features,
)


@dataclass
class IVPTOutput:
    """Everything one forward pass computes.

    ``stage_maps[i]`` [B, n_i, H, W] for every stage (prompted layers, then final);
    ``grouped_maps[i]`` [B, K + 1, H, W] and ``groupings[i]`` [B, n_i - 1, K] for each prompted layer;
    ``part_features`` [B, D, K + 1] after modulation; ``part_logits`` [B, K, C]; ``logits`` [B, C].
    """

    logits: Tensor
    part_logits: Tensor
    part_features: Tensor
    stage_maps: list[Tensor] = field(default_factory=list)
    grouped_maps: list[Tensor] = field(default_factory=list)
    groupings: list[Tensor] = field(default_factory=list)

    @property
    def final_maps(self) -> Tensor:
        """[B, K + 1, H, W]: the final part maps (background last)."""
        return self.stage_maps[-1]


class IVPT(FrozenViTMixin, nn.Module):
    """IVPT on a frozen timm ViT. ``forward(images)`` -> logits [B, C]; ``forward(images, True)`` ->
    :class:`IVPTOutput`."""

    def __init__(self, backbone: str, num_classes: int = 200, backbone_pretrained: bool | str | os.PathLike = False,
                 class_names: list[str] | None = None, n_pro: list[int] | None = None, gumbel: bool = True,
                 gumbel_tau: float = 1.0, prototype_init_std: float = 0.05, tune_embeddings: bool = False,
                 center_features: bool = False, **timm_kwargs: Any):
        super().__init__()
        self.config = IVPTConfig(n_pro=[int(n) for n in (n_pro or IVPTConfig().n_pro)], gumbel=gumbel,
                                 gumbel_tau=gumbel_tau, prototype_init_std=prototype_init_std,
                                 tune_embeddings=tune_embeddings, center_features=center_features)
        self.config.validate()
        cfg = self.config
        self.backbone, source = build_frozen_vit(backbone, backbone_pretrained, cfg.prompted_layers, **timm_kwargs)
        self.prompted_idx = wrap_last_blocks(self.backbone, cfg.prompted_layers)
        self.grid = grid_of(self.backbone)
        self.num_prefix = int(self.backbone.num_prefix_tokens)
        dim, k = int(self.backbone.embed_dim), cfg.num_parts
        self.num_classes, self.num_parts = int(num_classes), k

        self.stages = nn.ModuleList(PrototypeStage(n, dim, self.grid, cfg.prototype_init_std) for n in cfg.n_pro)
        self.groupings = nn.ModuleList(Grouping(dim, k, cfg.gumbel_tau, cfg.gumbel) for _ in cfg.n_pro[:-1])
        self.prompt_projectors = nn.ModuleList(PromptProjector(dim, k) for _ in cfg.n_pro[:-1])
        self.modulation = nn.LayerNorm([dim, k + 1])
        self.classifier = nn.Linear(dim, self.num_classes, bias=False)
        nn.init.trunc_normal_(self.classifier.weight, std=0.02)
        if cfg.tune_embeddings:
            for name in ("cls_token", "reg_token", "pos_embed"):
                p = getattr(self.backbone, name, None)
                if isinstance(p, nn.Parameter):
                    p.requires_grad_(True)

        self.base_weights_source = source
        self.backbone_info = {"name": backbone, "source": source, "timm_kwargs": timm_kwargs}
        self.pretrained_cfg = preprocessing_from_timm(self.backbone)
        self.class_names = class_names

    # ------------------------------------------------------------------ pieces
    def _features(self, tokens: Tensor) -> Tensor:
        """Normalised patch features [B, D, H, W] of tokens [B, N, D]."""
        return patch_grid(final_norm(self.backbone)(tokens), self.num_prefix, self.grid)

    def _for_maps(self, e: Tensor) -> Tensor:
        """Features the prototypes compare with: ``e`` or, with ``center_features``, ``e`` minus its
        per-image mean over the grid (removes the component every patch shares)."""
        return e - e.mean(dim=(2, 3), keepdim=True) if self.config.center_features else e

    def _frozen_prefix(self, images: Tensor) -> Tensor:
        """Tokens entering the first prompted block; no graph when nothing before it is trained."""
        needs_grad = self.config.tune_embeddings and torch.is_grad_enabled()
        with torch.set_grad_enabled(needs_grad):
            x = embed(self.backbone, images)
            for blk in self.backbone.blocks[:self.prompted_idx[0]]:
                x = blk(x)
        return x

    # ------------------------------------------------------------------ forward
    def forward(self, images: Tensor, return_all: bool = False) -> Tensor | IVPTOutput:
        """``images`` [B, 3, H, W] normalised -> logits [B, C] (or :class:`IVPTOutput`)."""
        x = self._frozen_prefix(images)
        stage_maps, grouped, groupings = [], [], []
        for j, i in enumerate(self.prompted_idx):
            e = self._features(x.detach())
            maps = self.stages[j](self._for_maps(e))
            feats, counts = region_features(maps.detach(), e)
            g = self.groupings[j](feats[:, :-1], counts[:, :-1])
            prompts = self.prompt_projectors[j](feats[:, :-1], g)
            stage_maps.append(maps)
            groupings.append(g)
            grouped.append(group_maps(maps, g))
            x = self.backbone.blocks[i](x, prompts)

        e_last = self._features(x)
        final = self.stages[-1](self._for_maps(e_last.detach()))
        stage_maps.append(final)
        part_feats, _ = region_features(final, e_last)  # gradients reach the maps and the prompts
        modulated = self.modulation(part_feats.transpose(1, 2))  # [B, D, K + 1]
        part_logits = self.classifier(modulated[..., :-1].transpose(1, 2))  # [B, K, C]
        logits = part_logits.mean(dim=1)
        if not return_all:
            return logits
        return IVPTOutput(logits=logits, part_logits=part_logits, part_features=modulated,
                          stage_maps=stage_maps, grouped_maps=grouped, groupings=groupings)

    @torch.no_grad()
    def init_prototypes_from_data(self, images: Tensor, iters: int = 20, seed: int = 0) -> None:
        """Set every stage's prototypes to k-means centroids of the features it sees on ``images``
        [B, 3, H, W] (normalised), background last (:func:`kmeans_prototypes`); spatial biases stay 0.

        Stages are initialised in order, each block run with the prompts the freshly initialised
        stage makes, so later stages see the tokens they will see in training.
        """
        gen = torch.Generator().manual_seed(seed)
        was = self.training
        self.eval()
        x = self._frozen_prefix(images)
        for j, i in enumerate(self.prompted_idx):
            e = self._features(x)
            stage = self.stages[j]
            stage.prototypes.copy_(kmeans_prototypes(self._for_maps(e).cpu(), len(stage.prototypes), iters, gen))
            maps = stage(self._for_maps(e))
            feats, counts = region_features(maps, e)
            prompts = self.prompt_projectors[j](feats[:, :-1], self.groupings[j](feats[:, :-1], counts[:, :-1]))
            x = self.backbone.blocks[i](x, prompts)
        stage = self.stages[-1]
        stage.prototypes.copy_(kmeans_prototypes(self._for_maps(self._features(x)).cpu(), len(stage.prototypes),
                                                 iters, gen))
        self.train(was)

    @torch.no_grad()
    def prototype_maps(self, images: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """Logits [B, C] and the foreground maps of every stage: ``{"stage0": [B, n_0 - 1, H, W], ...,
        "parts": [B, K, H, W]}`` (what the interpretability metrics and figures read)."""
        out = self(images, return_all=True)
        maps = {f"stage{i}": m[:, :-1] for i, m in enumerate(out.stage_maps[:-1])}
        maps["parts"] = out.final_maps[:, :-1]
        return out.logits, maps

    def param_groups_by_role(self) -> dict[str, list[nn.Parameter]]:
        """Trainable parameters by role: ``prototypes`` (prototypes, spatial biases, tuned embeddings)
        and ``head`` (prompt projections, grouping, modulation, classifier)."""
        protos = [p for s in self.stages for p in s.parameters()]
        protos += [p for p in self.backbone.parameters() if p.requires_grad]
        proto_ids = {id(p) for p in protos}
        head = [p for p in self.parameters() if p.requires_grad and id(p) not in proto_ids]
        return {"prototypes": protos, "head": head}

    def extra_repr(self) -> str:
        return f"n_pro={self.config.n_pro}, prompted_blocks={self.prompted_idx}, grid={self.grid}"


IVPT_DEFAULT_BACKBONES = ["vit_tiny_partworld", "vit_base_patch14_reg4_dinov2", "vit_small_patch14_reg4_dinov2",
                          "deit_small_patch16_224", "vit_base_patch16_clip_224"]


@register_family("ivpt", default_backbones=IVPT_DEFAULT_BACKBONES, backbone_check=lambda n: timm.is_model(n))
def ivpt(backbone: str, **kwargs: Any) -> IVPT:
    """IVPT on ``backbone`` (any timm ViT); kwargs: :class:`IVPT` arguments and timm kwargs."""
    return IVPT(backbone, **kwargs)


__all__ = ["IVPT", "IVPTOutput", "IVPTConfig"]
