"""IVPT vs VPT-Deep: forward + backward time per image on the same frozen ViT, in one run.

    python benchmarks/ivpt.py [--backbone vit_tiny_partworld] [--img-size 128] [--batch-size 32] [--repeats 15]

Both models append the same number of prompt tokens (K = n_pro[-1] - 1) at the same blocks (the
last L = len(n_pro) - 1), take the same images and the same cross-entropy, so the ratio
``ivpt / vpt_deep`` is what the prototypes cost (maps, region features, grouping, prompt
projection, part head) and nothing else. The two are timed alternately (median of ``--repeats``)
so that load from other processes hits both alike. For reference it also times one full IVPT
training step (all losses + the equivariance pass on warped images), which is a training recipe
cost, not a model cost. Writes ``benchmarks/results/ivpt.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import visionzoo
from visionzoo.methods.ivpt.equivariance import sample_affine, warp
from visionzoo.methods.ivpt.losses import LossWeights, ivpt_loss


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backbone", default="vit_tiny_partworld", help="any timm ViT")
    p.add_argument("--backbone-weights", choices=["shipped", "random"], default="shipped",
                   help="shipped: the backbone's local pretrained file (vit_tiny_partworld); random: no weights "
                        "(other backbones, timing is the same)")
    p.add_argument("--img-size", type=int, default=128,
                   help="image size (128: the shipped IVPT checkpoint's 16x16 token grid; 0: the backbone's own)")
    p.add_argument("--n-pro", type=int, nargs="+", default=[11, 9, 7, 6], help="as the shipped tiny IVPT")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--quick", action="store_true",
                   help="5 repeats, batch 16 (for `make bench`; a smoke run that writes only with --out)")
    p.add_argument("--out", default=None, help="JSON path (default benchmarks/results/ivpt.json; quick: none)")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats, args.batch_size = 5, 16
    elif args.out is None:
        args.out = str(Path(__file__).parent / "results" / "ivpt.json")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dev = args.device
    kw = {"num_classes": 100, "backbone_pretrained": args.backbone_weights == "shipped",
          **({"img_size": args.img_size} if args.img_size else {})}
    ivpt = visionzoo.create_model(f"ivpt_{args.backbone}", n_pro=args.n_pro, **kw).to(dev).train()
    layers, parts = len(args.n_pro) - 1, args.n_pro[-1] - 1
    vpt = visionzoo.create_model(f"vpt_deep_{args.backbone}", num_prompts=parts, prompt_layers=layers, **kw).to(dev).train()
    _, h, w = ivpt.pretrained_cfg["input_size"]
    x = torch.randn(args.batch_size, 3, h, w, device=dev)
    y = torch.randint(0, 100, (args.batch_size,), device=dev)

    def step_ce(model) -> None:
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()

    def step_full() -> None:
        ivpt.zero_grad(set_to_none=True)
        params = sample_affine(args.batch_size, device=dev)
        out = ivpt(x, return_all=True)
        ivpt_loss(out, y, LossWeights(), ivpt(warp(x, params), return_all=True), params)["loss"].backward()

    fns = {"ivpt": lambda: step_ce(ivpt), "vpt_deep": lambda: step_ce(vpt), "ivpt_full_training_step": step_full}
    for fn in fns.values():
        fn()  # warm-up
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(args.repeats):
        for name, fn in fns.items():  # alternate so background load affects all alike
            _sync(dev)
            t0 = time.perf_counter()
            fn()
            _sync(dev)
            times[name].append(time.perf_counter() - t0)
    per_image_ms = {k: round(1000 * statistics.median(v) / args.batch_size, 4) for k, v in times.items()}
    trainable = {"ivpt": sum(q.numel() for q in ivpt.parameters() if q.requires_grad),
                 "vpt_deep": sum(q.numel() for q in vpt.parameters() if q.requires_grad)}
    result = {
        "task": "forward + backward (cross-entropy) per image, same frozen backbone, same prompt tokens and blocks",
        "backbone": args.backbone, "backbone_weights": args.backbone_weights, "input_size": [3, h, w], "n_pro": args.n_pro, "prompted_blocks": ivpt.prompted_idx,
        "prompt_tokens_per_block": parts, "batch_size": args.batch_size, "repeats": args.repeats,
        "device": dev, "threads": args.threads, "machine": platform.machine(), "torch": torch.__version__,
        "ms_per_image": per_image_ms, "trainable_params": trainable,
        "ivpt_over_vpt_deep": round(per_image_ms["ivpt"] / per_image_ms["vpt_deep"], 3),
        "full_training_step_over_vpt_deep": round(per_image_ms["ivpt_full_training_step"] / per_image_ms["vpt_deep"], 3),
        "command": ("python benchmarks/ivpt.py " + " ".join(argv if argv is not None else sys.argv[1:])).strip(),
    }
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
