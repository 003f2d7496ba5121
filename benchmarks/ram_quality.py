"""Non-iterative vs iterative: the shipped ram_tiny against TV-regularised PGD, at equal or better PSNR.

    python benchmarks/ram_quality.py [--quick] [--threads 1] [--image-size 256] [--max-tv-iterations 300]
                                     [--out benchmarks/results/ram_quality.json]

For every operator of ram_tiny's training mixture and every natural-eval image (resized and
centre-cropped to ``--image-size``), with the same measurement for both methods:

* ``ram_tiny``: ``create_model("ram_tiny", pretrained=True).optimize_for_inference()`` (one
  forward pass); seconds = median of ``--runs`` timed calls after a warm-up.
* ``tv_pgd``: deepinv ``PGD`` + ``TVPrior`` (the zoo's ``baselines.tv_pgd`` settings), stopped at the
  first iteration whose PSNR reaches ram_tiny's (oracle stopping with the ground truth: the most
  favourable stopping rule for TV); when no iteration up to ``--max-tv-iterations`` gets there,
  TV runs them all and ``reached`` is false (then its time is a lower bound of the time to equal
  PSNR, and the ratio a lower bound of the speed-up). The stopping iteration is found in a first,
  untimed run; a second run of exactly that many iterations is timed.

``speed_ratio`` = TV seconds / ram_tiny seconds (> 1: ram_tiny is faster), from process CPU time
(robust on a shared machine, one thread) and from wall time. PSNR is deepinv's on outputs clamped
to [0, 1]. ``--quick``: 2 images at 64 px, 50 TV iterations at most (smoke run; writes only with ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import deepinv as dinv
import torch
from deepinv.loss.metric import PSNR
from deepinv.optim import L2, PGD, TVPrior

import visionzoo
from visionzoo.data import build_dataset
from visionzoo.methods.ram.baselines import default_tv_weight
from visionzoo.methods.ram.crops import load_images
from visionzoo.methods.ram.mixture import DEFAULT_OPERATORS
from visionzoo.methods.ram.operators import simulate

TV_INNER_ITERATIONS = 20  # as baselines.tv_pgd


def timed(fn: Callable[[], torch.Tensor], runs: int) -> tuple[torch.Tensor, float, float]:
    """(output, median wall s, median CPU s) over ``runs`` calls."""
    walls, cpus, out = [], [], None
    for _ in range(runs):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return out, statistics.median(walls), statistics.median(cpus)


def tv_solver(physics, iterations: int, x_like: torch.Tensor) -> PGD:
    lipschitz = float(physics.compute_sqnorm(torch.randn_like(x_like), max_iter=30, tol=1e-3, verbose=False))
    return PGD(data_fidelity=L2(), prior=TVPrior(n_it_max=TV_INNER_ITERATIONS), lambda_reg=default_tv_weight(physics),
               stepsize=1.0 / max(lipschitz, 1e-6), max_iter=iterations, early_stop=False)


def compare(model: torch.nn.Module, op: str, name: str, x: torch.Tensor, seed: int, runs: int,
            max_iterations: int) -> dict:
    x_op, y, physics = simulate(op, x[None], seed=seed)
    psnr = PSNR(max_pixel=1.0)
    with torch.no_grad():
        model(y, physics)  # warm-up (oneDNN primitives, resamplers for this size)
    ram_out, ram_wall, ram_cpu = timed(lambda: model(y, physics), runs)
    ram_psnr = float(psnr(ram_out.float().clamp(0, 1), x_op))
    with torch.no_grad():
        _, metrics = tv_solver(physics, max_iterations, x_op)(y, physics, x_gt=x_op, compute_metrics=True)
    trajectory = metrics["psnr"][0]  # PSNR of the initial guess, then after each iteration
    hit = next((i for i in range(1, len(trajectory)) if trajectory[i] >= ram_psnr), None)
    iterations = hit or max_iterations

    def run_tv() -> torch.Tensor:  # the Lipschitz estimate is part of the method's cost
        with torch.no_grad():
            return tv_solver(physics, iterations, x_op)(y, physics)

    tv_out, tv_wall, tv_cpu = timed(run_tv, 1)
    return {"operator": op, "image": name, "ram_psnr": round(ram_psnr, 3),
            "tv_psnr": round(float(psnr(tv_out.clamp(0, 1), x_op)), 3), "tv_iterations": iterations,
            "reached": hit is not None, "tv_best_psnr": round(max(trajectory), 3),
            "ram_cpu_s": round(ram_cpu, 4), "tv_cpu_s": round(tv_cpu, 4),
            "ram_wall_s": round(ram_wall, 4), "tv_wall_s": round(tv_wall, 4)}


def summarize(rows: list[dict]) -> list[dict]:
    out = []
    for op in dict.fromkeys(r["operator"] for r in rows):
        rs = [r for r in rows if r["operator"] == op]

        def mean(k: str, rs=rs) -> float:
            return sum(r[k] for r in rs) / len(rs)

        out.append({"operator": op, "images": len(rs), "ram_psnr": round(mean("ram_psnr"), 2),
                    "tv_psnr": round(mean("tv_psnr"), 2), "tv_reached_ram_psnr": sum(r["reached"] for r in rs),
                    "tv_iterations_mean": round(mean("tv_iterations"), 1),
                    "ram_cpu_s": round(mean("ram_cpu_s"), 4), "tv_cpu_s": round(mean("tv_cpu_s"), 4),
                    "speed_ratio_cpu": round(mean("tv_cpu_s") / mean("ram_cpu_s"), 1),
                    "speed_ratio_wall": round(mean("tv_wall_s") / mean("ram_wall_s"), 1),
                    "ratio_is_lower_bound": any(not r["reached"] for r in rs)})
    return out


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="2 images at 64 px, at most 50 TV iterations")
    p.add_argument("--image-size", type=int, default=None, help="image side (default 256, quick 64)")
    p.add_argument("--images", type=int, default=None, help="natural-eval images (default all 5, quick 2)")
    p.add_argument("--max-tv-iterations", type=int, default=None, help="default 300, quick 50")
    p.add_argument("--runs", type=int, default=3, help="timed ram_tiny calls per image (median)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="JSON path (default benchmarks/results/ram_quality.json; quick: none)")
    args = p.parse_args(argv)
    size = args.image_size or (64 if args.quick else 256)
    n_images = args.images or (2 if args.quick else 0)
    max_its = args.max_tv_iterations or (50 if args.quick else 300)
    out = args.out or (None if args.quick else str(Path(__file__).parent / "results" / "ram_quality.json"))
    torch.set_num_threads(args.threads)
    command = shlex.join(["python", "benchmarks/ram_quality.py", *(argv if argv is not None else sys.argv[1:])])

    model = visionzoo.create_model("ram_tiny", pretrained=True).optimize_for_inference()
    images = load_images(build_dataset("natural-eval"), channels=3, size=size, limit=n_images)
    load_before, start = os.getloadavg()[0], time.perf_counter()
    rows = []
    for k, op in enumerate(DEFAULT_OPERATORS):
        for i, (name, x) in enumerate(images.items()):
            rows.append(compare(model, op, name, x, args.seed + 1000 * k + i, args.runs, max_its))
            print(json.dumps(rows[-1]), file=sys.stderr)
    result = {
        "command": command, "device": "cpu", "machine": platform.processor() or platform.machine(),
        "threads": args.threads, "torch": torch.__version__, "deepinv": dinv.__version__,
        "model": "ram_tiny.natural (models/ram_tiny.yaml), optimize_for_inference()",
        "dataset": "natural-eval", "image_size": [3, size, size], "images": list(images),
        "max_tv_iterations": max_its, "tv_inner_iterations": TV_INNER_ITERATIONS,
        "load_average_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "summary": summarize(rows), "rows": rows, "seconds_total": round(time.perf_counter() - start, 1),
        "notes": ["TV-PGD stops at the first iteration reaching ram_tiny's PSNR on that image (oracle stopping, "
                  "favourable to TV); 'reached' false = it never did within max_tv_iterations, then the speed "
                  "ratio is a lower bound.",
                  "speed_ratio_* = mean TV seconds / mean ram_tiny seconds over the images (> 1: ram_tiny faster); "
                  "CPU = process time with one thread, robust to other load on a shared machine."],
    }
    text = json.dumps(result, indent=2) + "\n"
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text)
    print(json.dumps(result["summary"], indent=2))
    return result


if __name__ == "__main__":
    main()
