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

Memory partitions (``partitions = P > 0``, our stability choice; the paper says nothing about how
memories are shared across tasks): the ``M`` slots are split into ``P`` equal partitions. While task
``t`` trains, the loop reads partitions ``0..t`` and only partition ``t`` (and, in task 0 only, ``P``)
receives gradients; older partitions are frozen, as CODA-Prompt freezes the prompt components of
earlier tasks. From task ``P`` on the memory is frozen entirely (``P = 1``: adapt in the first task,
then only the head learns). With a shared memory (``P = 0``) every task rewrites every slot, and the
keys and values old classes relied on drift (measured: docs/hippotune.md).
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
        partitions: split the slots into this many per-task partitions (0 = one memory shared by all tasks);
            see the module docstring. The current task is the buffer ``task`` (set by :meth:`set_task`).
    """

    def __init__(self, dim: int, memory_size: int = 32, value_dim: int | None = None, t_max: int = 4,
                 temperature: float = 0.1, top_k: int = 0, alpha: float = 0.5, eps: float = 1e-3,
                 grad_steps: int = 2, spectral_norm: bool = False, value_init_std: float = 1.0,
                 partitions: int = 0):
        super().__init__()
        if memory_size < 1 or t_max < 1 or grad_steps < 1:
            raise ValueError(f"memory_size, t_max and grad_steps must be >= 1, got {memory_size}, {t_max}, "
                             f"{grad_steps}")
        if temperature <= 0 or not 0.0 <= alpha <= 1.0 or eps < 0 or top_k < 0:
            raise ValueError(f"need temperature > 0, 0 <= alpha <= 1, eps >= 0, top_k >= 0; got {temperature}, "
                             f"{alpha}, {eps}, {top_k}")
        if partitions < 0 or (partitions and memory_size % partitions):
            raise ValueError(f"partitions must be 0 or divide memory_size={memory_size}, got {partitions}")
        value_dim = value_dim or dim
        self.dim, self.memory_size, self.value_dim = dim, memory_size, value_dim
        self.t_max, self.temperature, self.top_k = t_max, temperature, top_k
        self.alpha, self.eps, self.grad_steps = alpha, eps, grad_steps
        self.value_init_std = value_init_std
        self.keys = nn.Parameter(torch.empty(memory_size, dim))
        self.values = nn.Parameter(torch.empty(memory_size, value_dim))
        proj = nn.Linear(value_dim, dim, bias=False)
        self.proj = nn.utils.parametrizations.spectral_norm(proj) if spectral_norm else proj
        self.partitions = partitions
        if partitions:  # persistent: a checkpoint after task t reads exactly the partitions it trained
            self.register_buffer("task", torch.zeros((), dtype=torch.long))
            self.keys.register_hook(self._freeze_rows)
            self.values.register_hook(self._freeze_rows)
            proj_weight = self.proj.parametrizations.weight.original if spectral_norm else self.proj.weight
            proj_weight.register_hook(self._freeze_shared)
        self.reset_parameters()

    # ------------------------------------------------------------------ partitions
    def set_task(self, task: int) -> None:
        """Make ``task`` (0-based) current: which partitions the loop reads and which one trains."""
        if self.partitions:
            self.task.fill_(int(task))

    def _slots(self, upto: int) -> int:
        return min(upto, self.partitions) * (self.memory_size // self.partitions)

    @property
    def active_slots(self) -> int:
        """Slots the loop reads: partitions ``0..task`` (all ``M`` without partitions)."""
        return self._slots(int(self.task) + 1) if self.partitions else self.memory_size

    @property
    def frozen_slots(self) -> int:
        """Leading slots that receive no gradient: the partitions of earlier tasks."""
        return self._slots(int(self.task)) if self.partitions else 0

    def _freeze_shared(self, grad: Tensor) -> Tensor:
        """Gradient hook of ``P``, shared by all partitions: it trains in the first task only."""
        return torch.zeros_like(grad) if int(self.task) > 0 else grad

    def _freeze_rows(self, grad: Tensor) -> Tensor:
        """Gradient hook of ``K`` and ``V``: rows of frozen slots get 0. (Adam's step on a gradient that has
        always been 0 is 0, and the engine builds a fresh optimizer for every task.)"""
        frozen = self.frozen_slots
        if frozen == 0:
            return grad
        grad = grad.clone()
        grad[:frozen] = 0
        return grad

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
        active = self.active_slots
        if active < self.memory_size:  # partitions of later tasks do not exist yet
            logits = logits.clone()
            logits[:, active:] = float("-inf")
        if 0 < self.top_k < active:
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
        k = F.normalize(self.keys[: self.active_slots], dim=-1)
        gram = k @ k.t()
        return (gram - torch.eye(k.shape[0], device=k.device, dtype=k.dtype)).pow(2).sum()

    def extra_repr(self) -> str:
        return (f"M={self.memory_size}, d={self.dim}, d_v={self.value_dim}, T_max={self.t_max}, "
                f"tau={self.temperature}, top_k={self.top_k}, alpha={self.alpha}, eps={self.eps}, "
                f"grad_steps={self.grad_steps}" + (f", partitions={self.partitions}" if self.partitions else ""))


def retrieval_entropy(weights: Tensor, valid: Tensor) -> Tensor:
    """Mean entropy of the valid retrieval distributions: ``weights`` ``[B, T, M]``, ``valid`` ``[B, T]``."""
    ent = -(weights * weights.clamp_min(1e-12).log()).sum(-1)  # [B, T]
    mask = valid.to(ent.dtype)
    return (ent * mask).sum() / mask.sum().clamp_min(1.0)
