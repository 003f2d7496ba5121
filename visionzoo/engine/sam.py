"""Sharpness-aware minimisation (SAM) as a reusable training step.

Minimises ``ℓ(p) + λ·[ℓ(p + ε*) − ℓ(p)]`` with ``ε* = ρ ∇ℓ(p) / ‖∇ℓ(p)‖`` and no gradient through
``ε*`` (Foret et al. 2021; FGA's SAPT is this with λ = 1 on prompt vectors). The gradient is
``(1 − λ)∇ℓ(p) + λ∇ℓ(p + ε*)``, so λ = 1 is plain SAM and λ = 0 plain descent. Two forward/backward
passes per step; the optimizer is any torch optimizer (it steps once, at ``p``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor


def _grad_norm(params: Sequence[torch.nn.Parameter]) -> Tensor:
    norms = [p.grad.detach().float().norm(2) for p in params if p.grad is not None]
    return torch.stack(norms).norm(2) if norms else torch.zeros(())


def sam_backward(closure: Callable[[], Tensor], params: Sequence[torch.nn.Parameter], rho: float,
                 lam: float = 1.0, eps: float = 1e-12) -> Tensor:
    """Leave the SAM gradient in ``p.grad`` for every parameter; returns the loss at ``p``.

    ``closure()`` must run the forward pass and return a scalar loss (it is called twice).
    Gradients are expected to be zero on entry.
    """
    loss = closure()
    loss.backward()
    params = [p for p in params if p.grad is not None]
    scale = rho / (_grad_norm(params) + eps)
    first = [p.grad.detach().clone() for p in params]
    with torch.no_grad():
        shifts = [g * scale.to(g.dtype) for g in first]
        for p, e in zip(params, shifts, strict=True):
            p.add_(e)
        for p in params:
            p.grad = None
    try:
        perturbed = closure()
        perturbed.backward()
    finally:
        with torch.no_grad():
            for p, e in zip(params, shifts, strict=True):
                p.sub_(e)
    if lam != 1.0:
        with torch.no_grad():
            for p, g in zip(params, first, strict=True):
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                p.grad.mul_(lam).add_(g, alpha=1.0 - lam)
    return loss.detach()
