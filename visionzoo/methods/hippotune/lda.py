"""A streaming linear discriminant over the features of a class-incremental run (no exemplars kept).

Class means and one covariance shared by all classes, both accumulated task after task from running
sums (``Σ x`` per class, ``Σ xxᵀ`` overall): after the last task they equal what a joint fit on all
training features would give, provided the features of earlier tasks have not moved since (true for a
frozen backbone and for HippoTune with ``memory_partitions=1``). Prediction::

    Σ̂ = S_within / N + s · tr(S_within / N) / d · I      (shrinkage s)
    logit_c(x) = μ_cᵀ Σ̂⁻¹ x − ½ μ_cᵀ Σ̂⁻¹ μ_c

This is the second-order classifier of the pretrained-model CIL literature (the class means with a
shared covariance of FeCAM / RanPAC, without the random projection). No library ships a streaming
version with these buffers, hence this file; the solve is ``torch.linalg``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class StreamingLDA(nn.Module):
    """Shared-covariance LDA over ``num_classes`` classes of ``dim``-wide features.

    Buffers (saved with the model, float64): ``sums`` ``[C, d]``, ``counts`` ``[C]``, ``second`` ``[d, d]``.
    """

    def __init__(self, dim: int, num_classes: int, shrinkage: float = 1e-3):
        super().__init__()
        if shrinkage < 0:
            raise ValueError(f"lda_shrinkage must be >= 0, got {shrinkage}")
        self.shrinkage = float(shrinkage)
        self.register_buffer("sums", torch.zeros(num_classes, dim, dtype=torch.float64))
        self.register_buffer("counts", torch.zeros(num_classes, dtype=torch.float64))
        self.register_buffer("second", torch.zeros(dim, dim, dtype=torch.float64))
        self._solved: tuple[Tensor, Tensor] | None = None

    @property
    def fitted(self) -> bool:
        return bool(self.counts.sum() > 0)

    @torch.no_grad()
    def update(self, features: Tensor, labels: Tensor) -> None:
        """Add ``features`` ``[N, d]`` of classes ``labels`` ``[N]``."""
        x = features.to(self.sums.dtype)
        self.sums.index_add_(0, labels, x)
        self.counts.index_add_(0, labels, torch.ones_like(labels, dtype=self.counts.dtype))
        self.second.add_(x.t() @ x)
        self._solved = None

    @torch.no_grad()
    def solve(self) -> tuple[Tensor, Tensor]:
        """``(W [C, d], b [C])`` of the current statistics (rows of classes without data are 0)."""
        n = self.counts.sum().clamp_min(1.0)
        seen = self.counts > 0
        means = self.sums / self.counts.clamp_min(1.0)[:, None]
        # within-class scatter = Σ xxᵀ − Σ_c n_c μ_c μ_cᵀ
        within = self.second - (means * self.counts[:, None]).t() @ means
        cov = within / n
        d = cov.shape[0]
        cov = cov + self.shrinkage * cov.trace().clamp_min(1e-12) / d * torch.eye(d, dtype=cov.dtype, device=cov.device)
        weights = torch.linalg.solve(cov, means.t()).t() * seen[:, None]  # [C, d]
        bias = -0.5 * (weights * means).sum(dim=1)
        return weights, bias

    def forward(self, features: Tensor) -> Tensor:
        """``[B, d]`` -> logits ``[B, C]`` (in the features' dtype)."""
        if self._solved is None or self._solved[0].device != features.device:
            self._solved = self.solve()
        weights, bias = self._solved
        return (features.to(weights.dtype) @ weights.t() + bias).to(features.dtype)

    def _load_from_state_dict(self, *args, **kwargs):  # new statistics: solve again
        self._solved = None
        super()._load_from_state_dict(*args, **kwargs)

    def extra_repr(self) -> str:
        return f"classes={self.sums.shape[0]}, dim={self.sums.shape[1]}, shrinkage={self.shrinkage}"
