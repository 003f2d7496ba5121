"""The classifier over all classes of a class-incremental run: linear or cosine, with optional
class-mean initialisation of each task's rows.

With logits masked to the current task in training, nothing calibrates the rows of different tasks
against each other; a cosine head (rows and features on the unit sphere, a fixed scale) removes
the norm part of that mismatch, and initialising a task's rows with its class means (computed on
the current task's images only; no buffer) starts them where SimpleCIL's prototypes would be.
Measurements: docs/hippotune.md.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

HEAD_KINDS = ("linear", "cosine")


class ClassifierHead(nn.Module):
    """``[B, d]`` features -> ``[B, C]`` logits.

    Args:
        dim: feature width ``d``.
        num_classes: classes of the whole run ``C``.
        kind: ``"linear"`` (``W f + b``) or ``"cosine"`` (``s · cos(f, w_c)``).
        scale: ``s`` of the cosine head.
    """

    def __init__(self, dim: int, num_classes: int, kind: str = "cosine", scale: float = 16.0):
        super().__init__()
        if kind not in HEAD_KINDS:
            raise ValueError(f"head must be one of {HEAD_KINDS}, got {kind!r}")
        self.kind, self.scale = kind, float(scale)
        self.weight = nn.Parameter(torch.empty(num_classes, dim))
        self.bias = nn.Parameter(torch.zeros(num_classes)) if kind == "linear" else None
        # a cosine row's norm is free and sets Adam's relative step: unit-size coordinates (norm √d)
        nn.init.trunc_normal_(self.weight, std=1.0 if kind == "cosine" else 0.02)

    def forward(self, x: Tensor) -> Tensor:
        if self.kind == "cosine":
            return self.scale * F.normalize(x, dim=-1) @ F.normalize(self.weight, dim=-1).t()
        return F.linear(x, self.weight, self.bias)

    @torch.no_grad()
    def init_rows(self, labels: Tensor, means: Tensor) -> None:
        """Set the rows of ``labels`` ``[K]`` to the class means ``means`` ``[K, d]`` (unit norm for the
        cosine head; for the linear head scaled so that the logits start at a cosine-like range)."""
        rows = F.normalize(means.to(self.weight), dim=-1)
        if self.kind == "cosine":
            rows = rows * math.sqrt(rows.shape[-1])  # unit-size coordinates, as at construction
        else:
            rows = rows * self.scale / means.norm(dim=-1).mean().clamp_min(1e-6)
            self.bias[labels] = 0.0
        self.weight[labels] = rows

    def extra_repr(self) -> str:
        return f"kind={self.kind}, classes={self.weight.shape[0]}, dim={self.weight.shape[1]}" + (
            f", scale={self.scale}" if self.kind == "cosine" else "")
