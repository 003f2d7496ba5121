"""``eval.py ram``: PSNR/SSIM per operator of a RAM-family model and its baselines, in one run.

Writes into ``--output-dir``: ``results.md`` (operators x methods, ``PSNR / SSIM``),
``results.json`` (meta, per-(operator, method) means, per-image rows) and ``figure.png``
(measurement | Aᵀy | the model | truth, one row per operator).

Baselines (``--baselines``): ``adjoint`` = ``Aᵀy``; ``pinv`` = deepinv's ``A_dagger`` (closed form
where the operator has one, else least squares by conjugate gradient); ``tv_pgd`` = TV-regularised
proximal gradient descent (deepinv, no learned weights); ``deepinv_ram`` = ``deepinv.models.RAM``
loaded with the very same state dict, only when the model has deepinv's architecture (ram_base).
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from deepinv.physics import LinearPhysics
from torch import Tensor, nn

from ...data import build_dataset
from .baselines import adjoint, pseudo_inverse, tv_pgd
from .config import RAM_BASE
from .crops import load_images
from .evaluate import evaluate
from .mixture import check_operators
from .report import save_figure_grid, write_tables

Reconstructor = Callable[[Tensor, LinearPhysics], Tensor]


def has_deepinv_architecture(model: nn.Module) -> bool:
    """True when ``deepinv.models.RAM`` has exactly this model's modules (ram_base with all heads)."""
    cfg = getattr(model, "config", None)
    return (getattr(cfg, "widths", None) == RAM_BASE.widths and getattr(cfg, "blocks", None) == RAM_BASE.blocks
            and tuple(getattr(cfg, "in_channels", ())) == (1, 2, 3))


def deepinv_twin(model: nn.Module) -> nn.Module:
    """``deepinv.models.RAM(pretrained=False)`` holding ``model``'s weights."""
    from deepinv.models import RAM

    ref = RAM(pretrained=False, device="cpu")
    ref.load_state_dict(model.state_dict())
    return ref.to(next(model.parameters()).device).eval()


def baseline_methods(names: list[str], model: nn.Module, tv_iterations: int) -> tuple[dict[str, Reconstructor],
                                                                                      list[str]]:
    """The requested baselines that apply to ``model``, and notes on those that were skipped."""
    methods: dict[str, Reconstructor] = {}
    notes: list[str] = []
    for name in names:
        if name == "adjoint":
            methods["adjoint"] = adjoint
        elif name == "pinv":
            methods["pinv"] = pseudo_inverse
        elif name == "tv_pgd":
            if tv_iterations > 0:
                methods["tv_pgd"] = lambda y, p: tv_pgd(y, p, iterations=tv_iterations)
            else:
                notes.append("tv_pgd skipped: --tv-iterations 0")
        elif name == "deepinv_ram":
            if has_deepinv_architecture(model):
                twin = deepinv_twin(model)
                methods["deepinv_ram"] = lambda y, p, m=twin: m(y, p)
            else:
                notes.append("deepinv_ram skipped: deepinv.models.RAM has a fixed architecture (ram_base); "
                             "this model's weights do not fit it")
    return methods, notes


def eval_command(args: argparse.Namespace) -> str:
    """A command line that reruns this evaluation (the flags that change its numbers)."""
    parts = ["python", "eval.py", "ram", "--model", args.model]
    if args.model_args:
        parts += ["--model-args", *(f"{k}={v}" for k, v in args.model_args.items())]
    if args.channels != 3:
        parts += ["--channels", str(args.channels)]
    if args.pretrained:
        parts += ["--pretrained", str(args.pretrained).lower() if args.pretrained is True else str(args.pretrained)]
    if args.dataset:
        parts += ["--dataset", args.dataset]
    if args.dataset_args:
        parts += ["--dataset-args", *(f"{k}={v}" for k, v in args.dataset_args.items())]
    parts += ["--operators", *args.operators, "--image-size", str(args.image_size)]
    if args.eval_images:
        parts += ["--eval-images", str(args.eval_images)]
    parts += ["--baselines", *args.baselines, "--tv-iterations", str(args.tv_iterations), "--seed", str(args.seed)]
    return shlex.join(parts)


def run_ram_eval(task: Any, args: argparse.Namespace, info: Any, log: Any) -> dict[str, Any]:
    """Evaluate ``--model`` and the baselines on every operator; rank 0 writes the report."""
    from .task import EVAL_DATASET, build_reconstructor

    specs = task.specs(args)  # bad operator strings fail first
    if not info.is_main:
        return {"rows": []}
    out = Path(args.output_dir)
    model = build_reconstructor(args).to(info.device).eval()
    if args.image_size:  # operator/size/channel problems fail before any reconstruction runs
        check_operators(specs, args.channels, args.image_size, model.in_channels)
    dataset = args.dataset or EVAL_DATASET
    raw = build_dataset(dataset, root=args.data_root, split="eval", **(args.dataset_args or {}))
    images = load_images(raw, channels=args.channels, size=args.image_size, limit=args.eval_images)
    baselines, notes = baseline_methods(list(args.baselines), model, args.tv_iterations)
    methods: dict[str, Reconstructor] = {args.model: model, **baselines}
    log.info(f"eval.py ram: {args.model} + {list(baselines)} on {len(images)} {dataset} images x "
             f"{len(specs)} operators")
    with torch.no_grad():
        result = evaluate(methods, [str(s) for s in specs], images, seed=args.seed, device=info.device)
    cfg = getattr(model, "visionzoo_cfg", {})
    weights = cfg.get("weights") or cfg.get("checkpoint") or str(args.pretrained)
    meta = {"command": eval_command(args), "model": args.model, "weights": weights,
            "dataset": dataset, "images": list(images), "image_size": args.image_size, "seed": args.seed,
            "metrics": "deepinv PSNR/SSIM, max_pixel 1, outputs clamped to [0, 1]; seconds = wall time per image"}
    if notes:
        meta["notes"] = "; ".join(notes)
    write_tables(result, out / "results.md", out / "results.json", title=f"eval.py ram: {args.model} on {dataset}",
                 meta=meta)
    save_figure_grid(result.examples, out / "figure.png", method=args.model)
    summary = result.summary()
    for row in summary:
        log.info(f"{row['operator']:<48} {row['method']:<12} PSNR {row['psnr']:6.2f}  SSIM {row['ssim']:.3f}  "
                 f"{row['seconds']:.3f} s")
    log.info(f"results: {out / 'results.md'}, {out / 'results.json'}, {out / 'figure.png'}")
    return {"rows": summary, "notes": notes, "results": str(out / "results.json"),
            "figure": str(out / "figure.png")}
