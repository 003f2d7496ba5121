"""FGA's test-time cost against TPT and Zero, in one run on the same views.

    python benchmarks/fga.py [--images 1] [--classes 1000] [--model ViT-B-16] [--views 64] [--threads 2]
    python benchmarks/fga.py --quick           # the tiny CLIP (64 px), PartWorld's 100 downstream classes

Per image, every method makes the same ``--views`` views (view 0 = the original; seeded, identical
for all methods), encodes them with the frozen image tower and then:
* ``fga``: STSS on the prompt: entropies at the prompt and at R perturbed prompts (cached text
  features), keep the s flattest views, vote; the R perturbed prompt sets are encoded once per class
  set, reported apart as ``setup_s``;
* ``zero``: keep the 30 % lowest-entropy views, vote;
* ``tpt``: one AdamW step on the prompt (text encoder forward + backward over all classes), then a
  forward with the updated prompt, prompt reset per image.
Each method runs in its own process (``--isolate``, default) so the peak memory of one does not hide
in another's: the CPU figure is the process's peak resident set while the images are processed
(``/proc/self/clear_refs`` reset after set-up), the GPU figure the CUDA allocator peak. Random weights
(timing does not depend on them). Results go to ``benchmarks/results/fga.json`` under ``full``; a
``--quick`` smoke run (``make bench``) writes only when ``--out`` is given, under ``quick`` (each mode
keeps the other's section).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
METHODS = ("fga", "zero", "tpt")


def class_names(n: int, quick: bool) -> list[str]:
    if quick:
        from visionzoo.data import build_dataset
        return list(build_dataset("partworld", split="test", classes="downstream", images_per_class=1).classes)[:n]
    import open_clip
    base = list(open_clip.IMAGENET_CLASSNAMES)
    return [base[i % len(base)] + ("" if i < len(base) else f" {i // len(base)}") for i in range(n)]


def test_images(n: int, quick: bool) -> list[torch.Tensor]:
    if quick:
        from visionzoo.data import build_dataset
        ds = build_dataset("partworld", split="test", classes="downstream", style="sketch", image_size=64,
                           images_per_class=1)
        return [ds[i * 7 % len(ds)][0] for i in range(n)]
    g = torch.Generator().manual_seed(0)
    return [torch.rand(3, 375, 500, generator=g) for _ in range(n)]  # a typical ImageNet image size


def worker(args: argparse.Namespace) -> dict:
    """Run one method in this process and return its costs."""
    from visionzoo.data import TTAViews
    from visionzoo.factory import create_model
    from visionzoo.methods.fga.costs import Meter
    from visionzoo.methods.fga.predictors import STSS, TPT, Zero, encode_views

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = create_model(f"fga_{args.model}", class_names=class_names(args.classes, args.quick),
                         backbone_pretrained=False).to(device).eval()
    pc = model.pretrained_cfg
    size = int(pc["input_size"][-1])
    views = TTAViews(args.views, size, mean=pc["mean"], std=pc["std"], seed=0)
    ctx = model.ctx.detach()
    pred = {"fga": lambda: STSS("fga", ctx, r=args.stss_r, keep=args.stss_keep),
            "zero": lambda: Zero("zero", ctx),
            "tpt": lambda: TPT("tpt", ctx, class_chunk=args.tpt_class_chunk)}[args.worker]()
    images = test_images(args.images, args.quick)
    with torch.no_grad():  # warm-up: kernels, allocator, thread pool (not a full image)
        encode_views(model, views(images[0].to(device))[:2], 2)
    setup = Meter(device)
    with setup:
        pred.prepare(model)
    per_image, encode, head = Meter(device), Meter(device), Meter(device)
    preds = []
    for img in images:
        with per_image:
            with encode:
                with torch.no_grad():
                    feats = encode_views(model, views(img.to(device)), args.views)
            with head:
                preds.append(int(pred.head(model, feats).pred[0]))
    n = len(images)
    return {"method": args.worker, "images": n, "s_per_image": per_image.seconds / n,
            "cpu_s_per_image": per_image.cpu_seconds / n,
            "encode_s_per_image": encode.seconds / n, "head_s_per_image": head.seconds / n,
            "setup_s": setup.seconds, "peak_mem_mb": per_image.peak_mb, "extra_mem_mb": per_image.extra_mb,
            "setup_peak_mem_mb": setup.peak_mb, "memory_exact": per_image.exact, "predictions": preds}


def run_method(method: str, args: argparse.Namespace, **override) -> dict:
    args = argparse.Namespace(**{**vars(args), **override})
    if not args.isolate:
        return worker(argparse.Namespace(**{**vars(args), "worker": method}))
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    cmd = [sys.executable, __file__, "--worker", method, "--worker-out", out, "--model", args.model,
           "--classes", str(args.classes), "--images", str(args.images), "--views", str(args.views),
           "--threads", str(args.threads), "--device", args.device, "--stss-r", str(args.stss_r),
           "--stss-keep", str(args.stss_keep)]
    if args.tpt_class_chunk:
        cmd += ["--tpt-class-chunk", str(args.tpt_class_chunk)]
    if args.quick:
        cmd.append("--quick")
    t0 = time.time()
    subprocess.run(cmd, check=True, cwd=ROOT)
    res = json.loads(Path(out).read_text())
    os.unlink(out)
    res["process_wall_s"] = time.time() - t0
    print(f"  {method}: {res['s_per_image']:.3f} s/image ({res['cpu_s_per_image']:.3f} CPU s), peak {res['peak_mem_mb']:.0f} MiB "
          f"(+{res['extra_mem_mb']:.0f} MiB while processing images), setup {res['setup_s']:.2f} s", flush=True)
    return res


def _extrapolate(probe: dict[str, dict], classes: int) -> dict:
    """A straight line through the probes' extra memory (MiB) against class count, evaluated at ``classes``."""
    xs = sorted(int(c) for c in probe)
    out: dict = {"measured": probe}
    if len(xs) >= 2:
        (x0, x1), (y0, y1) = (xs[0], xs[-1]), (probe[str(xs[0])]["extra_mem_mb"], probe[str(xs[-1])]["extra_mem_mb"])
        slope = (y1 - y0) / (x1 - x0)
        out.update(mib_per_class=slope, extrapolated_extra_mem_mb_at_classes=y0 + slope * (classes - x0),
                   note=f"an extrapolation to {classes} classes from the measured probes, not a measurement")
    return out


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny CLIP, 100 classes, 64 px, 8 images")
    p.add_argument("--model", default=None, help="open_clip architecture (default ViT-B-16; quick: clip_tiny_partworld)")
    p.add_argument("--classes", type=int, default=None, help="class count (default 1000; quick: 100)")
    p.add_argument("--images", type=int, default=None, help="test images (default 1; quick: 8)")
    p.add_argument("--views", type=int, default=64)
    p.add_argument("--stss-r", type=int, default=8)
    p.add_argument("--stss-keep", type=int, default=6)
    p.add_argument("--tpt-class-chunk", type=int, default=None,
                   help="TPT back-propagates this many classes at a time (bounds its memory; same gradient)")
    p.add_argument("--probe-classes", nargs="*", type=int, default=[],
                   help="also run TPT without class chunks at these class counts (its memory per class, to "
                        "extrapolate the unchunked peak at --classes when that does not fit in memory)")
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=True,
                   help="one process per method (clean peak memory)")
    p.add_argument("--out", default=None, help="results file (default benchmarks/results/fga.json; --quick writes "
                                                "only when --out is given)")
    p.add_argument("--worker", choices=METHODS, help=argparse.SUPPRESS)
    p.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.model = args.model or ("clip_tiny_partworld" if args.quick else "ViT-B-16")
    args.classes = args.classes or (100 if args.quick else 1000)
    args.images = args.images or (8 if args.quick else 1)
    if args.worker:
        res = worker(args)
        Path(args.worker_out).write_text(json.dumps(res))
        return res

    torch.set_num_threads(args.threads)
    print(f"benchmarks/fga.py: {args.model}, {args.classes} classes, {args.images} image(s), {args.views} views, "
          f"device {args.device}, {args.threads} threads", flush=True)
    rows = {m: run_method(m, args) for m in args.methods}
    probe = {}
    for c in args.probe_classes:
        print(f"  TPT memory probe, {c} classes, no class chunks:", flush=True)
        r = run_method("tpt", args, classes=c, tpt_class_chunk=None, images=1)
        probe[str(c)] = {k: r[k] for k in ("extra_mem_mb", "peak_mem_mb", "s_per_image", "cpu_s_per_image")}
    ratios = {}
    if "tpt" in rows and "fga" in rows:
        ratios["tpt_over_fga_s_per_image"] = rows["tpt"]["s_per_image"] / rows["fga"]["s_per_image"]
        ratios["tpt_over_fga_cpu_s_per_image"] = rows["tpt"]["cpu_s_per_image"] / rows["fga"]["cpu_s_per_image"]
        ratios["tpt_over_fga_peak_mem"] = rows["tpt"]["peak_mem_mb"] / rows["fga"]["peak_mem_mb"]
        ratios["tpt_over_fga_extra_mem"] = rows["tpt"]["extra_mem_mb"] / max(1e-9, rows["fga"]["extra_mem_mb"])
    if "zero" in rows and "fga" in rows:
        ratios["fga_over_zero_s_per_image"] = rows["fga"]["s_per_image"] / rows["zero"]["s_per_image"]
        ratios["fga_over_zero_cpu_s_per_image"] = rows["fga"]["cpu_s_per_image"] / rows["zero"]["cpu_s_per_image"]
    section = {
        "config": {"model": args.model, "weights": "random", "classes": args.classes, "images": args.images,
                   "views": args.views, "device": args.device, "threads": args.threads,
                   "stss_r": args.stss_r, "stss_keep": args.stss_keep, "tpt_class_chunk": args.tpt_class_chunk,
                   "isolated_processes": args.isolate},
        "command": "python benchmarks/fga.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "torch": torch.__version__,
                    "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None},
        "methods": rows, "ratios": ratios,
        "tpt_unchunked_probe": _extrapolate(probe, args.classes) if probe else None,
        "notes": [f"{args.images} image(s) per method; seconds/image include view making and image encoding; "
                  "s_per_image is wall time, cpu_s_per_image the process's CPU time (all threads): on a machine "
                  "shared with other jobs the CPU-time ratios are the steadier ones",
                  "setup_s (text features of the class set; for fga also the R perturbed prompt sets) is paid once "
                  "per class set, not per image",
                  "peak_mem_mb: CUDA allocator peak" if args.device.startswith("cuda") else
                  "peak_mem_mb: peak resident set of the method's own process while processing images (model "
                  "weights included); extra_mem_mb: the part above the resident set at the start"],
        "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    print(json.dumps(ratios, indent=2))
    if args.quick and args.out is None:  # a smoke run (make bench) leaves the recorded results alone
        return section
    out = Path(args.out or ROOT / "benchmarks" / "results" / "fga.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(out.read_text()) if out.exists() else {}
    data["quick" if args.quick else "full"] = section
    out.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out}")
    return section


if __name__ == "__main__":
    main()
