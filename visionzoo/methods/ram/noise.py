"""Noise part of an operator string: ``none``, ``gaussian:SIGMA``, ``poisson:GAIN``,
``poisson_gaussian:GAIN:SIGMA``.

Levels are in image units (images in [0, 1]): SIGMA is the standard deviation of additive
Gaussian noise; GAIN is the Poisson gain ``γ`` of ``y = γ · Poisson(Ax / γ)`` (larger = noisier).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from deepinv.physics import GaussianNoise, PoissonGaussianNoise, PoissonNoise, ZeroNoise
from deepinv.physics.noise import NoiseModel

from ...errors import VisionZooError, unknown_name

NOISE_KINDS: dict[str, tuple[str, ...]] = {
    "none": (),
    "gaussian": ("sigma",),
    "poisson": ("gain",),
    "poisson_gaussian": ("gain", "sigma"),
}
NOISE_HELP = ("noise=none | gaussian:SIGMA | poisson:GAIN | poisson_gaussian:GAIN:SIGMA "
              "(levels in [0, 1] image units; e.g. noise=gaussian:0.05)")


class OperatorSpecError(VisionZooError, ValueError):
    """An operator string that does not parse or names invalid parameters."""


@dataclass(frozen=True)
class NoiseSpec:
    """A noise model. ``sigma``: Gaussian std; ``gain``: Poisson gain (both >= 0)."""

    kind: str = "none"
    sigma: float = 0.0
    gain: float = 0.0

    def __str__(self) -> str:
        if self.kind == "none":
            return "none"
        values = [self.gain if p == "gain" else self.sigma for p in NOISE_KINDS[self.kind]]
        return ":".join([self.kind, *(f"{v:g}" for v in values)])

    @property
    def is_poisson(self) -> bool:
        return self.kind in ("poisson", "poisson_gaussian")

    def build(self, rng: torch.Generator | None = None) -> NoiseModel:
        """The deepinv noise model; ``rng`` makes the noise draws reproducible."""
        if self.kind == "none":
            return ZeroNoise()
        if self.kind == "gaussian":
            return GaussianNoise(sigma=self.sigma, rng=rng)
        if self.kind == "poisson":
            return PoissonNoise(gain=self.gain, normalize=True, rng=rng)
        return PoissonGaussianNoise(gain=self.gain, sigma=self.sigma, rng=rng)


def parse_noise(text: str) -> NoiseSpec:
    """``"gaussian:0.05"`` -> ``NoiseSpec("gaussian", sigma=0.05)``; see :data:`NOISE_HELP`."""
    kind, *values = [t.strip() for t in text.strip().split(":")]
    kind = kind.lower()
    if kind not in NOISE_KINDS:
        raise unknown_name("noise model", kind, NOISE_KINDS, hint=f"Use {NOISE_HELP}.")
    names = NOISE_KINDS[kind]
    if len(values) != len(names):
        form = ":".join([kind, *(n.upper() for n in names)])
        raise OperatorSpecError(f"noise {text!r}: {kind} takes {len(names)} value(s) ({form}), got "
                                f"{len(values)}. Use {NOISE_HELP}.")
    levels: dict[str, float] = {}
    for name, raw in zip(names, values, strict=True):
        try:
            v = float(raw)
        except ValueError:
            raise OperatorSpecError(f"noise {text!r}: {name} must be a number, got {raw!r}.") from None
        if not math.isfinite(v) or v < 0:
            raise OperatorSpecError(f"noise {text!r}: {name} must be a finite number >= 0, got {raw}.")
        levels[name] = v
    if kind == "poisson" and levels["gain"] == 0:
        raise OperatorSpecError(f"noise {text!r}: the Poisson gain must be > 0 (use noise=none for no noise).")
    return NoiseSpec(kind, sigma=levels.get("sigma", 0.0), gain=levels.get("gain", 0.0))
