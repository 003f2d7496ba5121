"""Supervised multi-operator training: one operator per batch from a seeded mixture, per-task weighted L1.

The paper trains on many operators at once with an L1 loss weighted per task by
``ω = ‖Aᵀy‖ / σ``, which balances tasks of very different difficulty (noiseless inpainting has
small errors, strong denoising large ones). Here ``‖Aᵀy‖`` is taken per image as a root mean
square (so ``ω`` does not grow with the image size) and ``σ`` is the effective noise std:
``sqrt(σ_gauss² + gain · mean|y|)`` (Poisson variance ``gain · x``), at least ``sigma_floor``
so that noiseless tasks get a finite weight.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from deepinv.physics import LinearPhysics
from torch import Tensor

from ...errors import UnknownNameError
from .noise import OperatorSpecError
from .operators import OPERATOR_HELP, OperatorSpec, build_physics, operator_channels, parse_operator

# deepinv's RAM benchmark tasks (inpainting: 30 % of the pixels observed); the zoo's training mixture.
DEFAULT_OPERATORS: tuple[str, ...] = (
    "blur:sigma=2,noise=gaussian:0.05",
    "inpainting:ratio=0.3,noise=gaussian:0.01",
    "sr:factor=2",
    "denoise:noise=gaussian:0.1",
)


def parse_operators(texts: Sequence[str]) -> list[OperatorSpec]:
    """Parse operator strings; an error names the bad string and lists what is accepted."""
    if isinstance(texts, str):
        texts = [texts]
    if not texts:
        raise OperatorSpecError("give at least one operator string (e.g. --operators 'blur:sigma=2').")
    specs = []
    for text in texts:
        try:
            specs.append(parse_operator(text))
        except (OperatorSpecError, UnknownNameError) as e:  # unknown names, bad parameters
            listing = "" if OPERATOR_HELP in str(e) else "\n" + OPERATOR_HELP
            raise OperatorSpecError(f"bad operator {text!r}: {e}{listing}") from None
    return specs


def check_operators(specs: Sequence[OperatorSpec], channels: int, crop: int,
                    model_channels: Sequence[int] | None = None) -> None:
    """Build every operator once for ``[channels, crop, crop]`` images, so that bad sizes fail now."""
    for spec in specs:
        c = operator_channels(spec, channels)
        if model_channels is not None and c not in model_channels:
            raise OperatorSpecError(
                f"{spec.name} works on {c}-channel images but the model only has heads for "
                f"{sorted(model_channels)} channels; a new model gets heads with --model-args in_channels=[...] "
                f"including {c}, a pretrained one keeps its own (ram_base.official has 1, 2 and 3).")
        build_physics(spec, (c, crop, crop))


def mixture_channels(specs: Sequence[OperatorSpec], channels: int) -> tuple[int, ...]:
    """Channel counts the operators work on (the heads a model needs), sorted."""
    return tuple(sorted({operator_channels(s, channels) for s in specs}))


def operator_probabilities(n: int, weights: Sequence[float] | None) -> Tensor:
    """Sampling probabilities of ``n`` operators (uniform when ``weights`` is empty)."""
    if not weights:
        return torch.full((n,), 1.0 / n, dtype=torch.float64)
    if len(weights) != n or any(w < 0 for w in weights) or sum(weights) <= 0:
        raise OperatorSpecError(f"--operator-weights needs {n} non-negative numbers (one per operator) with a "
                                f"positive sum, got {list(weights)}.")
    w = torch.tensor([float(v) for v in weights], dtype=torch.float64)
    return w / w.sum()


def draw_operator(seed: int, probabilities: Tensor) -> int:
    """Index of the operator for a batch whose first item carries ``seed`` (deterministic)."""
    g = torch.Generator().manual_seed(int(seed))
    return int(torch.multinomial(probabilities, 1, generator=g))


def effective_sigma(physics: LinearPhysics, y: Tensor, sigma_floor: float) -> Tensor:
    """Per-image effective noise std ``[B]`` of ``physics.noise_model`` (see the module docstring)."""
    noise = getattr(physics, "noise_model", None)
    sigma = getattr(noise, "sigma", 0.0)
    gain = getattr(noise, "gain", 0.0)

    def per_image(v: float | Tensor) -> Tensor:  # a scalar, one level per image, or a map (its max)
        t = torch.as_tensor(v, dtype=y.dtype, device=y.device).reshape(-1)
        return t if t.numel() == y.shape[0] else t.amax().expand(y.shape[0])

    mean_abs = y.detach().abs().reshape(y.shape[0], -1).mean(1)
    var = per_image(sigma) ** 2 + per_image(gain) * mean_abs
    return var.sqrt().clamp_min(sigma_floor)


@torch.no_grad()
def task_weight(physics: LinearPhysics, y: Tensor, sigma_floor: float = 0.01) -> Tensor:
    """The paper's per-task weight ``ω = ‖Aᵀy‖ / σ`` for each image: ``[B]`` (no gradient)."""
    x0 = physics.A_adjoint(y)
    rms = x0.reshape(x0.shape[0], -1).pow(2).mean(1).sqrt()
    return rms / effective_sigma(physics, y, sigma_floor)


def weighted_l1(x_hat: Tensor, x: Tensor, weight: Tensor | None) -> tuple[Tensor, Tensor]:
    """``(mean_i ω_i · mean|x̂_i − x_i|, per-image L1 [B])``; ``weight=None`` means ω = 1."""
    l1 = (x_hat.float() - x.float()).abs().reshape(x.shape[0], -1).mean(1)
    loss = (l1 * weight).mean() if weight is not None else l1.mean()
    return loss, l1.detach()
