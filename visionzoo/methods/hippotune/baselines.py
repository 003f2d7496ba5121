"""Baselines of the class-incremental harness, on the same frozen timm ViT as HippoTune.

* ``simplecil_<vit>``: SimpleCIL (Zhou et al., 2023): class-mean prototypes of the frozen features,
  cosine classifier, no training.
* ``seqhead_<vit>``: a linear head trained task after task on frozen features (the lower bound;
  with ``--model`` of this family the ``joint`` task gives the joint linear probe).
* ``l2p_<vit>``: Learning to Prompt (Wang et al., CVPR 2022): a query pass of the frozen model picks
  ``top_k`` of ``pool_size`` prompts by key–query cosine; they are prepended after the class token
  and the head reads the mean of their outputs; a pull loss draws the chosen keys to the queries.
  Defaults follow l2p-pytorch (pool 10, length 5, top-5, batch-wise selection in training).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...registry import register_family
from .backbone import FrozenViTLearner, is_timm_vit
from .config import L2PModelConfig
from .head import ClassifierHead


class SimpleCILViT(FrozenViTLearner):
    """Frozen ViT + cosine classifier over class-mean prototypes (buffers ``prototypes`` ``[C, d]``)."""

    def __init__(self, backbone: str, num_classes: int = 100, backbone_pretrained: bool | str = False,
                 class_names: list[str] | None = None, **timm_kwargs: Any):
        super().__init__(backbone, num_classes, backbone_pretrained, class_names, **timm_kwargs)
        self.register_buffer("feature_sums", torch.zeros(num_classes, self.embed_dim))
        self.register_buffer("counts", torch.zeros(num_classes))

    @property
    def prototypes(self) -> Tensor:
        """``[C, d]`` class means (zero rows for classes without data yet)."""
        return self.feature_sums / self.counts.clamp_min(1.0)[:, None]

    @torch.no_grad()
    def add_features(self, features: Tensor, labels: Tensor) -> None:
        """Accumulate ``features`` ``[N, d]`` of classes ``labels`` ``[N]`` into the prototypes."""
        self.feature_sums.index_add_(0, labels, features.to(self.feature_sums.dtype))
        self.counts.index_add_(0, labels, torch.ones_like(labels, dtype=self.counts.dtype))

    def forward(self, x: Tensor, return_aux: bool = False):
        """``x`` ``[B, 3, H, W]`` -> cosine similarities ``[B, C]`` (classes not seen yet at −inf)."""
        feats = self.features(x)
        logits = F.normalize(feats, dim=-1) @ F.normalize(self.prototypes, dim=-1).t()
        logits = self.mask_unseen(self.eval_logits(feats, logits))
        return (logits, {}) if return_aux else logits


class LinearHeadViT(FrozenViTLearner):
    """Frozen ViT + a head on the pre-logits features (sequential/joint probe; ``head`` as HippoTune's)."""

    def __init__(self, backbone: str, num_classes: int = 100, backbone_pretrained: bool | str = False,
                 head: str = "cosine", head_scale: float = 16.0, class_names: list[str] | None = None,
                 **timm_kwargs: Any):
        super().__init__(backbone, num_classes, backbone_pretrained, class_names, **timm_kwargs)
        self.head = ClassifierHead(self.embed_dim, num_classes, head, head_scale)

    def forward(self, x: Tensor, return_aux: bool = False):
        feats = self.embed(x)
        logits = self.classify(feats)
        return (logits, {}) if return_aux else logits


class L2PViT(FrozenViTLearner):
    """L2P on a frozen timm ViT (see :class:`~.config.L2PModelConfig`).

    ``forward(x, return_aux=True)`` -> ``(logits, {"pull": Σ_selected (1 − cos(q, k)) averaged over the batch})``.
    """

    def __init__(self, backbone: str, num_classes: int = 100, backbone_pretrained: bool | str = False,
                 pool_size: int = 10, prompt_length: int = 5, top_k: int = 5, batchwise_prompt: bool = True,
                 head: str = "cosine", head_scale: float = 16.0, class_names: list[str] | None = None,
                 **timm_kwargs: Any):
        super().__init__(backbone, num_classes, backbone_pretrained, class_names, **timm_kwargs)
        if not 0 < top_k <= pool_size or prompt_length < 1:
            raise ValueError(f"need 0 < top_k <= pool_size and prompt_length >= 1, got top_k={top_k}, "
                             f"pool_size={pool_size}, prompt_length={prompt_length}")
        self.config = L2PModelConfig(pool_size, prompt_length, top_k, batchwise_prompt, head, head_scale)
        d = self.embed_dim
        self.prompt_keys = nn.Parameter(torch.empty(pool_size, d).uniform_(-1.0, 1.0))
        self.prompts = nn.Parameter(torch.empty(pool_size, prompt_length, d).uniform_(-1.0, 1.0))
        self.head = ClassifierHead(d, num_classes, head, head_scale)

    @torch.no_grad()
    def query(self, x: Tensor) -> Tensor:
        """The extra pass: frozen, un-prompted class-token features ``[B, d]``."""
        return self.vit.forward_head(self.vit.forward_features(x), pre_logits=True)

    def select(self, sim: Tensor) -> Tensor:
        """``sim`` ``[B, P]`` -> prompt indices ``[B, top_k]`` (batch-wise majority in training)."""
        k = self.config.top_k
        idx = sim.topk(k, dim=1).indices
        if self.training and self.config.batchwise_prompt:
            counts = torch.bincount(idx.reshape(-1), minlength=self.config.pool_size)
            # ties broken by the lower index, the same on every rank and run
            order = torch.argsort(counts * self.config.pool_size - torch.arange(len(counts), device=counts.device),
                                  descending=True)
            idx = order[:k].expand(sim.shape[0], k)
        return idx

    def prompted(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Query pass, selection, prompted pass: ``(features [B, d], sim [B, P], idx [B, top_k])``."""
        q = self.query(x)
        sim = F.normalize(q, dim=-1) @ F.normalize(self.prompt_keys, dim=-1).t()  # [B, P]
        idx = self.select(sim)
        prompts = self.prompts[idx].flatten(1, 2)  # [B, top_k * L, d]
        vit = self.vit
        tokens = vit.norm_pre(vit.patch_drop(vit._pos_embed(vit.patch_embed(x))))
        prefix = int(getattr(vit, "num_prefix_tokens", 1))
        tokens = torch.cat([tokens[:, :prefix], prompts.to(tokens.dtype), tokens[:, prefix:]], dim=1)
        out = vit.norm(vit.blocks(tokens))
        feats = out[:, prefix:prefix + prompts.shape[1]].mean(dim=1)  # L2P's "prompt" head
        return feats, sim, idx

    def embed(self, x: Tensor) -> Tensor:
        return self.prompted(x)[0]

    def forward(self, x: Tensor, return_aux: bool = False):
        """``x`` ``[B, 3, H, W]`` -> logits ``[B, C]``."""
        feats, sim, idx = self.prompted(x)
        logits = self.classify(feats)
        if not return_aux:
            return logits
        pull = (1.0 - sim.gather(1, idx)).sum(dim=1).mean()
        return logits, {"pull": pull}


@register_family("simplecil", default_backbones=["vit_tiny_partworld"], backbone_check=is_timm_vit)
def simplecil(backbone: str, **kwargs: Any) -> SimpleCILViT:
    return SimpleCILViT(backbone, **kwargs)


@register_family("seqhead", default_backbones=["vit_tiny_partworld"], backbone_check=is_timm_vit)
def seqhead(backbone: str, **kwargs: Any) -> LinearHeadViT:
    return LinearHeadViT(backbone, **kwargs)


@register_family("l2p", default_backbones=["vit_tiny_partworld", "vit_base_patch16_224"],
                 backbone_check=is_timm_vit)
def l2p(backbone: str, **kwargs: Any) -> L2PViT:
    return L2PViT(backbone, **kwargs)
