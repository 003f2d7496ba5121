"""Test-time views: 64 views of a 224 px image, one batched call vs. a torchvision per-view loop.

    python benchmarks/views.py [--device cpu|cuda] [--repeats 15] [--threads 1]

Writes ``benchmarks/results/views.json``: median seconds per image for
* ``batched``: :class:`visionzoo.data.views.TTAViews` (one ``grid_sample`` for all crops + flips);
* ``kornia_crop_and_resize``: the same crops through ``kornia.geometry.transform.crop_and_resize``
  (dense perspective warp), to show why TTAViews builds a separable grid instead;
* ``torchvision_loop``: TPT's recipe as a Python loop, ``v2.RandomResizedCrop(224) +
  v2.RandomHorizontalFlip`` once per view, then ``torch.stack``;
and the same with AugMix (TTAViews' batched AugMix vs. a ``v2.AugMix`` loop on uint8 views).
``speedup`` is loop time / batched time (> 1: the batched call is faster). On the CPU the times are
the process's CPU time (robust on a shared machine; run with ``--threads 1`` there); on a GPU, wall
time with synchronisation.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import kornia
import torch
from torchvision.transforms import v2

from visionzoo.data.views import TTAViews, sample_crops

N_VIEWS, SIZE, INPUT = 64, 224, (3, 375, 500)  # a typical ImageNet validation image


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def median_seconds(fn, device: str, repeats: int) -> tuple[float, float]:
    """Median wall and CPU (this process) seconds of ``fn()``."""
    fn()  # warm-up
    wall, cpu = [], []
    for _ in range(repeats):
        _sync(device)
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        _sync(device)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="3 repeats (for `make bench`; writes only with --out)")
    p.add_argument("--out", default=None, help="JSON path (default benchmarks/results/views.json; quick: none)")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats = 3
    elif args.out is None:
        args.out = str(Path(__file__).parent / "results" / "views.json")
    torch.set_num_threads(args.threads)
    dev = args.device
    img = torch.rand(*INPUT, generator=torch.Generator().manual_seed(0)).to(dev)
    img_u8 = (img * 255).round().to(torch.uint8)
    k = N_VIEWS - 1

    batched = TTAViews(N_VIEWS, SIZE, seed=0)
    batched_augmix = TTAViews(N_VIEWS, SIZE, seed=0, augmix=True)
    loop = v2.Compose([v2.RandomResizedCrop(SIZE, antialias=True), v2.RandomHorizontalFlip()])
    loop_augmix = v2.Compose([loop, v2.AugMix()])

    def kornia_crops() -> torch.Tensor:
        boxes = sample_crops(k, INPUT[1], INPUT[2], batched.scale, batched.ratio, None)
        x0, y0, w, h = boxes.float().unbind(1)
        corners = torch.stack([torch.stack([x0, y0], 1), torch.stack([x0 + w - 1, y0], 1),
                               torch.stack([x0 + w - 1, y0 + h - 1], 1), torch.stack([x0, y0 + h - 1], 1)], 1)
        src = img[None].expand(k, *INPUT)
        return kornia.geometry.transform.crop_and_resize(src, corners.to(dev), (SIZE, SIZE))

    def torchvision_loop(tf, x) -> torch.Tensor:
        return torch.stack([batched.original(x[None].float())[0].to(x.dtype), *[tf(x) for _ in range(k)]])

    timed = {
        "batched": median_seconds(lambda: batched(img), dev, args.repeats),
        "kornia_crop_and_resize": median_seconds(kornia_crops, dev, args.repeats),
        "torchvision_loop": median_seconds(lambda: torchvision_loop(loop, img), dev, args.repeats),
        "batched_augmix": median_seconds(lambda: batched_augmix(img), dev, max(3, args.repeats // 3)),
        "torchvision_loop_augmix": median_seconds(lambda: torchvision_loop(loop_augmix, img_u8), dev,
                                                  max(3, args.repeats // 3)),
    }
    # On a shared CPU, wall time measures the neighbours too; CPU time of this process does not.
    basis = "cpu" if dev == "cpu" else "wall"
    t = {name: (cpu if basis == "cpu" else wall) for name, (wall, cpu) in timed.items()}
    result = {
        "task": f"{N_VIEWS} views ({SIZE} px) of one {INPUT[1]}x{INPUT[2]} image",
        "device": dev if dev == "cpu" else torch.cuda.get_device_name(),
        "threads": args.threads, "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__, "kornia": kornia.__version__,
        "load_average_1min": round(os.getloadavg()[0], 2),
        "seconds_per_image": {name: round(v, 5) for name, v in t.items()},
        "seconds_basis": f"median {basis} time of this process",
        "wall_seconds_per_image": {name: round(w, 5) for name, (w, _) in timed.items()},
        "speedup": round(t["torchvision_loop"] / t["batched"], 2),
        "speedup_augmix": round(t["torchvision_loop_augmix"] / t["batched_augmix"], 2),
        "kornia_crop_and_resize_vs_batched": round(t["kornia_crop_and_resize"] / t["batched"], 2),
        "command": f"python benchmarks/views.py --device {dev} --threads {args.threads} --repeats {args.repeats}",
    }
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
