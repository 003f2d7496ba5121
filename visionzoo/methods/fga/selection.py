"""The arithmetic of test-time view selection: entropies, STSS scores, keeping the best views, voting.

All functions are pure and batched over images: image features ``[B, N, E]`` (``N`` views per image,
view 0 the original), text features ``[C, E]``, logits ``[B, N, C]``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def entropy(logits: Tensor) -> Tensor:
    """Shannon entropy (nats) of ``softmax(logits)`` over the last axis: ``[..., C] -> [...]``."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def marginal_entropy(logits: Tensor) -> Tensor:
    """Entropy of the mean of the softmaxes of ``logits`` ``[K, C]`` (TPT's loss): a scalar."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    avg = torch.logsumexp(logp, dim=0) - math.log(logp.shape[0])
    return -(avg.exp() * avg).sum()


def keep_count(n_views: int, fraction: float) -> int:
    """``int(n_views * fraction)`` views, at least one (TPT/Zero's confidence selection)."""
    return max(1, int(n_views * fraction))


def lowest(scores: Tensor, k: int) -> Tensor:
    """Indices ``[B, k]`` of the ``k`` lowest scores of ``[B, N]`` (ties: lower view index first)."""
    k = min(k, scores.shape[-1])
    order = torch.sort(scores, dim=-1, stable=True).indices
    return order[..., :k]


def vote(logits: Tensor, kept: Tensor) -> Tensor:
    """Majority vote of the argmax predictions of views ``kept`` ``[B, k]`` of ``logits`` ``[B, N, C]``.

    Ties go to the class with the larger summed probability over the kept views (so a tie never
    depends on class order). Returns ``[B]`` class indices.
    """
    chosen = logits.gather(1, kept[..., None].expand(-1, -1, logits.shape[-1])).float()  # [B, k, C]
    counts = torch.zeros(chosen.shape[0], chosen.shape[-1], device=chosen.device)
    counts.scatter_add_(1, chosen.argmax(-1), torch.ones(chosen.shape[:2], device=chosen.device))
    tiebreak = chosen.softmax(-1).sum(1) / (chosen.shape[1] + 1)  # < 1: never outweighs one vote
    return (counts + tiebreak).argmax(-1)


def stss_scores(image_features: Tensor, logit_scale: Tensor | float, text: Tensor, perturbed: Tensor,
                lam: float = 1.0, logit_bias: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """FGA's sharpness score of every view, and the logits at the trained prompt.

    ``s(v) = H_v(p) + λ · max_r [H_v(p + δ_r) − H_v(p)]`` with ``H_v`` the entropy of
    ``softmax(τ · f_v · tᵀ)``.

    Args:
        image_features: ``[B, N, E]`` normalised.
        logit_scale: τ.
        text: ``[C, E]`` normalised text features at the prompt ``p``.
        perturbed: ``[R, C, E]`` normalised text features at ``p + δ_r``.
        lam: λ.
    Returns:
        ``(scores [B, N], logits [B, N, C])``.
    """
    def logits_of(t: Tensor) -> Tensor:
        out = logit_scale * image_features @ t.t()
        return out + logit_bias if logit_bias is not None else out

    logits = logits_of(text)
    h0 = entropy(logits)
    worst = torch.stack([entropy(logits_of(t)) for t in perturbed]).amax(0) if len(perturbed) else h0
    return h0 + lam * (worst - h0), logits


def perturb_context(ctx: Tensor, r: int, rho: float, seed: int = 0) -> Tensor:
    """``R`` perturbed contexts ``p + ρ ε_r / ‖ε_r‖`` with ``ε_r ~ N(0, I)`` over all context entries.

    ``ctx`` ``[n_ctx, D]`` (or ``[C, n_ctx, D]``) -> ``[R, *ctx.shape]``; the draws come from a CPU
    generator seeded with ``seed`` (the same directions on every device).
    """
    g = torch.Generator().manual_seed(seed)
    eps = torch.randn((r, *ctx.shape), generator=g)
    eps = eps / eps.flatten(1).norm(dim=1).clamp_min(1e-12).view(r, *([1] * ctx.dim()))
    return ctx.detach().unsqueeze(0) + rho * eps.to(ctx.device, ctx.dtype)
