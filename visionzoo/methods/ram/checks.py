"""Input checks for RAM-family reconstructors, with errors that say what to do.

deepinv's RAM fails deep inside the network (``ValueError: 4 is not in list``, shape errors in an
FFT, NaN outputs) when given inputs it cannot handle; these checks run first and name the cause.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from deepinv.physics import LinearPhysics, Physics
from deepinv.utils.tensorlist import TensorList
from torch import Tensor

from ...errors import VisionZooError


class RAMInputError(VisionZooError, ValueError):
    """A measurement, operator or noise level that a RAM-family model cannot use."""


class UnsupportedChannelsError(RAMInputError):
    """The image has a channel count the network has no head for."""


class NonFiniteMeasurementError(RAMInputError):
    """The measurement holds NaN or Inf values."""


class OperatorShapeError(RAMInputError):
    """The operator was built for a different image/measurement size than the one given."""


class NoiseLevelError(RAMInputError):
    """A negative or non-finite noise level (sigma or Poisson gain)."""


def _tensors(y: Tensor | TensorList) -> list[Tensor]:
    return list(y) if isinstance(y, TensorList) else [y]


def _shapes(y: Tensor | TensorList) -> list[tuple[int, ...]]:
    return [tuple(t.shape) for t in _tensors(y)]


def check_measurement(y: Tensor | TensorList) -> None:
    """``y``: ``[B, ...]`` real tensor (or deepinv TensorList) with finite values."""
    if not isinstance(y, (Tensor, TensorList)):
        raise RAMInputError(f"the measurement must be a torch.Tensor [B, C, H, W] (or a deepinv TensorList), "
                            f"got {type(y).__name__}.")
    for t in _tensors(y):
        if t.is_complex():
            raise RAMInputError("complex measurements are not supported: pass complex data as 2 real "
                                "channels [B, 2, H, W] (real, imaginary), as deepinv's MRI operator does.")
        if not t.is_floating_point():
            raise RAMInputError(f"the measurement must be a floating-point tensor, got dtype {t.dtype}; "
                                "convert it with y.float().")
        if t.ndim < 2 or t.numel() == 0:
            raise RAMInputError(f"the measurement must have a batch dimension and be non-empty ([B, ...]), "
                                f"got shape {tuple(t.shape)}; add one with y.unsqueeze(0).")
        if not torch.isfinite(t).all():
            n_nan = int(torch.isnan(t).sum())
            n_inf = int(torch.isinf(t).sum())
            raise NonFiniteMeasurementError(
                f"the measurement holds {n_nan} NaN and {n_inf} Inf values (shape {tuple(t.shape)}); "
                "RAM cannot reconstruct from them. Replace them (e.g. torch.nan_to_num) and, if those "
                "entries are missing data, mark them unobserved with an Inpainting mask instead.")


def check_noise_level(name: str, value: float | Tensor | None) -> None:
    """A noise level (sigma, gain) must be finite and >= 0; ``None`` means 'read it from the physics'."""
    if value is None:
        return
    if isinstance(value, TensorList):
        vs = list(value)
    elif isinstance(value, Tensor):
        vs = [value]
    else:
        vs = [torch.as_tensor(value, dtype=torch.float64)]
    for t in vs:
        if not torch.isfinite(t).all():
            raise NoiseLevelError(f"the noise level {name}={value} is not finite; pass a number >= 0.")
        if (t < 0).any():
            raise NoiseLevelError(f"the noise level {name}={value} is negative; noise standard deviations and "
                                  f"Poisson gains are >= 0 (use 0 for noiseless data).")


def check_physics(physics: Physics | None, sigma: float | Tensor | None, gain: float | Tensor | None) -> None:
    """The operator must be linear and its noise model's levels valid."""
    check_noise_level("sigma", sigma)
    check_noise_level("gain", gain)
    if physics is None:
        return
    if not isinstance(physics, LinearPhysics):
        raise RAMInputError(f"RAM needs a linear operator (a deepinv LinearPhysics with A and A_adjoint), got "
                            f"{type(physics).__name__}. Use visionzoo.methods.ram.operators.build_physics "
                            "or a deepinv.physics.LinearPhysics subclass.")
    noise = getattr(physics, "noise_model", None)
    for attr in ("sigma", "gain"):
        if noise is not None and hasattr(noise, attr):
            check_noise_level(f"physics.noise_model.{attr}", getattr(noise, attr))


def _declared_image_size(physics: Physics) -> tuple[int, ...] | None:
    for attr in ("img_shape", "img_size"):
        v = getattr(physics, attr, None)
        if v is not None:
            return tuple(int(s) for s in v)
    return None


def image_shape(y: Tensor | TensorList, physics: Physics) -> torch.Size:
    """Shape ``[B, C, H, W]`` of ``Aᵀy``, checking that the operator fits ``y`` both ways.

    Raises:
        OperatorShapeError: ``Aᵀy`` fails, or ``A(Aᵀy)`` does not have the shape of ``y``.
    """
    declared = _declared_image_size(physics)
    where = f" (the operator was built for images of size {declared})" if declared else ""
    try:
        with torch.no_grad():
            x0 = physics.A_adjoint(y)
            y_back = physics.A(x0)
    except (RuntimeError, ValueError, IndexError) as e:
        raise OperatorShapeError(
            f"the operator {type(physics).__name__} cannot be applied to a measurement of shape "
            f"{_shapes(y)}{where}: {type(e).__name__}: {str(e).splitlines()[0][:200]}. Build the operator "
            "for this image size (operators.build_physics(spec, (C, H, W))) or resize the data.") from e
    if _shapes(y_back) != _shapes(y):
        raise OperatorShapeError(
            f"the measurement has shape {_shapes(y)} but the operator {type(physics).__name__} produces "
            f"measurements of shape {_shapes(y_back)}{where}. Build the operator for the image size the "
            "measurement came from.")
    return x0.shape


def check_channels(channels: int, supported: Sequence[int]) -> None:
    """The network has heads for ``supported`` channel counts only."""
    if channels not in supported:
        raise UnsupportedChannelsError(
            f"the image has {channels} channels but this network only has heads for {sorted(supported)} "
            "channels (1 = grey, 2 = complex as real/imag, 3 = RGB). Convert the image (e.g. to grey "
            "with operators.prepare_image) or build the model with in_channels including "
            f"{channels} and train it.")
