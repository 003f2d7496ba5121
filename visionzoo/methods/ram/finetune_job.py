"""``train.py ram --finetune``: self-supervised fine-tuning on a new operator, from measurements alone.

1. Measure the first ``--finetune-images`` images of ``--dataset`` (``natural-train`` by default)
   with ``--finetune-operator`` (one operator for all of them, seeded by ``--seed``).
2. :func:`~.selfsup.finetune` gets the model, the operator and the measurements **only**: the loss
   is chosen from the noise model (SURE / measurement consistency / splitting) plus Equivariant
   Imaging, with early stopping on held-out measurements (the measurement itself when there is one).
3. The ground truth is used for the report alone: PSNR/SSIM before and after, on the fine-tuning
   measurements and on measurements of ``--finetune-eval-dataset`` (``natural-eval``) images.

Run folder: ``final/`` (save_pretrained), ``results.json``, ``results.md``, ``figure.png``
(measurement | Aᵀy | before | after | truth), ``metrics.jsonl`` (one record per epoch).
"""

from __future__ import annotations

import argparse
import shlex
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from deepinv.loss.metric import PSNR, SSIM
from deepinv.physics import LinearPhysics
from torch import Tensor, nn

from ...checkpoint import save_pretrained
from ...data import build_dataset
from ...engine.distributed import cleanup_distributed, init_distributed
from ...engine.eval_run import markdown_table
from ...engine.runlog import RunLogger
from ...engine.trainer import seed_everything
from ...errors import VisionZooError
from .crops import load_images
from .mixture import parse_operators
from .operators import operator_channels, simulate
from .report import _as_picture
from .selfsup import finetune


@torch.no_grad()
def reconstruct(model: nn.Module, y: Tensor, physics: LinearPhysics) -> Tensor:
    """``model(y, physics)`` in eval mode, clamped to [0, 1]: ``[N, C, H, W]``."""
    model.eval()
    return model(y, physics).float().clamp(0, 1)


def quality(x_hat: Tensor, truth: Tensor) -> dict[str, float]:
    """Mean PSNR/SSIM of ``x_hat`` against ``truth`` (both ``[N, C, H, W]``); the only use of ground truth."""
    complex_images = truth.shape[1] == 2
    psnr = PSNR(max_pixel=1.0, complex_abs=complex_images)(x_hat, truth)
    ssim = SSIM(max_pixel=1.0, complex_abs=complex_images)(x_hat, truth)
    return {"psnr": float(psnr.mean()), "ssim": float(ssim.mean())}


def finetune_command(args: argparse.Namespace) -> str:
    parts = ["python", "train.py", "ram", "--finetune", "--model", args.model]
    if args.model_args:
        parts += ["--model-args", *(f"{k}={v}" for k, v in args.model_args.items())]
    if args.channels != 3:
        parts += ["--channels", str(args.channels)]
    if args.pretrained:
        parts += ["--pretrained", "true" if args.pretrained is True else str(args.pretrained)]
    if args.dataset:
        parts += ["--dataset", args.dataset]
    parts += ["--finetune-operator", args.finetune_operator, "--finetune-images", str(args.finetune_images),
              "--finetune-epochs", str(args.finetune_epochs), "--finetune-lr", f"{args.finetune_lr:g}",
              "--finetune-patience", str(args.finetune_patience), "--finetune-transform", args.finetune_transform,
              "--image-size", str(args.image_size),
              "--finetune-eval-dataset", args.finetune_eval_dataset or ""]
    if args.finetune_eval_dataset and args.eval_images:
        parts += ["--eval-images", str(args.eval_images)]
    parts += ["--seed", str(args.seed)]
    return shlex.join(parts)


def save_before_after(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """One row per example: measurement | Aᵀy | before | after | truth."""
    from matplotlib.figure import Figure

    cols = ["measurement", "Aᵀy", "before (zero-shot)", "after (fine-tuned)", "truth"]
    fig = Figure(figsize=(12.5, 2.8 * len(rows)))
    axes = fig.subplots(len(rows), len(cols), squeeze=False)
    for ax_row, row in zip(axes, rows, strict=True):
        pics = [row["y"], row["adjoint"].clamp(0, 1), row["before"], row["after"], row["truth"]]
        for j, (ax, pic) in enumerate(zip(ax_row, pics, strict=True)):
            img = _as_picture(pic)
            ax.imshow(img.numpy(), cmap="gray" if img.ndim == 2 else None, vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if j == 0:
                ax.set_ylabel(row["label"], fontsize=7)
            ax.set_title(cols[j] + (f"\n{row['psnr'][j - 2]:.2f} dB" if j in (2, 3) else ""), fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)


def run_finetune(task: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Fine-tune ``--model``/``--pretrained`` on ``--finetune-operator`` (see the module docstring)."""
    from .task import TRAIN_DATASET, build_reconstructor

    spec = parse_operators([args.finetune_operator])[0]
    if args.finetune_images < 1 or args.finetune_epochs < 1:
        raise VisionZooError("--finetune-images and --finetune-epochs must be >= 1.")
    info = init_distributed(args.device)
    try:
        if not info.is_main:
            return {}
        out = Path(args.output_dir)
        log = RunLogger(out, quiet=args.quiet)
        seed_everything(args.seed)
        channels = operator_channels(spec, args.channels)
        model = build_reconstructor(args, (channels,)).to(info.device)
        if channels not in model.in_channels:
            raise VisionZooError(f"{spec.name} works on {channels}-channel images but {args.model} has heads for "
                                 f"{sorted(model.in_channels)} channels only.")
        if not args.pretrained:
            log.info("warning: --pretrained is not set, fine-tuning randomly initialised weights.")

        def measure(dataset: str, split: str, limit: int, seed: int) -> tuple[list[str], Tensor, Tensor,
                                                                                LinearPhysics]:
            raw = build_dataset(dataset, root=args.data_root, split=split, **(args.dataset_args or {}))
            imgs = load_images(raw, channels=args.channels, size=args.image_size, limit=limit)
            if len({tuple(t.shape) for t in imgs.values()}) > 1:
                raise VisionZooError("the images have different sizes; set --image-size to crop them alike.")
            x = torch.stack(list(imgs.values())).to(info.device)
            x_op, y, physics = simulate(spec, x, seed=seed)
            return list(imgs), x_op, y, physics

        dataset = args.dataset or TRAIN_DATASET
        names, truth, y, physics = measure(dataset, "train", args.finetune_images, args.seed)
        sets = [("fine-tuning measurements", dataset, names, truth, y, physics)]
        if args.finetune_eval_dataset:
            ev = measure(args.finetune_eval_dataset, "eval", args.eval_images, args.seed + 1)
            sets.append(("held-out measurements", args.finetune_eval_dataset, *ev))
        before = [reconstruct(model, s[4], s[5]) for s in sets]

        log.info(f"fine-tuning {args.model} on {spec} from {len(names)} measurement(s) of {dataset} "
                 "(no ground truth in the loss)")
        t0 = time.time()
        history = finetune(model, physics, y, epochs=args.finetune_epochs, lr=args.finetune_lr,
                           patience=args.finetune_patience, transform=args.finetune_transform, seed=args.seed,
                           log=log.info)
        for epoch, (tr, val) in enumerate(zip(history["train_loss"], history["val_loss"][1:], strict=True), 1):
            log.record(kind="finetune", epoch=epoch, train_loss=tr, val_loss=val)
        after = [reconstruct(model, s[4], s[5]) for s in sets]

        rows, pictures = [], []
        for (what, ds, imgs, x_true, y_s, phys), b, a in zip(sets, before, after, strict=True):
            qb, qa = quality(b, x_true), quality(a, x_true)
            rows.append({"set": what, "dataset": ds, "images": len(imgs), "psnr_before": qb["psnr"],
                         "psnr_after": qa["psnr"], "ssim_before": qb["ssim"], "ssim_after": qa["ssim"]})
            with torch.no_grad():
                adj = phys.A_adjoint(y_s[:1])
            pictures.append({"label": f"{ds}: {imgs[0]}", "y": y_s[:1].cpu(), "adjoint": adj.cpu(),
                             "before": b[:1].cpu(), "after": a[:1].cpu(), "truth": x_true[:1].cpu(),
                             "psnr": [float(PSNR(complex_abs=x_true.shape[1] == 2)(t[:1], x_true[:1]))
                                      for t in (b, a)]})
        final = save_pretrained(model, out / "final", extra={"finetuned_on": str(spec), "measurements": len(names),
                                                            "dataset": dataset, "best_epoch": history["best_epoch"]})
        save_before_after(pictures, out / "figure.png")
        command = finetune_command(args)
        results = {"task": "ram", "mode": "finetune", "model": args.model, "weights": str(args.pretrained),
                   "operator": str(spec), "losses": history["losses"], "final": str(final), "rows": rows,
                   "history": history, "seconds": round(time.time() - t0, 2), "command": command,
                   "images": {"fine-tuning": names, **({"held-out": sets[1][2]} if len(sets) > 1 else {})},
                   "output_dir": str(out)}
        log.write_json("results.json", results)
        (out / "results.md").write_text(
            f"- command: `{command}`\n- operator: `{spec}`\n- losses: {', '.join(history['losses'])} "
            f"(no ground truth)\n- best epoch: {history['best_epoch']} of {len(history['train_loss'])}\n\n"
            + markdown_table(rows))
        for r in rows:
            log.info(f"{r['set']} ({r['dataset']}, {r['images']} images): PSNR {r['psnr_before']:.2f} -> "
                     f"{r['psnr_after']:.2f} dB, SSIM {r['ssim_before']:.3f} -> {r['ssim_after']:.3f}")
        log.info(f"checkpoint: {final}; report: {out / 'results.md'}, {out / 'figure.png'}")
        return results
    finally:
        cleanup_distributed()
