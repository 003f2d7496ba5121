"""One evaluation harness for FGA and its baselines: the same images, the same views, the same image
features for every method; accuracy per dataset, seconds per image and peak memory per method.

Per batch of images: the views are made once (one batched call on the device), the original views
and the augmented views are encoded separately (so single-view methods are charged for the
original view only), then each method's head runs on the shared features. A method's seconds per
image = (its share of view making and image encoding + its head) / images; its once-per-class-set
cost (text encoding, STSS's perturbed prompt sets) is reported apart as ``setup_s``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.data import Dataset

from ...data import TTAViews
from ...errors import VisionZooError
from .cocoop import TEXT_CHUNK
from .costs import Meter
from .model import PromptCLIP
from .predictors import (
    STSS,
    TPT,
    ConditionalPromptHead,
    Prediction,
    Predictor,
    SinglePrompt,
    TemplateEnsemble,
    Zero,
    encode_views,
)

# method -> (prompt it starts from, predictor kind); in the order of the paper's Table 1.
METHODS: dict[str, tuple[str | None, str]] = {
    "zeroshot": ("zeroshot", "single"),
    "zeroshot-ensemble": (None, "ensemble"),
    "coop": ("coop", "single"),
    "cocoop": ("cocoop", "cocoop"),
    "tpt": ("zeroshot", "tpt"),
    "zero": ("zeroshot", "zero"),
    "tpt+coop": ("coop", "tpt"),
    "zero+coop": ("coop", "zero"),
    "sapt": ("sapt", "single"),
    "stss": ("zeroshot", "stss"),
    "stss+coop": ("coop", "stss"),
    "fga": ("sapt", "stss"),
}
PROMPT_SOURCES = {"zeroshot": "the init phrase (zero-shot CLIP)", "coop": "a CoOp checkpoint (--coop-pretrained)",
                  "cocoop": "a CoCoOp checkpoint (--cocoop-pretrained)",
                  "sapt": "a SAPT checkpoint (--pretrained of a train.py fga run or an fga_* card)"}


@dataclass
class HeadSettings:
    """Hyper-parameters of the test-time methods."""

    stss_r: int = 8
    stss_keep: int = 6
    stss_rho: float = 0.5
    stss_lambda: float = 1.0
    stss_seed: int = 0
    tpt_lr: float = 5e-3
    tpt_steps: int = 1
    tpt_keep: float = 0.1
    tpt_class_chunk: int | None = None
    zero_keep: float = 0.3
    cocoop_chunk: int | None = TEXT_CHUNK


def resolve_methods(requested: Sequence[str], prompts: dict[str, Any]) -> list[str]:
    """Expand ``all`` (every method whose prompt is available) and check explicit requests."""
    if "all" in requested:
        return [m for m, (p, _) in METHODS.items() if p is None or prompts.get(p) is not None]
    out = []
    for m in requested:
        if m not in METHODS:
            raise VisionZooError(f"unknown method {m!r}; choose from {', '.join(METHODS)} or all.")
        p = METHODS[m][0]
        if p is not None and prompts.get(p) is None:
            raise VisionZooError(f"method {m!r} needs a prompt from {PROMPT_SOURCES[p]}.")
        out.append(m)
    return list(dict.fromkeys(out))


def build_predictors(methods: Sequence[str], prompts: dict[str, Any], s: HeadSettings) -> list[Predictor]:
    """One predictor per method, on the contexts in ``prompts`` (``zeroshot``/``coop``/``sapt`` tensors,
    ``cocoop`` a :class:`~.cocoop.ConditionalPrompt`)."""
    out: list[Predictor] = []
    for m in methods:
        key, kind = METHODS[m]
        ctx = prompts[key] if key else None
        if kind == "single":
            out.append(SinglePrompt(m, ctx))
        elif kind == "cocoop":
            out.append(ConditionalPromptHead(m, ctx, s.cocoop_chunk))
        elif kind == "ensemble":
            out.append(TemplateEnsemble(m))
        elif kind == "zero":
            out.append(Zero(m, ctx, s.zero_keep))
        elif kind == "stss":
            out.append(STSS(m, ctx, s.stss_r, s.stss_keep, s.stss_rho, s.stss_lambda, s.stss_seed))
        elif kind == "tpt":
            out.append(TPT(m, ctx, s.tpt_lr, s.tpt_steps, s.tpt_keep, s.tpt_class_chunk))
    return out


SWEEP_KEYS = {"rho": "stss_rho", "keep": "stss_keep", "r": "stss_r", "lambda": "stss_lambda", "seed": "stss_seed"}


def sweep_predictors(entries: Sequence[str], methods: Sequence[str], prompts: dict[str, torch.Tensor | None],
                     s: HeadSettings) -> list[Predictor]:
    """Extra STSS predictors, one per ``entries`` item such as ``"rho=0.2,keep=10"``, on the prompt of
    the first of ``fga``/``stss+coop``/``stss`` in ``methods`` (named e.g. ``fga@rho=0.2,keep=10``).
    They share the views and image features of the run, so a sweep costs only their heads."""
    base = next((m for m in ("fga", "stss+coop", "stss") if m in methods), None)
    if entries and base is None:
        raise VisionZooError("--stss-sweep needs one of the methods fga, stss+coop or stss.")
    out: list[Predictor] = []
    for entry in entries:
        values = dict(s.__dict__)
        for item in entry.split(","):
            key, _, val = item.partition("=")
            if key.strip() not in SWEEP_KEYS or not val:
                raise VisionZooError(f"--stss-sweep entry {entry!r}: use KEY=VALUE pairs joined by commas, keys "
                                     f"{', '.join(SWEEP_KEYS)}.")
            name = SWEEP_KEYS[key.strip()]
            try:
                values[name] = float(val) if name in ("stss_rho", "stss_lambda") else int(val)
            except ValueError as e:
                raise VisionZooError(f"--stss-sweep entry {entry!r}: {key} needs a number, got {val!r}.") from e
        h = HeadSettings(**values)
        out.append(STSS(f"{base}@{entry}", prompts[METHODS[base][0]], h.stss_r, h.stss_keep, h.stss_rho,
                        h.stss_lambda, h.stss_seed))
    return out


@dataclass
class SetResult:
    """Per-dataset outcome: accuracies (%), image count, and costs per method."""

    name: str
    images: int = 0
    correct: dict[str, int] = field(default_factory=dict)
    head: dict[str, Meter] = field(default_factory=dict)
    setup: dict[str, Meter] = field(default_factory=dict)

    def accuracy(self, method: str) -> float:
        return 100.0 * self.correct.get(method, 0) / max(1, self.images)


def fetch_items(dataset: Dataset, indices: list[int]) -> list:
    """Items ``indices`` of ``dataset``, in one batched fetch where the dataset (or the dataset under a
    subset) has ``__getitems__`` (PartWorld renders a whole batch in one call)."""
    base, sub = getattr(dataset, "dataset", None), getattr(dataset, "indices", None)
    if base is not None and sub is not None and callable(getattr(base, "__getitems__", None)):
        items = base.__getitems__([int(sub[i]) for i in indices])
        label_map = getattr(dataset, "label_map", None)
        if label_map is not None:
            items = [(it[0], int(label_map[int(it[1])]), *it[2:]) for it in items]
        return list(items)
    fetch = getattr(dataset, "__getitems__", None)
    return list(fetch(indices)) if callable(fetch) else [dataset[i] for i in indices]


def spread_indices(n: int, k: int | None) -> list[int]:
    """``k`` indices spread evenly over ``range(n)`` (all when ``k`` is falsy or >= n)."""
    if not k or k >= n:
        return list(range(n))
    return torch.linspace(0, n - 1, k).round().long().unique().tolist()


def evaluate_set(model: PromptCLIP, predictors: Sequence[Predictor], dataset: Dataset, name: str,
                 views: TTAViews, device: torch.device, image_batch: int = 8, limit: int | None = None,
                 shared: dict[str, Meter] | None = None, on_batch: Callable[..., None] | None = None,
                 progress: Callable | None = None, rank: int = 0, world_size: int = 1) -> SetResult:
    """Evaluate every predictor on ``dataset`` (items ``(image [3, H, W] in [0, 1], label)``).

    ``model.class_names`` must already be the dataset's classes. ``shared`` accumulates the costs of
    view making (``views``), original-view encoding (``encode0``) and augmented-view encoding
    (``encode_rest``). ``on_batch(items, views, features, predictions)`` sees every batch. Under DDP
    each rank takes every ``world_size``-th image (sum ``correct``/``images`` over ranks afterwards).
    """
    res = SetResult(name)
    shared = shared if shared is not None else {}
    for key in ("views", "encode0", "encode_rest"):
        shared.setdefault(key, Meter(device))
    for p in predictors:
        res.setup[p.name] = Meter(device)
        with res.setup[p.name]:
            p.prepare(model)
        res.head[p.name] = Meter(device)
        res.correct[p.name] = 0
    indices = spread_indices(len(dataset), limit)[rank::world_size]
    batches = [indices[i:i + image_batch] for i in range(0, len(indices), image_batch)]
    n = views.n_views
    for idx in (progress(batches, len(batches), name) if progress else batches):
        items = fetch_items(dataset, idx)
        labels = torch.tensor([int(it[1]) for it in items], device=device)
        with torch.no_grad():
            with shared["views"]:
                v = torch.cat([views(it[0].to(device)) for it in items])  # [B * N, 3, S, S]
            v = v.view(len(items), n, *v.shape[1:])
            with shared["encode0"]:
                f0 = encode_views(model, v[:, 0].contiguous(), 1)
            with shared["encode_rest"]:
                rest = encode_views(model, v[:, 1:].reshape(-1, *v.shape[2:]), n - 1) if n > 1 else None
            feats = f0 if rest is None else torch.cat([f0, rest], 1)  # [B, N, E]
        preds: dict[str, Prediction] = {}
        for p in predictors:
            with res.head[p.name]:
                preds[p.name] = p.head(model, feats)
            res.correct[p.name] += int((preds[p.name].pred == labels).sum())
        res.images += len(items)
        if on_batch is not None:
            on_batch(items, v, feats, preds)
    return res


def cost_rows(predictors: Sequence[Predictor], results: Sequence[SetResult], shared: dict[str, Meter]) -> list[dict]:
    """Seconds per image and peak memory per method (over all sets)."""
    images = max(1, sum(r.images for r in results))
    rows = []
    for p in predictors:
        enc = [shared["encode0"]] + ([shared["views"], shared["encode_rest"]] if p.multi_view else [])
        head_s = sum(r.head[p.name].seconds for r in results)
        setup_s = sum(r.setup[p.name].seconds for r in results)
        meters = enc + [r.head[p.name] for r in results]
        rows.append({"method": p.name, "s_per_image": (sum(m.seconds for m in enc) + head_s) / images,
                     "head_s_per_image": head_s / images, "setup_s": setup_s,
                     "peak_mem_mb": max(m.peak_mb for m in meters),
                     "head_extra_mem_mb": max(r.head[p.name].extra_mb for r in results),
                     "views": "all" if p.multi_view else "original"})
    return rows


def accuracy_rows(predictors: Sequence[Predictor], results: Sequence[SetResult]) -> list[dict]:
    """Table 1 layout: one row per method, one column per set, and the OOD average (all sets but the first)."""
    rows = []
    for p in predictors:
        row: dict[str, Any] = {"method": p.name}
        for r in results:
            row[r.name] = r.accuracy(p.name)
        if len(results) > 1:
            row["ood_avg"] = sum(r.accuracy(p.name) for r in results[1:]) / (len(results) - 1)
        rows.append(row)
    return rows
