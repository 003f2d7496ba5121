"""Run a model over images with part keypoints and score accuracy, consistency and stability.

A model here is anything with ``prototype_maps(images) -> (logits [B, C], {name: maps [B, M, h, w]})``
(:class:`~visionzoo.methods.ivpt.model.IVPT`, :class:`~visionzoo.methods.ivpt.vpt.VPTDeep`);
every named map set is scored, so all stages / layers come out of one pass.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader

from .interp_metrics import (
    HALF_SIZE,
    OUT_SIZE,
    PART_THRESH,
    consistency_score,
    keypoints_in_box,
    part_hits,
    peak_locations,
    perturb,
    stability_score,
)


@dataclass
class InterpSettings:
    """Protocol constants (EvalProtoPNet defaults)."""

    half_size: int = HALF_SIZE
    part_thresh: float = PART_THRESH
    noise_std: float = 0.2
    noise_clip: float = 0.25
    out_size: int = OUT_SIZE
    seed: int = 0


@torch.no_grad()
def collect_hits(model: nn.Module, loader: DataLoader, device: torch.device, settings: InterpSettings,
                 noise: bool) -> dict[str, Any]:
    """One pass: ``labels`` [N], ``preds`` [N], ``present`` [N, P] and ``hits`` {name: [N, M, P]}."""
    gen = torch.Generator().manual_seed(settings.seed)
    labels, preds, present = [], [], []
    hits: dict[str, list[Tensor]] = defaultdict(list)
    model.eval()
    for images, target, meta in loader:
        images = images.to(device)
        if noise:
            images = perturb(images, settings.noise_std, settings.noise_clip, generator=gen)
        logits, maps = model.prototype_maps(images)
        kp_yx, pres = keypoints_in_box(meta["keypoints"], meta["box"], settings.out_size)
        for name, m in maps.items():
            peaks = peak_locations(m, meta["box"], tuple(images.shape[-2:]), settings.out_size)
            hits[name].append(part_hits(peaks, kp_yx, pres, settings.half_size, settings.out_size))
        labels.append(torch.as_tensor(target).cpu())
        preds.append(logits.argmax(-1).cpu())
        present.append(pres)
    if not labels:
        raise ValueError("the interpretability set is empty.")
    return {"labels": torch.cat(labels), "preds": torch.cat(preds), "present": torch.cat(present),
            "hits": {k: torch.cat(v) for k, v in hits.items()}}


def score_model(model: nn.Module, loader: DataLoader, device: torch.device,
                settings: InterpSettings) -> dict[str, Any]:
    """Accuracy (%) and, per map set, consistency and stability (%) and prototypes per class."""
    clean = collect_hits(model, loader, device, settings, noise=False)
    noisy = collect_hits(model, loader, device, settings, noise=True)
    labels = clean["labels"]
    per_maps = {}
    for name, h in clean["hits"].items():
        con, _ = consistency_score(h, clean["present"], labels, settings.part_thresh)
        sta = stability_score(h, noisy["hits"][name], labels)
        per_maps[name] = {"consistency": con, "stability": sta, "prototypes": int(h.shape[1])}
    acc = 100.0 * (clean["preds"] == labels).float().mean().item()
    return {"acc1": acc, "images": int(labels.numel()), "classes": int(torch.unique(labels).numel()),
            "maps": per_maps}


def pick_maps(per_maps: dict[str, dict[str, float]], choice: str) -> str:
    """The map set to headline: a name, ``best`` (highest consistency, then stability) or ``last``."""
    names = list(per_maps)
    if choice == "best":
        return max(names, key=lambda n: (per_maps[n]["consistency"], per_maps[n]["stability"]))
    if choice == "last":
        return names[-1]
    if choice not in per_maps:
        raise ValueError(f"no map set {choice!r}; this model has {names}.")
    return choice
