"""PSNR/SSIM of several reconstructors on several operators over a list of images.

Every method sees the same measurement of an image (the operator and noise are seeded by
``seed + image index``). Metrics are deepinv's ``PSNR``/``SSIM`` on reconstructions clamped to
[0, 1]; 2-channel (complex) images are compared by magnitude.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import torch
from deepinv.loss.metric import PSNR, SSIM
from deepinv.physics import LinearPhysics
from torch import Tensor

from .operators import parse_operator, simulate

Reconstructor = Callable[[Tensor, LinearPhysics], Tensor]


@dataclass
class EvalRow:
    """One (operator, method, image) result. ``seconds``: wall time of the reconstruction."""

    operator: str
    method: str
    image: str
    psnr: float
    ssim: float
    seconds: float


@dataclass
class Example:
    """What the figure grid shows for one operator: measurement, ``Aᵀy``, outputs and truth."""

    operator: str
    image: str
    measurement: Tensor
    adjoint: Tensor
    outputs: dict[str, Tensor]
    truth: Tensor


@dataclass
class EvalResult:
    rows: list[EvalRow] = field(default_factory=list)
    examples: list[Example] = field(default_factory=list)

    def row_dicts(self) -> list[dict]:
        return [asdict(r) for r in self.rows]

    def summary(self) -> list[dict]:
        """Mean PSNR/SSIM/seconds per (operator, method), in first-seen order."""
        groups: dict[tuple[str, str], list[EvalRow]] = {}
        for r in self.rows:
            groups.setdefault((r.operator, r.method), []).append(r)
        out = []
        for (op, method), rs in groups.items():
            n = len(rs)
            out.append({"operator": op, "method": method, "images": n,
                        "psnr": sum(r.psnr for r in rs) / n, "ssim": sum(r.ssim for r in rs) / n,
                        "seconds": sum(r.seconds for r in rs) / n})
        return out


def _metrics(complex_images: bool) -> tuple[PSNR, SSIM]:
    return PSNR(max_pixel=1.0, complex_abs=complex_images), SSIM(max_pixel=1.0, complex_abs=complex_images)


def evaluate(methods: Mapping[str, Reconstructor], operators: Sequence[str],
             images: Mapping[str, Tensor] | Sequence[Tensor], seed: int = 0, device: torch.device | str = "cpu",
             examples_per_operator: int = 1) -> EvalResult:
    """Run every method on every (operator, image) pair.

    Args:
        methods: name -> ``f(y, physics)`` (RAM models, :mod:`.baselines`).
        operators: operator strings (:mod:`.operators`).
        images: name -> image ``[C, H, W]`` or ``[1, C, H, W]`` in [0, 1] (a list is named by index).
        seed: base seed of operators and noise.
        examples_per_operator: how many images per operator to keep for the figure grid.
    """
    named = images if isinstance(images, Mapping) else {str(i): im for i, im in enumerate(images)}
    result = EvalResult()
    for op_text in operators:
        spec = parse_operator(op_text)
        for idx, (img_name, img) in enumerate(named.items()):
            x = (img if img.ndim == 4 else img.unsqueeze(0)).to(device=device, dtype=torch.float32)
            x_op, y, physics = simulate(spec, x, seed=seed + idx)
            psnr, ssim = _metrics(x_op.shape[1] == 2)
            outputs = {}
            for name, method in methods.items():
                start = time.perf_counter()
                with torch.no_grad():
                    x_hat = method(y, physics)
                seconds = time.perf_counter() - start
                x_hat = x_hat.float().clamp(0, 1)
                outputs[name] = x_hat
                result.rows.append(EvalRow(str(spec), name, img_name, float(psnr(x_hat, x_op).mean()),
                                           float(ssim(x_hat, x_op).mean()), seconds))
            if idx < examples_per_operator:
                with torch.no_grad():
                    adj = physics.A_adjoint(y)
                result.examples.append(Example(str(spec), img_name, y.detach().cpu(), adj.cpu(),
                                               {k: v.cpu() for k, v in outputs.items()}, x_op.cpu()))
    return result
