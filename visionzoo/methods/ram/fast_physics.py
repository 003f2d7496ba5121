"""Faster multiscale operators ``A_s = A U_s`` for RAM (built by deepinv at every call).

deepinv's ``LinearPhysicsMultiScaler`` builds three ``Upsampling(filter="sinc", padding="circular")``
operators per forward pass; each of their calls recomputes the filter's full-size FFT (unused by
the spatial filtering) and runs a depthwise spatial convolution with an 8x8, 16x16 or 32x32 kernel;
at 256x256 on CPU that is about a fifth of RAM's run time. Two replacements:

* :class:`CachedSincUpsampling`: deepinv's operator, built once per image size and without the
  per-call FFT recomputation: bit-identical results.
* :class:`CircularSincResampler`: the same circular convolutions applied in the Fourier domain with a
  transfer function computed once per image size: equal to float32 rounding (about 1e-6), faster.
"""

from __future__ import annotations

from collections import OrderedDict

import deepinv.physics.functional as dF
import torch
from deepinv.physics import LinearPhysics, LinearPhysicsMultiScaler, Physics
from deepinv.physics.blur import Upsampling
from torch import Tensor

# deepinv.physics.PhysicsMultiScaler's default factors for scales 1, 2, 3.
SCALE_FACTORS = (2, 4, 8)


class CachedSincUpsampling(Upsampling):
    """deepinv's ``Upsampling(img_size, filter="sinc", factor=f)`` that skips the filter-FFT refresh
    each ``A``/``A_adjoint`` call does when no new filter or factor is passed (the FFT only serves
    ``prox_l2``, which RAM does not call on it)."""

    def __init__(self, img_size: tuple[int, ...], factor: int, device: torch.device | str = "cpu",
                 dtype: torch.dtype | None = None):
        # built exactly as LinearPhysicsMultiScaler does: on the CPU, then moved
        super().__init__(img_size=img_size, filter="sinc", factor=factor)
        self.to(device=device, dtype=dtype)

    def update_parameters(self, filter=None, factor=None, **kwargs) -> None:
        if filter is None and factor is None:
            return
        super().update_parameters(filter=filter, factor=factor, **kwargs)


class CircularSincResampler(LinearPhysics):
    """``U``: coarse ``[B, C, H/f, W/f]`` -> fine ``[B, C, H, W]`` (zero insertion, then circular sinc filter).

    The same operator as ``deepinv.physics.Upsampling(img_size, filter="sinc", factor=f,
    padding="circular")``; ``A_adjoint`` is the matching filter-then-subsample.

    Args:
        img_size: fine image size ``(C, H, W)``; ``H`` and ``W`` must be multiples of ``factor``.
        factor: upsampling factor ``f``.
    """

    def __init__(self, img_size: tuple[int, ...], factor: int, device: torch.device | str = "cpu",
                 dtype: torch.dtype = torch.float32):
        super().__init__(device=device)
        self.factor = int(factor)
        self.hw = (int(img_size[-2]), int(img_size[-1]))
        if self.hw[0] % self.factor or self.hw[1] % self.factor:
            raise ValueError(f"image size {self.hw} is not a multiple of the resampling factor {self.factor}.")
        # Impulse response of deepinv's own spatial filter: same centring convention by construction.
        filt = dF.sinc_filter(self.factor, length=4 * self.factor, device=device).to(dtype)
        delta = torch.zeros(1, 1, *self.hw, device=device, dtype=dtype)
        delta[..., 0, 0] = 1
        kernel = dF.conv2d(delta, filt, padding="circular")
        self.transfer = torch.fft.rfft2(kernel)  # [1, 1, H, W//2+1], not a buffer: rebuilt per size
        self.dtype = dtype

    def A(self, x: Tensor, **kwargs) -> Tensor:
        """``[B, C, H/f, W/f]`` -> ``[B, C, H, W]``."""
        f = self.factor
        x = x.to(self.dtype)  # under bf16 autocast features arrive in bf16; FFTs run in float32
        z = x.new_zeros(*x.shape[:-2], *self.hw)
        z[..., ::f, ::f] = x
        return torch.fft.irfft2(torch.fft.rfft2(z) * self.transfer.conj(), s=self.hw)

    def A_adjoint(self, y: Tensor, **kwargs) -> Tensor:
        """``[B, C, H, W]`` -> ``[B, C, H/f, W/f]``."""
        f = self.factor
        y = y.to(self.dtype)
        return torch.fft.irfft2(torch.fft.rfft2(y) * self.transfer, s=self.hw)[..., ::f, ::f]


class PrebuiltMultiScaler(LinearPhysicsMultiScaler):
    """``LinearPhysicsMultiScaler`` with given (cached) resamplers for scales 1, 2, 3."""

    def __init__(self, physics: Physics, img_size: tuple[int, ...], resamplers: list[LinearPhysics],
                 device: torch.device | str = "cpu"):
        super().__init__(physics, img_size, factors=(), device=device)
        self.factors = tuple(r.factor for r in resamplers)
        self.upsamplings = list(resamplers)


class ResamplerCache:
    """Resamplers per (kind, size, device, dtype): filters and transfer functions are built once per
    image size instead of at every forward pass."""

    def __init__(self, max_entries: int = 8):
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple, list[LinearPhysics]] = OrderedDict()

    def get(self, img_size: tuple[int, ...], device: torch.device, dtype: torch.dtype | None,
            fft: bool) -> list[LinearPhysics]:
        """``fft=True``: :class:`CircularSincResampler`; else :class:`CachedSincUpsampling`
        (``dtype=None`` keeps deepinv's filter dtype)."""
        key = (fft, tuple(int(s) for s in img_size), str(device), dtype)
        if key in self._entries:
            self._entries.move_to_end(key)
            return self._entries[key]
        if fft:
            entry = [CircularSincResampler(img_size, f, device=device, dtype=dtype or torch.float32)
                     for f in SCALE_FACTORS]
        else:
            entry = [CachedSincUpsampling(tuple(img_size), f, device=device, dtype=dtype) for f in SCALE_FACTORS]
        self._entries[key] = entry
        if len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return entry

    def clear(self) -> None:
        self._entries.clear()
