"""Operator strings: one string names a forward operator, its parameters and its noise.

Grammar (whitespace around tokens is ignored, names are case-insensitive)::

    spec   := NAME [ ":" param ( "," param )* ]
    param  := KEY "=" VALUE
    noise  := "none" | "gaussian:" SIGMA | "poisson:" GAIN | "poisson_gaussian:" GAIN ":" SIGMA

``noise`` is a param like the others (``noise=gaussian:0.05``); only the first ``:`` separates the
name from the params, so the ``:`` inside a noise value is unambiguous. Booleans are
``1/0/true/false/yes/no``. Unknown names, unknown keys, bad values and repeated keys are errors
that list what is accepted. Examples::

    blur:sigma=2,noise=gaussian:0.05      Gaussian blur, std 2 px, noise std 0.05
    motion_blur:length=21                 random motion blur in a 21x21 px kernel
    inpainting:ratio=0.5                  keep a random half of the pixels
    sr:factor=2                           bicubic x2 down-sampling
    denoise:noise=poisson:0.1             Poisson noise with gain 0.1
    demosaic                              Bayer colour filter array
    mri:accel=4                           single-coil Cartesian MRI, 4x acceleration
    ct:angles=60                          parallel-beam CT with 60 angles
    cs:ratio=0.25                         compressed sensing, 25 % as many measurements as pixels

Operators (parameters with their defaults) are listed in :data:`OPERATOR_HELP`. Images are
``[B, C, H, W]`` in [0, 1]; any size works except where noted there (sr: H and W divisible by the
factor; ct: square; cs: small images). Channels: ``mri`` works on 2-channel complex images
(real, imaginary) and ``ct`` on 1-channel images; :func:`prepare_image` turns a natural image into
those (grey = ITU-R BT.601 luma; for MRI the grey image is the real part, the imaginary part is 0).
``demosaic`` needs RGB (a grey image is repeated to 3 channels). Randomness (masks, motion
kernels, CS matrices, noise draws) comes from generators seeded by ``seed``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import deepinv.physics as P
import deepinv.physics.functional as dF
import torch
from deepinv.physics.generator import (
    EquispacedMaskGenerator,
    GaussianMaskGenerator,
    MotionBlurGenerator,
    RandomMaskGenerator,
)
from torch import Tensor

from ...errors import unknown_name
from .noise import NOISE_HELP, NoiseSpec, OperatorSpecError, parse_noise

__all__ = ["OPERATORS", "OPERATOR_HELP", "OperatorSpec", "OperatorSpecError", "NoiseSpec", "parse_operator",
           "build_physics", "prepare_image", "display_image", "simulate", "operator_channels"]

# A CS matrix is m x n floats plus its pseudo-inverse; keep both well under a GB.
CS_MAX_ENTRIES = 2**24


@dataclass(frozen=True)
class Param:
    """One operator parameter: name, default, type and an optional validity check."""

    name: str
    default: Any
    kind: type
    help: str
    choices: tuple[str, ...] = ()
    check: Callable[[Any], str | None] | None = None  # returns an error message or None


@dataclass(frozen=True)
class OperatorDef:
    name: str
    summary: str
    params: tuple[Param, ...]
    default_noise: str
    channels: int | None  # the operator's image channel count, None = same as the image
    build: Callable[[OperatorSpec, tuple[int, int, int], torch.device, torch.Generator], P.LinearPhysics]
    limits: str = ""


def _positive(v: float) -> str | None:
    return None if v > 0 else "must be > 0"


def _ratio(v: float) -> str | None:
    return None if 0 < v <= 1 else "must be in (0, 1]"


def _at_least(n: int) -> Callable[[int], str | None]:
    return lambda v: None if v >= n else f"must be >= {n}"


@dataclass(frozen=True)
class OperatorSpec:
    """A parsed operator string: name, every parameter (defaults filled in) and the noise."""

    name: str
    param_items: tuple[tuple[str, Any], ...]
    noise: NoiseSpec

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.param_items)

    def __getitem__(self, key: str) -> Any:
        return self.params[key]

    @property
    def definition(self) -> OperatorDef:
        return OPERATORS[self.name]

    def __str__(self) -> str:
        parts = [f"{k}={_fmt(v)}" for k, v in self.param_items] + [f"noise={self.noise}"]
        return f"{self.name}:" + ",".join(parts)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return f"{v:g}" if isinstance(v, float) else str(v)


# ------------------------------------------------------------------------------------- builders
def _check_kernel(spec: OperatorSpec, size: int, hw: tuple[int, int]) -> None:
    if size > min(hw):
        raise OperatorSpecError(f"{spec}: the blur kernel ({size}x{size} px) is larger than the image {hw}; "
                                "use a smaller blur or a larger image.")


def _blur(spec: OperatorSpec, img: tuple[int, int, int], device: torch.device, g: torch.Generator):
    s = float(spec["sigma"])
    filt = dF.gaussian_blur(sigma=(s, s), device=device)
    _check_kernel(spec, filt.shape[-1], img[1:])
    return P.BlurFFT(img_size=img, filter=filt, device=device)


def _motion_blur(spec: OperatorSpec, img: tuple[int, int, int], device: torch.device, g: torch.Generator):
    size = int(spec["length"])
    _check_kernel(spec, size, img[1:])
    gen = MotionBlurGenerator((size, size), rng=g, device=device, l=float(spec["scale"]),
                              sigma=float(spec["spread"]))
    return P.BlurFFT(img_size=img, filter=gen.step(batch_size=1)["filter"], device=device)


def _inpainting(spec: OperatorSpec, img: tuple[int, int, int], device: torch.device, g: torch.Generator):
    return P.Inpainting(img_size=img, mask=float(spec["ratio"]), pixelwise=bool(spec["pixelwise"]),
                        device=device, rng=g)


def _sr(spec: OperatorSpec, img: tuple[int, int, int], device: torch.device, g: torch.Generator):
    f = int(spec["factor"])
    if img[1] % f or img[2] % f:
        raise OperatorSpecError(
            f"{spec}: the image size {img[1]}x{img[2]} is not divisible by the factor {f}; crop it to "
            f"{img[1] - img[1] % f}x{img[2] - img[2] % f} (or choose a factor that divides both sides).")
    return P.Downsampling(img_size=img, filter=str(spec["filter"]), factor=f, padding="circular", device=device)


def _denoise(spec: OperatorSpec, img: tuple[int, int, int], device: torch.device, g: torch.Generator):
    return P.Denoising(device=device)


def _demosaic(spec: OperatorSpec, img: tuple[int, int, int], device: torch.device, g: torch.Generator):
    return P.Demosaicing(img_size=img, pattern=str(spec["pattern"]), device=device)


_MRI_MASKS = {"gaussian": GaussianMaskGenerator, "random": RandomMaskGenerator,
              "equispaced": EquispacedMaskGenerator}


def _mri(spec: OperatorSpec, img: tuple[int, int, int], device: torch.device, g: torch.Generator):
    center = float(spec["center"])
    gen = _MRI_MASKS[str(spec["mask"])](img[1:], acceleration=int(spec["accel"]),
                                        center_fraction=center if center > 0 else None, rng=g, device=device)
    mask = gen.step(batch_size=1)["mask"]
    return P.MRI(mask=mask, img_size=img[1:], device=device)


def _ct(spec: OperatorSpec, img: tuple[int, int, int], device: torch.device, g: torch.Generator):
    if img[1] != img[2]:
        raise OperatorSpecError(f"{spec}: CT needs a square image, got {img[1]}x{img[2]}; crop or pad it to "
                                f"{min(img[1:])}x{min(img[1:])}.")
    return P.Tomography(angles=int(spec["angles"]), img_width=img[1], circle=False, normalize=True,
                        device=device)


def _cs(spec: OperatorSpec, img: tuple[int, int, int], device: torch.device, g: torch.Generator):
    n = img[1] * img[2]
    m = max(1, round(float(spec["ratio"]) * n))
    if m * n > CS_MAX_ENTRIES:
        raise OperatorSpecError(
            f"{spec}: a dense {m}x{n} sensing matrix for a {img[1]}x{img[2]} image is too large "
            f"(limit {CS_MAX_ENTRIES} entries); use images of at most about 64x64 pixels for cs.")
    phys = P.CompressedSensing(m=m, img_size=img, channelwise=True, device=device, rng=g)
    # The Gaussian matrix has spectral norm ~ 1 + sqrt(n/m); RAM expects unit-norm operators.
    scale = 1.0 + (n / m) ** 0.5
    a = phys._A / scale
    phys._A = a  # buffers: _A_adjoint was a view of _A, so each is re-set, not scaled in place
    phys._A_adjoint = a.conj().T
    phys._A_dagger = phys._A_dagger * scale
    return phys


OPERATORS: dict[str, OperatorDef] = {d.name: d for d in [
    OperatorDef("blur", "Gaussian blur, circular boundary (deepinv BlurFFT)",
                (Param("sigma", 2.0, float, "blur std in pixels", check=_positive),),
                "gaussian:0.05", None, _blur, "a kernel (about 6.7*sigma px) that fits in the image"),
    OperatorDef("motion_blur", "random motion blur, circular boundary (MotionBlurGenerator + BlurFFT)",
                (Param("length", 15, int, "kernel size in pixels (the longest blur extent)", check=_at_least(3)),
                 Param("scale", 0.3, float, "trajectory length scale (deepinv l)", check=_positive),
                 Param("spread", 0.25, float, "trajectory spread (deepinv sigma)", check=_positive)),
                "gaussian:0.01", None, _motion_blur, "a kernel that fits in the image"),
    OperatorDef("inpainting", "random pixel mask (deepinv Inpainting)",
                (Param("ratio", 0.5, float, "fraction of pixels observed", check=_ratio),
                 Param("pixelwise", True, bool, "same mask for all channels")),
                "none", None, _inpainting),
    OperatorDef("sr", "super-resolution: filter then subsample (deepinv Downsampling, circular)",
                (Param("factor", 2, int, "down-sampling factor", check=_at_least(2)),
                 Param("filter", "bicubic", str, "anti-aliasing filter",
                       choices=("bicubic", "bilinear", "gaussian", "sinc"))),
                "none", None, _sr, "H and W divisible by factor"),
    OperatorDef("denoise", "identity operator, noise only (deepinv Denoising)", (),
                "gaussian:0.1", None, _denoise),
    OperatorDef("demosaic", "colour filter array (deepinv Demosaicing)",
                (Param("pattern", "bayer", str, "filter pattern", choices=("bayer",)),),
                "none", 3, _demosaic, "RGB images"),
    OperatorDef("mri", "single-coil Cartesian MRI, k-space lines (deepinv MRI)",
                (Param("accel", 4, int, "acceleration (1 / fraction of k-space lines)", check=_at_least(1)),
                 Param("center", 0.0, float, "fully sampled centre fraction (0 = deepinv default)",
                       check=lambda v: None if 0 <= v < 1 else "must be in [0, 1)"),
                 Param("mask", "gaussian", str, "line sampling pattern", choices=tuple(_MRI_MASKS))),
                "none", 2, _mri, "2-channel complex images"),
    OperatorDef("ct", "parallel-beam CT, unit-norm Radon transform (deepinv Tomography)",
                (Param("angles", 60, int, "number of projection angles in [0, 180)", check=_at_least(1)),),
                "none", 1, _ct, "square 1-channel images"),
    OperatorDef("cs", "compressed sensing, Gaussian matrix scaled to unit norm (deepinv CompressedSensing)",
                (Param("ratio", 0.25, float, "measurements per pixel (m / n)", check=_ratio),),
                "none", None, _cs, f"m*n <= {CS_MAX_ENTRIES} (images up to ~64x64)"),
]}

# Poisson noise needs non-negative clean measurements; these operators can produce negative ones.
_SIGNED_MEASUREMENTS = {"mri", "cs"}


def _describe(d: OperatorDef) -> str:
    params = [f"{p.name}={_fmt(p.default)}" + (f" ({'|'.join(p.choices)})" if p.choices else "")
              for p in d.params] + [f"noise={d.default_noise}"]
    line = f"  {d.name:<12} {', '.join(params)}"
    notes = [d.summary] + ([f"needs {d.limits}"] if d.limits else [])
    return line + "\n" + " " * 15 + "; ".join(notes)


OPERATOR_HELP = (
    "operator string NAME[:KEY=VALUE,...], e.g. 'blur:sigma=2,noise=gaussian:0.05'. "
    "Operators and parameters (defaults shown):\n"
    + "\n".join(_describe(d) for d in OPERATORS.values())
    + f"\n  noise: {NOISE_HELP}"
)


def _parse_value(name: str, p: Param, raw: str) -> Any:
    try:
        if p.kind is bool:
            low = raw.lower()
            if low not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError
            value: Any = low in ("1", "true", "yes")
        elif p.kind is int:
            f = float(raw)
            if not f.is_integer():
                raise ValueError
            value = int(f)
        elif p.kind is float:
            value = float(raw)
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError
        else:
            value = raw.lower()
    except ValueError:
        raise OperatorSpecError(f"{name}: {p.name}={raw!r} is not a valid {p.kind.__name__} "
                                f"({p.help}; default {_fmt(p.default)}).") from None
    if p.choices and value not in p.choices:
        raise OperatorSpecError(f"{name}: {p.name}={raw!r} is not one of {', '.join(p.choices)}.")
    problem = p.check(value) if p.check else None
    if problem:
        raise OperatorSpecError(f"{name}: {p.name}={raw} {problem} ({p.help}).")
    return value


def parse_operator(text: str | OperatorSpec) -> OperatorSpec:
    """Parse an operator string (see the module docstring) into an :class:`OperatorSpec`."""
    if isinstance(text, OperatorSpec):
        return text
    if not isinstance(text, str) or not text.strip():
        raise OperatorSpecError(f"an operator string is needed, got {text!r}.\n{OPERATOR_HELP}")
    name, _, rest = text.strip().partition(":")
    name = name.strip().lower()
    if name not in OPERATORS:
        raise unknown_name("operator", name, OPERATORS, hint="\n" + OPERATOR_HELP)
    d = OPERATORS[name]
    by_name = {p.name: p for p in d.params}
    accepted = ", ".join([f"{p.name}={_fmt(p.default)}" for p in d.params] + [f"noise={d.default_noise}"])
    values: dict[str, Any] = {}
    noise_text = d.default_noise
    seen: set[str] = set()
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, raw = (t.strip() for t in item.partition("="))
        key = key.lower()
        if not eq or not raw:
            raise OperatorSpecError(f"{text!r}: {item!r} is not KEY=VALUE. {name} accepts: {accepted}.")
        if key in seen:
            raise OperatorSpecError(f"{text!r}: {key} is given twice.")
        seen.add(key)
        if key == "noise":
            noise_text = raw
        elif key in by_name:
            values[key] = _parse_value(name, by_name[key], raw)
        else:
            raise OperatorSpecError(f"{text!r}: {name} has no parameter {key!r}; it accepts: {accepted}.")
    noise = parse_noise(noise_text)
    if noise.is_poisson and name in _SIGNED_MEASUREMENTS:
        raise OperatorSpecError(f"{text!r}: {name} measurements can be negative, so Poisson noise is undefined; "
                                "use noise=gaussian:SIGMA or noise=none.")
    items = tuple((p.name, values.get(p.name, p.default)) for p in d.params)
    return OperatorSpec(name, items, noise)


def operator_channels(spec: OperatorSpec | str, image_channels: int) -> int:
    """Channels of the images the operator works on, given a natural image's channels."""
    spec = parse_operator(spec)
    return spec.definition.channels or image_channels


def _grey(x: Tensor) -> Tensor:
    if x.shape[1] == 1:
        return x
    if x.shape[1] == 3:
        w = torch.tensor([0.299, 0.587, 0.114], device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
        return (x * w).sum(1, keepdim=True)
    return x.mean(1, keepdim=True)


def prepare_image(x: Tensor, spec: OperatorSpec | str) -> Tensor:
    """Turn an image ``[B, C, H, W]`` into the operator's domain (see the module docstring)."""
    spec = parse_operator(spec)
    want = spec.definition.channels
    if want is None or x.shape[1] == want:
        return x
    if want == 1:
        return _grey(x)
    if want == 2:
        g = _grey(x)
        return torch.cat([g, torch.zeros_like(g)], dim=1)
    return _grey(x).expand(-1, want, -1, -1).contiguous()


def display_image(x: Tensor) -> Tensor:
    """``[B, C, H, W]`` -> ``[B, 1 or 3, H, W]`` for plotting (2 channels: complex magnitude)."""
    if x.shape[1] == 2:
        return x.pow(2).sum(1, keepdim=True).sqrt()
    return x[:, :3] if x.shape[1] >= 3 else x


def build_physics(spec: OperatorSpec | str, img_size: tuple[int, int, int], device: torch.device | str = "cpu",
                  seed: int = 0) -> P.LinearPhysics:
    """Build the deepinv operator (with its noise model) for images of size ``(C, H, W)``.

    ``C`` must be the operator's channel count where it has one (mri 2, ct 1, demosaic 3; see
    :func:`prepare_image`). The same ``seed`` gives the same masks/kernels/matrices and noise draws.
    """
    spec = parse_operator(spec)
    d = spec.definition
    if len(img_size) != 3 or any(int(s) <= 0 for s in img_size):
        raise OperatorSpecError(f"img_size must be (C, H, W), got {img_size}.")
    img = (int(img_size[0]), int(img_size[1]), int(img_size[2]))
    if d.channels is not None and img[0] != d.channels:
        raise OperatorSpecError(f"{spec.name} works on {d.channels}-channel images, got {img[0]} channels; "
                                "convert the image with operators.prepare_image(x, spec) first.")
    device = torch.device(device)
    op_rng = torch.Generator(device=device).manual_seed(int(seed))
    noise_rng = torch.Generator(device=device).manual_seed(int(seed) + 1_000_003)
    physics = d.build(spec, img, device, op_rng)
    physics.set_noise_model(spec.noise.build(noise_rng))
    physics.visionzoo_operator = str(spec)
    return physics


def simulate(spec: OperatorSpec | str, x: Tensor, seed: int = 0) -> tuple[Tensor, Tensor, P.LinearPhysics]:
    """Measure a natural image: returns ``(x_op, y, physics)`` with ``x_op = prepare_image(x)``."""
    spec = parse_operator(spec)
    x_op = prepare_image(x, spec)
    physics = build_physics(spec, tuple(x_op.shape[1:]), device=x.device, seed=seed)
    with torch.no_grad():
        y = physics(x_op)
    return x_op, y, physics
