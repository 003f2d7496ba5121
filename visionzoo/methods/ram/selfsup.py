"""Self-supervised fine-tuning of a RAM-family model on new measurements, with no ground truth.

Loss (the paper's recipe): measurement consistency made robust to the noise model, plus an
Equivariant Imaging term for the operator's null space (weight 0.1; none for pure denoising)::

    noise model           consistency loss (deepinv.loss)
    none                  MCLoss()
    Gaussian(sigma)       SureGaussianLoss(sigma)
    Poisson(gain)         SurePoissonLoss(gain)
    Poisson-Gaussian      SurePGLoss(sigma, gain)
    anything else         SplittingLoss(split_ratio=0.9)

:func:`finetune` follows the reference recipe: Adam (lr 1e-4), batch 1, at most ``epochs`` passes,
early stopping on held-out measurements (an 80/20 split; with one measurement, the measurement
itself), keeping the weights of the best validation epoch.
"""

from __future__ import annotations

import copy
import inspect
import math
import time
from collections.abc import Callable, Sequence

import torch
from deepinv.loss import EILoss, Loss, MCLoss, SplittingLoss, SureGaussianLoss, SurePGLoss, SurePoissonLoss
from deepinv.physics import (
    Blur,
    BlurFFT,
    Denoising,
    GaussianNoise,
    Physics,
    PoissonGaussianNoise,
    PoissonNoise,
    ZeroNoise,
)
from deepinv.physics.generator import BernoulliSplittingMaskGenerator
from deepinv.transform import Rotate, Shift
from torch import Tensor, nn

from ...errors import NonFiniteLossError, VisionZooError

EI_WEIGHT = 0.1


def _scalar(v: float | Tensor) -> float | None:
    """A noise level as a float, or None when it varies over the batch (no single SURE level)."""
    if isinstance(v, Tensor):
        if v.numel() == 0 or not torch.all(v == v.reshape(-1)[0]):
            return None
        return float(v.reshape(-1)[0])
    return float(v)


def noise_kind(physics: Physics) -> str:
    """``"none" | "gaussian" | "poisson" | "poisson_gaussian" | "unknown"`` for ``physics.noise_model``."""
    noise = getattr(physics, "noise_model", None)
    if noise is None or isinstance(noise, ZeroNoise):
        return "none"
    if isinstance(noise, PoissonGaussianNoise):
        ok = _scalar(noise.sigma) is not None and _scalar(noise.gain) is not None
        return "poisson_gaussian" if ok else "unknown"
    if isinstance(noise, GaussianNoise):
        return "gaussian" if _scalar(noise.sigma) is not None else "unknown"
    if isinstance(noise, PoissonNoise):
        # SurePoissonLoss models y = gain * Poisson(u / gain), i.e. deepinv's normalize=True.
        ok = _scalar(noise.gain) is not None and bool(getattr(noise, "normalize", True))
        return "poisson" if ok else "unknown"
    return "unknown"


def consistency_loss(physics: Physics, y_shape: Sequence[int] | None = None,
                     rng: torch.Generator | None = None) -> Loss:
    """The noise-robust measurement-consistency loss for ``physics.noise_model`` (table above)."""
    kind = noise_kind(physics)
    noise = physics.noise_model
    if kind == "none":
        return MCLoss()
    if kind == "gaussian":
        return SureGaussianLoss(sigma=_scalar(noise.sigma), rng=rng)
    if kind == "poisson":
        return SurePoissonLoss(gain=_scalar(noise.gain), rng=rng)
    if kind == "poisson_gaussian":
        return SurePGLoss(sigma=_scalar(noise.sigma), gain=_scalar(noise.gain), rng=rng)
    mask_gen = None
    if y_shape is not None and len(y_shape) == 4:  # splitting masks need image-shaped measurements
        mask_gen = BernoulliSplittingMaskGenerator(img_size=tuple(y_shape[1:]), split_ratio=0.9, pixelwise=True,
                                                   device=rng.device if rng is not None else "cpu", rng=rng)
    return SplittingLoss(split_ratio=0.9, mask_generator=mask_gen, eval_split_input=False)


def ei_transform(physics: Physics, kind: str = "auto", rng: torch.Generator | None = None) -> nn.Module:
    """The EI transform: ``"shift"`` (10 % max), ``"rotate"`` (multiples of 90°) or ``"auto"``.

    ``auto`` picks rotations for convolution operators: they commute with shifts, so shifted
    reconstructions would teach nothing about their null space.
    """
    if kind == "auto":
        kind = "rotate" if isinstance(physics, (Blur, BlurFFT)) else "shift"
    if kind == "shift":
        return Shift(shift_max=0.1, rng=rng)
    if kind == "rotate":
        return Rotate(multiples=90, rng=rng)
    raise VisionZooError(f"unknown EI transform {kind!r}; use 'auto', 'shift' or 'rotate'.")


def choose_losses(physics: Physics, y_shape: Sequence[int] | None = None, transform: str = "auto",
                  ei_weight: float = EI_WEIGHT, seed: int = 0, device: torch.device | str = "cpu") -> list[Loss]:
    """Self-supervised losses for ``physics``: consistency loss (+ EI unless pure denoising)."""
    device = torch.device(device)
    losses = [consistency_loss(physics, y_shape, rng=torch.Generator(device).manual_seed(seed))]
    if not isinstance(physics, Denoising) and ei_weight > 0:
        t = ei_transform(physics, transform, rng=torch.Generator(device).manual_seed(seed + 1))
        losses.append(EILoss(t, weight=ei_weight))
    return losses


def _accepts_update_parameters(model: nn.Module) -> bool:
    try:
        return "update_parameters" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def _total_loss(model: nn.Module, losses: list[Loss], y: Tensor, physics: Physics) -> Tensor:
    kwargs = {"update_parameters": True} if _accepts_update_parameters(model) else {}
    x_net = model(y, physics, **kwargs)
    total = 0.0
    for loss in losses:
        total = total + loss(x_net=x_net, y=y, physics=physics, model=model).mean()
    return total


def _split(n: int, val_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    if n == 1:
        return [0], [0]
    n_val = min(n - 1, max(1, round(val_fraction * n)))
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    return sorted(order[n_val:]), sorted(order[:n_val])


def finetune(model: nn.Module, physics: Physics | Sequence[Physics], y: Tensor, *, epochs: int = 50,
             lr: float = 1e-4, val_fraction: float = 0.2, patience: int = 10,
             losses: list[Loss] | None = None, transform: str = "auto", seed: int = 0,
             log: Callable[[str], None] | None = None) -> dict:
    """Fine-tune ``model`` in place on measurements ``y`` alone (no ground truth).

    Args:
        model: a reconstructor called as ``model(y, physics)`` (e.g. a RAM-family model).
        physics: one operator for all measurements, or one per measurement.
        y: measurements ``[N, ...]``; each is used alone (batch 1).
        epochs: maximum passes over the training measurements.
        lr: Adam learning rate.
        val_fraction: held-out share of the measurements for early stopping (ignored when N = 1:
            the single measurement is both training and validation data).
        patience: stop after this many epochs without a better validation loss.
        losses: override :func:`choose_losses`.
        transform: EI transform (see :func:`ei_transform`).
        seed: seeds the split, the loss randomness and the shuffling.
        log: optional callable receiving one line per epoch.

    Returns:
        history dict: ``train_loss`` (per epoch), ``val_loss`` (index 0 = before training),
        ``best_epoch`` (0 = the initial weights were kept), ``stopped_early``, ``losses`` (names),
        ``train_indices``, ``val_indices``, ``seconds``. The model ends in eval mode with the best
        weights.
    """
    if not isinstance(y, Tensor) or y.ndim < 2:
        raise VisionZooError(f"y must be a tensor of measurements [N, ...], got {type(y).__name__}.")
    n = y.shape[0]
    physics_list = list(physics) if isinstance(physics, (list, tuple)) else [physics] * n
    if len(physics_list) != n:
        raise VisionZooError(f"got {len(physics_list)} operators for {n} measurements; pass one operator "
                             "for all measurements or one per measurement.")
    if epochs < 1 or lr <= 0 or not 0 <= val_fraction < 1:
        raise VisionZooError(f"need epochs >= 1, lr > 0 and 0 <= val_fraction < 1; got {epochs}, {lr}, "
                             f"{val_fraction}.")
    if losses is None:
        losses = choose_losses(physics_list[0], tuple(y[:1].shape), transform=transform, seed=seed,
                               device=y.device)
    net = model
    for loss in losses:
        net = loss.adapt_model(net)  # SplittingLoss wraps the model; the others return it unchanged

    train_idx, val_idx = _split(n, val_fraction, seed)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=lr)
    shuffle = torch.Generator().manual_seed(seed)

    def validate() -> float:
        net.train()  # same loss estimator as in training (one split / probe per call)
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            vals = [float(_total_loss(net, losses, y[i:i + 1], physics_list[i])) for i in val_idx]
        return sum(vals) / len(vals)

    start = time.perf_counter()
    history: dict = {"train_loss": [], "val_loss": [validate()], "best_epoch": 0, "stopped_early": False,
                     "losses": [type(loss).__name__ for loss in losses], "train_indices": train_idx,
                     "val_indices": val_idx}
    best_val, best_state, since_best = history["val_loss"][0], copy.deepcopy(model.state_dict()), 0
    for epoch in range(1, epochs + 1):
        net.train()
        running = []
        for j in torch.randperm(len(train_idx), generator=shuffle).tolist():
            i = train_idx[j]
            optimizer.zero_grad(set_to_none=True)
            loss = _total_loss(net, losses, y[i:i + 1], physics_list[i])
            if not torch.isfinite(loss):
                model.load_state_dict(best_state)
                raise NonFiniteLossError(f"fine-tuning loss became {float(loss)} at epoch {epoch}; the best "
                                         "weights so far were restored. Lower lr or check the noise level.")
            loss.backward()
            optimizer.step()
            running.append(float(loss.detach()))
        history["train_loss"].append(sum(running) / len(running))
        val = validate()
        history["val_loss"].append(val)
        if val < best_val and math.isfinite(val):
            best_val, best_state, since_best = val, copy.deepcopy(model.state_dict()), 0
            history["best_epoch"] = epoch
        else:
            since_best += 1
        if log is not None:
            log(f"epoch {epoch}: train {history['train_loss'][-1]:.5g}, val {val:.5g}")
        if since_best >= patience:
            history["stopped_early"] = True
            break
    model.load_state_dict(best_state)
    model.eval()
    history["seconds"] = time.perf_counter() - start
    return history
