"""What CoCoOp's Meta-Net contributes: its trained context with and without the per-image shift π(x).

    python benchmarks/fga_cocoop_ablation.py [--cocoop models/cocoop_clip_tiny_partworld] [--out FILE]
    python benchmarks/fga_cocoop_ablation.py --quick      # source style only, 1 image per class (make bench)

On the FGA harness (``evaluate_set``, the same sets, test images and original views as ``eval.py fga``:
PartWorld's source style and its 7 shifted styles, 2 test images per class), one view per image (the
single-view methods read view 0 only, so this gives their 64-view numbers). Rows: the shipped CoOp
prompt (a check against ``benchmarks/results/fga_partworld_table1_200.md``), CoCoOp, CoCoOp's context
alone (π = 0), CoCoOp's context plus the mean π of the 16-shot training images (the image-independent
part of the shift), and zero-shot "a photo of a". Also the size of the shift against the context vectors.
Writes JSON only with ``--out``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import torch

import visionzoo
from visionzoo.data import TTAViews, build_dataset
from visionzoo.data.continual import few_shot
from visionzoo.factory import create_transforms
from visionzoo.methods.fga.evaluate import build_eval_set, load_cocoop, load_context, parse_eval_sets
from visionzoo.methods.fga.harness import accuracy_rows, evaluate_set, fetch_items
from visionzoo.methods.fga.predictors import ConditionalPromptHead, SinglePrompt

ROOT = Path(__file__).resolve().parent.parent


@torch.no_grad()
def training_shifts(host, prompt, shots: int, batch: int = 64) -> torch.Tensor:
    """π(x) ``[N, D]`` of the ``shots``-per-class training images (source style, eval preprocessing)."""
    train = few_shot(build_dataset("partworld", split="train", classes="downstream"), shots, 1)
    tf = create_transforms(host, training=False)
    out = []
    for i in range(0, len(train), batch):
        x = torch.stack([tf(it[0]) for it in fetch_items(train, list(range(i, min(len(train), i + batch))))])
        out.append(prompt.meta_net(host.encode_image(x)))
    return torch.cat(out)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fga", default=str(ROOT / "models" / "fga_clip_tiny_partworld"), help="host prompt model (its CLIP)")
    p.add_argument("--coop", default=str(ROOT / "models" / "coop_clip_tiny_partworld"))
    p.add_argument("--cocoop", default=str(ROOT / "models" / "cocoop_clip_tiny_partworld"))
    p.add_argument("--images-per-class", type=int, default=2)
    p.add_argument("--shots", type=int, default=16, help="training images per class for the mean shift")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="source style only, 1 image per class, 1 shot")
    p.add_argument("--out", default=None, help="JSON path (nothing is written without it)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.quick:
        args.images_per_class, args.shots = 1, 1
    host = visionzoo.load_pretrained(args.fga).eval()
    prompt = load_cocoop(args.cocoop, host)
    shifts = training_shifts(host, prompt, args.shots)
    mean_shift = shifts.mean(0)
    preds = [SinglePrompt("coop (shipped)", load_context(args.coop, host, "coop")),
             ConditionalPromptHead("cocoop", prompt),
             SinglePrompt("cocoop context, no Meta-Net (pi = 0)", prompt.ctx),
             SinglePrompt("cocoop context + mean pi of the training images", prompt.ctx + mean_shift),
             SinglePrompt("zeroshot", host.phrase_context("a photo of a"))]
    pc = host.pretrained_cfg
    views = TTAViews(1, int(pc["input_size"][-1]), mean=pc["mean"], std=pc["std"], seed=0)
    norms: list[torch.Tensor] = []

    def on_batch(items, v, feats, _preds):  # the per-image shift of the test images
        with torch.no_grad():
            norms.append(prompt.meta_net(feats[:, 0]).norm(dim=-1))

    sets = parse_eval_sets(None, "partworld", None)[:1 if args.quick else None]
    results = []
    for s in sets:
        ds = build_eval_set(s, "test", {"classes": "downstream", "images_per_class": args.images_per_class})
        host.class_names = list(ds.classes)
        results.append(evaluate_set(host, preds, ds, s.name, views, torch.device("cpu"), 8, None, on_batch=on_batch))
        print(s.name, {k: round(results[-1].accuracy(k), 2) for k in results[-1].correct}, flush=True)
    sn = torch.cat(norms)
    record = {
        "command": "python benchmarks/fga_cocoop_ablation.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
        "accuracy": accuracy_rows(preds, results), "images": {r.name: r.images for r in results},
        "meta_shift_norm_test": {"mean": sn.mean().item(), "std": sn.std().item()},
        "ctx_vector_norm_mean": prompt.ctx.norm(dim=-1).mean().item(),
        "train_shift": {"images": len(shifts), "mean_shift_norm": mean_shift.norm().item(),
                        "per_image_deviation_norm_mean": (shifts - mean_shift).norm(dim=-1).mean().item()},
    }
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({k: record[k] for k in ("meta_shift_norm_test", "ctx_vector_norm_mean", "train_shift")}, indent=2))
    return record


if __name__ == "__main__":
    main()
