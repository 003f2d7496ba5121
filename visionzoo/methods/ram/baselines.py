"""Reference reconstructions that need no learned weights: ``Aᵀy``, ``A†y`` and TV-regularised PGD.

Each baseline is a callable ``f(y, physics) -> x`` (``[B, C, H, W]``), like a RAM model.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from deepinv.optim import L2, PGD, TVPrior
from deepinv.physics import LinearPhysics
from torch import Tensor

Reconstructor = Callable[[Tensor, LinearPhysics], Tensor]


@torch.no_grad()
def adjoint(y: Tensor, physics: LinearPhysics) -> Tensor:
    """``Aᵀy`` (back-projection)."""
    return physics.A_adjoint(y)


@torch.no_grad()
def pseudo_inverse(y: Tensor, physics: LinearPhysics) -> Tensor:
    """``A†y``: deepinv's ``A_dagger`` — closed form where the operator has one (masks, MRI,
    FFT blurs via their spectrum, CS via pinv), else a least-squares solve (conjugate gradient)."""
    return physics.A_dagger(y)


def noise_sigma(physics: LinearPhysics) -> float:
    """Gaussian std of the physics' noise (0 when none or not Gaussian-like)."""
    s = getattr(getattr(physics, "noise_model", None), "sigma", 0.0)
    return float(s.max()) if isinstance(s, Tensor) else float(s)


def default_tv_weight(physics: LinearPhysics) -> float:
    """TV weight ``λ`` for ``½‖Ax − y‖² + λ TV(x)``: half the noise std, at least 0.01.

    A generic rule, not tuned on evaluation images; pass ``weight=`` (e.g. tuned per operator on
    training images) for a stronger baseline.
    """
    return 0.5 * max(noise_sigma(physics), 0.02)


@torch.no_grad()
def tv_pgd(y: Tensor, physics: LinearPhysics, weight: float | None = None, iterations: int = 100,
           tv_inner_iterations: int = 20) -> Tensor:
    """Total-variation reconstruction by proximal gradient descent (deepinv ``PGD`` + ``TVPrior``).

    Args:
        weight: TV weight ``λ`` (default :func:`default_tv_weight`).
        iterations: PGD iterations (stops earlier when the iterates converge).
        tv_inner_iterations: iterations of the TV proximal solver per PGD step.
    """
    x0 = physics.A_adjoint(y)
    lipschitz = float(physics.compute_sqnorm(torch.randn_like(x0), max_iter=30, tol=1e-3, verbose=False))
    solver = PGD(data_fidelity=L2(), prior=TVPrior(n_it_max=tv_inner_iterations),
                 lambda_reg=default_tv_weight(physics) if weight is None else weight,
                 stepsize=1.0 / max(lipschitz, 1e-6), max_iter=iterations, early_stop=True, thres_conv=1e-5)
    return solver(y, physics)


BASELINES: dict[str, Reconstructor] = {"adjoint": adjoint, "pinv": pseudo_inverse, "tv_pgd": tv_pgd}
