"""``coda_<timm vit>``: CODA-Prompt (Smith et al., CVPR 2023) on the frozen ViT of the harness.

A query pass of the frozen model gives ``q(x)`` (the un-prompted class-token features). Each
prompted layer ``l`` holds ``M`` components ``P_m`` ``[L_p, d]`` with keys ``K_m`` and attention
vectors ``A_m`` ``[d]``; the image's prompt is the weighted sum
``p(x) = Σ_m cos(q(x) ⊙ A_m, K_m) · P_m``, whose first ``L_p/2`` tokens are prefixed to the keys
and the rest to the values of the block's attention (:class:`~.prefix.PrefixBlock`).

The ``M`` components are split evenly over the tasks. Task ``t`` uses components ``[0, (t+1)·M/T)``,
trains only its own ``[t·M/T, (t+1)·M/T)`` (older ones are detached in training) and starts them
orthonormal to the older ones (Gram–Schmidt, re-drawn when the task begins). The optional
orthogonality penalty (``ortho`` term, weight ``--ortho-mu``; the authors' default is 0) keeps
``K``, ``A`` and ``P`` near-orthogonal during training.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...errors import VisionZooError
from ...registry import register_family
from .backbone import FrozenViTLearner, check_block_indices, is_timm_vit, load_backbone_state
from .config import CodaPromptModelConfig
from .head import ClassifierHead
from .prefix import PrefixBlock


def default_prompt_layers(depth: int) -> list[int]:
    """The paper's layers 0–4 of 12, scaled to ``depth`` (8 blocks -> 0..2)."""
    return list(range(max(1, round(5 * depth / 12))))


def orthonormal_rows(old: Tensor, count: int, generator: torch.Generator | None = None) -> Tensor:
    """``count`` random unit rows ``[count, n]``, orthogonal to each other and to the rows of ``old``
    ``[s, n]`` (Gram–Schmidt through QR, so ``old`` need not be orthonormal itself)."""
    n = old.shape[1]
    if old.shape[0] + count > n:
        raise VisionZooError(f"cannot draw {count} components orthogonal to {old.shape[0]} others in {n} "
                             "dimensions; use a smaller pool_size (at most the width of the ViT).")
    new = torch.randn(count, n, generator=generator, dtype=torch.float64)
    if old.shape[0]:
        basis = torch.linalg.qr(old.double().t()).Q  # [n, s], orthonormal columns spanning old's rows
        new = new - (new @ basis) @ basis.t()
    return torch.linalg.qr(new.t()).Q.t().to(old.dtype)  # [count, n], orthonormal


def orthogonality_penalty(rows: Tensor) -> Tensor:
    """``mean((R Rᵀ − I)²)`` of ``rows`` ``[m, n]`` (CODA-Prompt's ortho penalty)."""
    gram = rows @ rows.t()
    return (gram - torch.eye(len(rows), device=rows.device, dtype=rows.dtype)).pow(2).mean()


class CodaPromptViT(FrozenViTLearner):
    """CODA-Prompt on a frozen timm ViT (see :class:`~.config.CodaPromptModelConfig`).

    ``forward(x, return_aux=True)`` -> ``(logits [B, C], {"ortho": penalty of the components in use})``.
    """

    def __init__(self, backbone: str, num_classes: int = 100, backbone_pretrained: bool | str = False,
                 prompt_layers: list[int] | None = None, pool_size: int = 100, prompt_length: int = 8,
                 num_tasks: int = 10, head: str = "cosine", head_scale: float = 16.0,
                 class_names: list[str] | None = None, **timm_kwargs: Any):
        super().__init__(backbone, num_classes, backbone_pretrained, class_names, **timm_kwargs)
        if prompt_length < 2 or prompt_length % 2:
            raise VisionZooError(f"prompt_length must be even and >= 2 (half key, half value prefixes), got "
                                 f"{prompt_length}.")
        if not 1 <= num_tasks <= pool_size:
            raise VisionZooError(f"CODA-Prompt splits pool_size={pool_size} components over num_tasks={num_tasks} "
                                 "tasks; need 1 <= num_tasks <= pool_size.")
        if (pool_size // num_tasks) * num_tasks > self.embed_dim:
            raise VisionZooError(f"CODA-Prompt keeps the keys of all tasks' components orthogonal, so pool_size "
                                 f"({pool_size}) can be at most the ViT width ({self.embed_dim}) of {backbone}; "
                                 f"pass e.g. pool_size={self.embed_dim // num_tasks * num_tasks}.")
        layers = default_prompt_layers(self.depth) if prompt_layers is None else prompt_layers
        layers = check_block_indices(list(layers), self.depth, backbone)
        self.config = CodaPromptModelConfig(layers, pool_size, prompt_length, num_tasks, head, head_scale)
        self.per_task = pool_size // num_tasks
        d, n_l = self.embed_dim, len(layers)
        attn_dim = self.vit.blocks[layers[0]].attn.qkv.out_features // 3
        self.components = nn.Parameter(torch.zeros(n_l, pool_size, prompt_length, attn_dim))
        self.keys = nn.Parameter(torch.zeros(n_l, pool_size, d))
        self.attention = nn.Parameter(torch.zeros(n_l, pool_size, d))
        self.register_buffer("task", torch.tensor(0))
        for i in layers:
            self.vit.blocks[i] = PrefixBlock(self.vit.blocks[i])  # type: ignore[assignment]
        self.layer_slot = {i: j for j, i in enumerate(layers)}
        self.head = ClassifierHead(d, num_classes, head, head_scale)
        self.begin_task(0)

    # ------------------------------------------------------------------ tasks
    def component_range(self) -> tuple[int, int]:
        """``(s, f)``: the current task trains components ``[s, f)`` and reads ``[0, f)``."""
        t = min(int(self.task), self.config.num_tasks - 1)
        return t * self.per_task, (t + 1) * self.per_task

    def set_task(self, task: int) -> None:
        """Make ``task`` current (which components are read and trained); keeps the weights."""
        self.task.fill_(task)

    @torch.no_grad()
    def begin_task(self, task: int, seed: int = 0) -> None:
        """Before training ``task``: its components, keys and attention vectors are drawn orthonormal
        to those of the earlier tasks (seeded by ``seed`` and ``task``, so a resumed run redraws alike)."""
        self.set_task(task)
        s, f = self.component_range()
        gen = torch.Generator().manual_seed(10_007 * int(seed) + int(task))
        for tensor in (self.components, self.keys, self.attention):
            for j in range(tensor.shape[0]):
                flat = tensor[j].reshape(tensor.shape[1], -1)
                flat[s:f] = orthonormal_rows(flat[:s].cpu(), f - s, gen).to(flat)

    def no_weight_decay(self) -> set[str]:
        """Older tasks' components get zero gradient; decoupled weight decay must not shrink them."""
        return {"components", "keys", "attention"}

    # ------------------------------------------------------------------ forward
    def in_use(self, tensor: Tensor, j: int) -> Tensor:
        """Layer ``j``'s rows ``[0, f)`` of ``tensor``; in training the older tasks' rows are detached."""
        s, f = self.component_range()
        rows = tensor[j, :f]
        if self.training and s > 0:
            rows = torch.cat([rows[:s].detach(), rows[s:]], dim=0)
        return rows

    def prefix(self, q: Tensor, j: int) -> tuple[Tensor, Tensor]:
        """``q`` ``[B, d]`` -> key and value prefixes ``[B, L_p/2, d_attn]`` of prompted layer ``j``."""
        keys, att, comps = self.in_use(self.keys, j), self.in_use(self.attention, j), self.in_use(self.components, j)
        weights = (F.normalize(q[:, None, :] * att[None], dim=-1) * F.normalize(keys, dim=-1)[None]).sum(-1)  # [B, f]
        prompt = torch.einsum("bm,mld->bld", weights, comps)
        half = prompt.shape[1] // 2
        return prompt[:, :half], prompt[:, half:]

    def embed(self, x: Tensor) -> Tensor:
        """Query pass, then the prompted pass: ``x`` ``[B, 3, H, W]`` -> class-token features ``[B, d]``."""
        with torch.no_grad():
            q = self.features(x)  # un-prompted: every PrefixBlock without a prefix is its plain block
        vit = self.vit
        tokens = vit.norm_pre(vit.patch_drop(vit._pos_embed(vit.patch_embed(x))))
        for i, blk in enumerate(vit.blocks):
            j = self.layer_slot.get(i)
            tokens = blk(tokens) if j is None else blk(tokens, prefix=self.prefix(q, j))
        return vit.forward_head(vit.norm(tokens), pre_logits=True)

    def forward(self, x: Tensor, return_aux: bool = False):
        """``x`` ``[B, 3, H, W]`` -> logits ``[B, C]``."""
        feats = self.embed(x)
        logits = self.classify(feats)
        if not return_aux:
            return logits
        terms = []
        for j in range(len(self.config.prompt_layers)):
            for tensor in (self.keys, self.attention, self.components):
                rows = self.in_use(tensor, j)
                terms.append(orthogonality_penalty(rows.reshape(rows.shape[0], -1)))
        return logits, {"ortho": torch.stack(terms).sum()}

    def load_pretrained_weights(self, state: dict[str, Tensor]) -> None:
        """Load a plain timm ViT state dict into the frozen backbone (prompts and head keep theirs)."""
        load_backbone_state(self.vit, state, self.config.prompt_layers)


@register_family("coda", default_backbones=["vit_tiny_partworld", "vit_base_patch16_224"],
                 backbone_check=is_timm_vit)
def coda(backbone: str, **kwargs: Any) -> CodaPromptViT:
    return CodaPromptViT(backbone, **kwargs)
