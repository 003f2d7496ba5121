"""``hippotune_<timm vit>``: a frozen ViT whose first blocks retrieve iteratively from learnable memories.

``create_model("hippotune_vit_tiny_partworld", num_classes=100, backbone_pretrained=True)``. The
adapted blocks are wrapped in :class:`~.layer.RetrievalBlock` (the timm block itself is untouched);
a linear head over all classes of the run reads the final class-token features. Only the memories
(``K``, ``V``, ``P`` per adapted block) and the head train.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import torch
from torch import Tensor, nn

from ...registry import register_family
from .backbone import (
    FrozenViTLearner,
    check_block_indices,
    default_adapted_blocks,
    is_timm_vit,
    load_backbone_state,
)
from .config import HippoTuneModelConfig
from .head import ClassifierHead
from .layer import RetrievalBlock
from .retrieval import IterativeRetrieval, retrieval_entropy


class HippoTuneViT(FrozenViTLearner):
    """Frozen timm ViT + iterative retrieval layers + linear head (see :class:`HippoTuneModelConfig`).

    ``forward(x)`` -> logits ``[B, num_classes]`` (classes not seen yet at −inf in eval mode);
    ``forward(x, return_aux=True)`` -> ``(logits, {"orth": ..., "entropy": ..., "steps": ...})``.
    """

    def __init__(self, backbone: str, num_classes: int = 100, backbone_pretrained: bool | str = False,
                 adapt_blocks: list[int] | None = None, memory_size: int = 32, value_dim: int = 0,
                 t_max: int = 4, temperature: float = 0.1, top_k: int = 4, alpha: float = 0.5,
                 eps: float = 1e-3, grad_steps: int = 2, query: str = "cls", spectral_norm: bool = False,
                 value_init_std: float = 1.0, head: str = "cosine", head_scale: float = 16.0,
                 memory_partitions: int = 0, class_names: list[str] | None = None, **timm_kwargs: Any):
        super().__init__(backbone, num_classes, backbone_pretrained, class_names, **timm_kwargs)
        blocks = default_adapted_blocks(self.depth) if adapt_blocks is None else adapt_blocks
        blocks = check_block_indices(list(blocks), self.depth, backbone)
        self.config = HippoTuneModelConfig(
            adapt_blocks=blocks, memory_size=memory_size, value_dim=value_dim, t_max=t_max,
            temperature=temperature, top_k=top_k, alpha=alpha, eps=eps, grad_steps=grad_steps, query=query,
            spectral_norm=spectral_norm, value_init_std=value_init_std, head=head, head_scale=head_scale,
            memory_partitions=memory_partitions)
        prefix = int(getattr(self.vit, "num_prefix_tokens", 1))
        for i in blocks:  # replace the container entry by a wrapper holding the original block
            memory = IterativeRetrieval(self.embed_dim, memory_size, value_dim or None, t_max, temperature, top_k,
                                        alpha, eps, grad_steps, spectral_norm, value_init_std, memory_partitions)
            self.vit.blocks[i] = RetrievalBlock(self.vit.blocks[i], memory, prefix, query)  # type: ignore[assignment]
        self.head = ClassifierHead(self.embed_dim, num_classes, head, head_scale)

    def retrieval_blocks(self) -> list[RetrievalBlock]:
        return [b for b in self.vit.blocks if isinstance(b, RetrievalBlock)]

    def set_task(self, task: int) -> None:
        """The class-incremental learner calls this when task ``task`` (0-based) begins; with
        ``memory_partitions`` it decides which memory partitions are read and which one trains."""
        for b in self.retrieval_blocks():
            b.retrieval.set_task(task)

    def no_weight_decay(self) -> set[str]:
        """Parameter names the optimizer must not decay: with memory partitions, decoupled weight decay
        would still shrink the frozen partitions and ``P`` (their gradient is 0, their decay is not)."""
        if not self.config.memory_partitions:
            return set()
        frozen = ("retrieval.keys", "retrieval.values", "retrieval.proj.weight", "retrieval.proj.parametrizations.weight.original")
        return {name for name, _ in self.named_parameters() if name.endswith(frozen)}

    def trainable_modules(self) -> list[nn.Module]:
        return [b.retrieval for b in self.retrieval_blocks()]

    def forward(self, x: Tensor, return_aux: bool = False):
        """``x`` ``[B, 3, H, W]`` normalised -> logits ``[B, C]`` (and the auxiliary terms)."""
        feats = self.embed(x)
        logits = self.classify(feats)
        if not return_aux:
            return logits
        return logits, self.aux_terms()

    def aux_terms(self) -> dict[str, Tensor]:
        """After a forward: ``orth`` = Σ_l ‖K̂K̂ᵀ − I‖²_F, ``entropy`` = mean retrieval entropy over layers,
        ``steps`` = mean loop steps run per layer and sample (a diagnostic)."""
        blocks = self.retrieval_blocks()
        orth = torch.stack([b.retrieval.orthogonality_loss() for b in blocks]).sum()
        ents, steps = [], []
        for b in blocks:
            if b.last is not None:
                ents.append(retrieval_entropy(b.last.weights, b.last.valid))
                steps.append(b.last.valid.float().sum(1).mean())
        zero = orth.new_zeros(())
        return {"orth": orth, "entropy": torch.stack(ents).mean() if ents else zero,
                "steps": torch.stack(steps).mean().detach() if steps else zero}

    def load_pretrained_weights(self, state: dict[str, Tensor]) -> None:
        """Load a plain timm ViT state dict (e.g. a model card's hub weights) into the frozen backbone;
        the memories and the head keep their initialisation."""
        load_backbone_state(self.vit, state, self.config.adapt_blocks)

    def describe(self) -> dict[str, Any]:
        return {"method": "hippotune", **asdict(self.config)}


@register_family("hippotune", default_backbones=["vit_tiny_partworld", "vit_base_patch16_224"],
                 backbone_check=is_timm_vit)
def hippotune(backbone: str, **kwargs: Any) -> HippoTuneViT:
    return HippoTuneViT(backbone, **kwargs)
