"""Concept prototypes: part maps, region aggregation, fine-to-final grouping and the prompts they make.

Shapes: ``B`` images, ``D`` feature width, ``H x W`` token grid, ``n`` prototypes of a stage (the
last one is background), ``K`` final foreground parts.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class PrototypeStage(nn.Module):
    """``n`` prototype vectors q [n, D] (init N(0, 0.05)) and a spatial bias b [n, H, W] (init 0)."""

    def __init__(self, n: int, dim: int, grid: tuple[int, int], init_std: float = 0.05):
        super().__init__()
        self.prototypes = nn.Parameter(torch.randn(n, dim) * init_std)
        self.spatial_bias = nn.Parameter(torch.zeros(n, *grid))

    def forward(self, e: Tensor) -> Tensor:
        """Features ``e`` [B, D, H, W] -> maps A [B, n, H, W] = softmax_k(-||e - q_k||^2 + b_k).

        ``||e||^2`` is the same for every k and cancels in the softmax, so it is left out.
        """
        q = self.prototypes.to(e.dtype)
        logits = 2 * torch.einsum("bdhw,nd->bnhw", e, q) - q.pow(2).sum(-1)[None, :, None, None]
        return (logits + self.spatial_bias.to(e.dtype)).float().softmax(dim=1)


def region_features(maps: Tensor, e: Tensor) -> tuple[Tensor, Tensor]:
    """Mean feature of the region each prototype wins, weighted by its map.

    ``maps`` [B, n, H, W], ``e`` [B, D, H, W] -> features [B, n, D] and pixel counts [B, n].
    Weights are ``onehot(argmax_k A) * A``; a prototype that wins no pixel gets a zero feature
    and count 0.
    """
    n = maps.shape[1]
    hard = F.one_hot(maps.argmax(dim=1), n).permute(0, 3, 1, 2).to(maps.dtype)  # [B, n, H, W]
    w = hard * maps
    total = w.sum(dim=(2, 3))  # [B, n]
    feats = torch.einsum("bnhw,bdhw->bnd", w, e.to(w.dtype))
    feats = feats / torch.where(total > 0, total, torch.ones_like(total))[..., None]
    return feats, hard.sum(dim=(2, 3))


class Grouping(nn.Module):
    """Soft assignment G [B, p, K] of a stage's ``p`` foreground prototypes to the ``K`` final parts.

    Training uses a soft gumbel-softmax (temperature ``tau``); evaluation a plain softmax, so
    evaluation is deterministic. Prototypes that won no pixel get a uniform row 1/K.
    """

    def __init__(self, dim: int, parts: int, tau: float = 1.0, gumbel: bool = True):
        super().__init__()
        self.linear = nn.Linear(dim, parts)
        self.tau, self.gumbel = tau, gumbel

    def forward(self, feats: Tensor, counts: Tensor) -> Tensor:
        """``feats`` [B, p, D], ``counts`` [B, p] -> G [B, p, K]."""
        logits = self.linear(feats).float()
        if self.training and self.gumbel:
            g = F.gumbel_softmax(logits, tau=self.tau, hard=False, dim=-1)
        else:
            g = logits.softmax(dim=-1)
        uniform = torch.full_like(g, 1.0 / g.shape[-1])
        return torch.where((counts == 0)[..., None], uniform, g)


class PromptProjector(nn.Module):
    """Part prompts from grouped region features: LayerNorm over [K, D], then Linear(D, D)."""

    def __init__(self, dim: int, parts: int):
        super().__init__()
        self.norm = nn.LayerNorm([parts, dim])
        self.proj = nn.Linear(dim, dim)
        nn.init.trunc_normal_(self.proj.weight, std=0.02)
        nn.init.zeros_(self.proj.bias)

    def forward(self, feats: Tensor, grouping: Tensor) -> Tensor:
        """``feats`` [B, p, D], ``grouping`` [B, p, K] (used detached) -> prompts [B, K, D]."""
        g = grouping.detach().to(feats.dtype)
        pooled = torch.einsum("bpk,bpd->bkd", g, feats) / g.sum(dim=1).clamp_min(1e-6)[..., None]
        return self.proj(self.norm(pooled))


def group_maps(maps: Tensor, grouping: Tensor) -> Tensor:
    """Fine maps [B, n, H, W] grouped into the final parts: [B, K + 1, H, W] (background last)."""
    fg = torch.einsum("bpk,bphw->bkhw", grouping.to(maps.dtype), maps[:, :-1])
    return torch.cat([fg, maps[:, -1:]], dim=1)


def kmeans(x: Tensor, k: int, iters: int = 20, generator: torch.Generator | None = None) -> Tensor:
    """Centroids [k, D] of points ``x`` [N, D] (k-means++ seeding, then Lloyd iterations).

    An empty cluster keeps its previous centroid.
    """
    x = x.float()
    first = int(torch.randint(len(x), (1,), generator=generator))
    centres = [x[first]]
    d2 = (x - x[first]).pow(2).sum(-1)
    for _ in range(1, k):
        pick = int(torch.multinomial(d2.clamp_min(1e-12), 1, generator=generator))
        centres.append(x[pick])
        d2 = torch.minimum(d2, (x - x[pick]).pow(2).sum(-1))
    c = torch.stack(centres)
    for _ in range(iters):
        assign = torch.cdist(x, c).argmin(dim=1)
        sums = torch.zeros_like(c).index_add_(0, assign, x)
        counts = torch.bincount(assign, minlength=k).to(x.dtype)[:, None]
        c = torch.where(counts > 0, sums / counts.clamp_min(1), c)
    return c


def border_mask(grid: tuple[int, int], device: torch.device | None = None) -> Tensor:
    """Bool [H, W]: the outermost ring of the token grid."""
    m = torch.zeros(grid, dtype=torch.bool, device=device)
    m[0], m[-1], m[:, 0], m[:, -1] = True, True, True, True
    return m


@torch.no_grad()
def kmeans_prototypes(e: Tensor, n: int, iters: int = 20, generator: torch.Generator | None = None,
                      over: int = 4) -> Tensor:
    """Data-driven prototypes [n, D] from features ``e`` [B, D, H, W], background last.

    Unsupervised (no part labels): ``over * n`` k-means clusters of all patches; a cluster whose
    patches lie on the grid border at least half as often as patches do overall is background (the
    object sits inside the image). The background prototype is the mean of the background patches;
    ``n - 1``-means of the other patches give the foreground prototypes.
    """
    b, d, h, w = e.shape
    x = e.permute(0, 2, 3, 1).reshape(-1, d).float()
    ring = border_mask((h, w), e.device).expand(b, h, w).reshape(-1)
    k = min(over * n, len(x))
    assign = torch.cdist(x, kmeans(x, k, iters, generator)).argmin(dim=1)
    on_ring = torch.bincount(assign[ring], minlength=k).float() / torch.bincount(assign, minlength=k).clamp_min(1)
    is_bg = (on_ring >= 0.5 * ring.float().mean())[assign]
    if is_bg.all() or (~is_bg).sum() < n - 1:
        is_bg = torch.zeros_like(is_bg)
        is_bg[ring] = True
    return torch.cat([kmeans(x[~is_bg], n - 1, iters, generator), x[is_bg].mean(0, keepdim=True)])
