"""The iterative query–retrieve–feedback loop of one adapted layer (HippoTune, spec §"The loop").

Per layer a learnable memory: keys ``K [M, d]``, values ``V [M, d_v]`` and a back-projection
``P: d_v -> d``. From the query ``q¹ [B, d]``::

    S^t     = softmax(cos(q^t, K) / τ)           [B, M]   (optional top-k: other slots get 0)
    v^t     = S^t V                              [B, d_v]
    q^{t+1} = α q^t + (1 − α) P(v^t)             [B, d]

for t = 1..T_max, stopping a sample once ``‖v^t − v^{t−1}‖ / ‖v^{t−1}‖ < ε``. The retrieved
``v¹..v^T`` become ``T`` extra tokens (``P(v^t)`` when ``d_v ≠ d``) with a validity mask ``[B, T]``
(False after a sample stopped), so a sample's result does not depend on what else is in its batch.

Choices the paper leaves open (see docs/hippotune.md for the measurements behind the defaults):
cosine similarity (with τ ≈ 0.1 the logits stay in [−10, 10]; a raw dot product with residual-
stream queries saturates the softmax), a relative stopping threshold (the value scale is learned,
so an absolute ε would drift during training), and truncated backprop: the loop first runs without
a graph (which also decides the stopping step), then the last ``grad_steps`` transitions are re-run
with a graph; earlier steps still pass gradients to ``K`` and ``V`` through ``S^t(q^t)V`` with a
detached ``q^t``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass
class Retrieved:
    """Output of one loop.

    Attributes:
        tokens: ``[B, T, d]`` extra tokens for the block (``T`` = steps the loop ran).
        valid: ``[B, T]`` bool, False for steps after a sample stopped.
        weights: ``[B, T, M]`` retrieval distributions ``S^t`` (for the entropy loss).
    """

    tokens: Tensor
    valid: Tensor
    weights: Tensor

    @property
    def steps(self) -> int:
        return self.tokens.shape[1]


class IterativeRetrieval(nn.Module):
    """Key–value memory of one layer with the iterative retrieval loop.

    Args:
        dim: token width ``d`` of the wrapped block.
        memory_size: slots ``M``.
        value_dim: ``d_v`` (default ``d``: values are fused as tokens directly).
        t_max: most loop steps ``T_max`` (1 = a single retrieval, no feedback).
        temperature: softmax temperature ``τ`` of the cosine similarities.
        top_k: keep the ``k`` best slots per step (0 = all).
        alpha: ``α``, the weight of the old query in the feedback step.
        eps: relative early-stop threshold on ``‖v^t − v^{t−1}‖ / ‖v^{t−1}‖`` (0 = never stop early).
        grad_steps: loop transitions that backprop goes through (truncated backprop).
        spectral_norm: spectral normalisation of ``P`` (keeps the feedback map contractive).
        value_init_std: std of the initial values (0: every retrieved token starts as the same null token).
    """

    def __init__(self, dim: int, memory_size: int = 32, value_dim: int | None = None, t_max: int = 4,
                 temperature: float = 0.1, top_k: int = 0, alpha: float = 0.5, eps: float = 1e-3,
                 grad_steps: int = 2, spectral_norm: bool = False, value_init_std: float = 1.0):
        super().__init__()
        if memory_size < 1 or t_max < 1 or grad_steps < 1:
            raise ValueError(f"memory_size, t_max and grad_steps must be >= 1, got {memory_size}, {t_max}, "
                             f"{grad_steps}")
        if temperature <= 0 or not 0.0 <= alpha <= 1.0 or eps < 0 or top_k < 0:
            raise ValueError(f"need temperature > 0, 0 <= alpha <= 1, eps >= 0, top_k >= 0; got {temperature}, "
                             f"{alpha}, {eps}, {top_k}")
        value_dim = value_dim or dim
        self.dim, self.memory_size, self.value_dim = dim, memory_size, value_dim
        self.t_max, self.temperature, self.top_k = t_max, temperature, top_k
        self.alpha, self.eps, self.grad_steps = alpha, eps, grad_steps
        self.value_init_std = value_init_std
        self.keys = nn.Parameter(torch.empty(memory_size, dim))
        self.values = nn.Parameter(torch.empty(memory_size, value_dim))
        proj = nn.Linear(value_dim, dim, bias=False)
        self.proj = nn.utils.parametrizations.spectral_norm(proj) if spectral_norm else proj
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        # Orthogonal keys (L_orth's optimum); values by default at the unit scale of layer-normed queries
        # so the feedback P(v) moves the query from the first step; P = I when d_v = d (a Hopfield-like update).
        nn.init.orthogonal_(self.keys)
        # Keys only enter through cosines, so their norm is free; it sets Adam's relative step
        # (≈ lr / per-coordinate size): rows of norm √d have unit-size coordinates like the values.
        self.keys.mul_(math.sqrt(self.dim))
        nn.init.normal_(self.values, std=self.value_init_std)
        weight = self.proj.parametrizations.weight.original if hasattr(self.proj, "parametrizations") \
            else self.proj.weight
        if self.value_dim == self.dim:
            weight.copy_(torch.eye(self.dim))
        else:
            nn.init.xavier_uniform_(weight)

    def attend(self, query: Tensor) -> Tensor:
        """``[B, d]`` query -> ``[B, M]`` retrieval weights ``S``."""
        logits = F.normalize(query, dim=-1) @ F.normalize(self.keys, dim=-1).t() / self.temperature
        if 0 < self.top_k < self.memory_size:
            kth = logits.topk(self.top_k, dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        return logits.softmax(dim=-1)

    def token(self, value: Tensor) -> Tensor:
        """``[..., d_v]`` retrieved value -> ``[..., d]`` token."""
        return value if self.value_dim == self.dim else self.proj(value)

    def _loop(self, q: Tensor) -> tuple[list[Tensor], Tensor]:
        """Runs the loop without a graph: queries ``q¹..q^T`` and validity ``[B, T]``."""
        queries, valid_steps = [q], []
        active = torch.ones(q.shape[0], dtype=torch.bool, device=q.device)
        prev = None
        for t in range(self.t_max):
            v = self.attend(q) @ self.values
            valid_steps.append(active.clone())
            if prev is not None and self.eps > 0:
                change = (v - prev).norm(dim=-1) / prev.norm(dim=-1).clamp_min(1e-12)
                active = active & (change >= self.eps)
            if t + 1 == self.t_max or not bool(active.any()):
                break
            prev = v
            q = self.alpha * q + (1.0 - self.alpha) * self.proj(v)
            queries.append(q)
        return queries, torch.stack(valid_steps, dim=1)

    def forward(self, query: Tensor) -> Retrieved:
        """``query`` ``[B, d]`` (q¹) -> :class:`Retrieved` with ``T <= t_max`` tokens."""
        with torch.no_grad():
            queries, valid = self._loop(query.detach())
        steps = len(queries)
        if not torch.is_grad_enabled():
            weights = torch.stack([self.attend(q) for q in queries], dim=1)
            values = weights @ self.values
            return Retrieved(self.token(values), valid, weights)
        start = max(0, steps - self.grad_steps)
        weights_list: list[Tensor] = []
        for t in range(start):  # outside the truncation window: detached queries, gradients to K and V only
            weights_list.append(self.attend(queries[t]))
        q = query if start == 0 else queries[start]  # queries[] are detached
        for t in range(start, steps):
            s = self.attend(q)
            weights_list.append(s)
            if t + 1 < steps:
                q = self.alpha * q + (1.0 - self.alpha) * self.proj(s @ self.values)
        weights = torch.stack(weights_list, dim=1)  # [B, T, M]
        return Retrieved(self.token(weights @ self.values), valid, weights)

    def orthogonality_loss(self) -> Tensor:
        """``‖K̂K̂ᵀ − I‖²_F`` over the unit-norm keys ``K̂`` (the keys are compared by cosine, so only
        their directions matter; ``KᵀK = I`` in the spec's notation, with keys as rows)."""
        k = F.normalize(self.keys, dim=-1)
        gram = k @ k.t()
        return (gram - torch.eye(self.memory_size, device=k.device, dtype=k.dtype)).pow(2).sum()

    def extra_repr(self) -> str:
        return (f"M={self.memory_size}, d={self.dim}, d_v={self.value_dim}, T_max={self.t_max}, "
                f"tau={self.temperature}, top_k={self.top_k}, alpha={self.alpha}, eps={self.eps}, "
                f"grad_steps={self.grad_steps}")


def retrieval_entropy(weights: Tensor, valid: Tensor) -> Tensor:
    """Mean entropy of the valid retrieval distributions: ``weights`` ``[B, T, M]``, ``valid`` ``[B, T]``."""
    ent = -(weights * weights.clamp_min(1e-12).log()).sum(-1)  # [B, T]
    mask = valid.to(ent.dtype)
    return (ent * mask).sum() / mask.sum().clamp_min(1.0)
