"""PartWorld command line: speed benchmark, disk export, and the style figure of the docs.

    python -m visionzoo.data.partworld_cli bench --images 50000 --size 64 --threads 2
    python -m visionzoo.data.partworld_cli export --cache-dir data/partworld --split train --style clean
    python -m visionzoo.data.partworld_cli figure docs/partworld_styles.png
    python -m visionzoo.data.partworld_cli classes      # the class lists of datasets/partworld.yaml
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from .partworld import PartWorld
from .partworld_styles import STYLES


def bench(images: int, size: int, style: str, batch_size: int, threads: int) -> dict:
    """Render ``images`` images of ``size`` px in batches; return the timing as a dict."""
    torch.set_num_threads(threads)
    ipc = -(-images // 100)
    ds = PartWorld("train", classes="downstream", style=style, image_size=size, images_per_class=ipc)
    ds.generate_batch(range(min(batch_size, len(ds))), meta=False)  # warm-up
    start, cpu = time.perf_counter(), time.process_time()
    for lo in range(0, images, batch_size):
        ds.generate_batch(range(lo, min(lo + batch_size, images)), meta=False)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"images": images, "size": size, "style": style, "threads": threads, "batch_size": batch_size,
            "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2), "images_per_second": round(images / seconds, 1)}


def figure(path: str, size: int = 96, columns: int = 6, seed: int = 0) -> None:
    """Save a grid of the same scenes (columns) in every style (rows) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    picks = [0, 7, 13, 21, 34, 55][:columns]  # downstream class positions, one image each
    fig, axes = plt.subplots(len(STYLES), columns, figsize=(1.6 * columns + 1.2, 1.6 * len(STYLES)))
    for r, style in enumerate(STYLES):
        ds = PartWorld("val", "downstream", style=style, image_size=size, seed=seed)
        batch = ds.generate_batch([p * ds.images_per_class for p in picks], meta=False)
        for c in range(columns):
            ax = axes[r, c]
            ax.imshow(batch["image"][c].permute(1, 2, 0).numpy())
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(style, fontsize=10)
            if r == 0:
                ax.set_title(ds.classes[picks[c]].replace(" ", "\n", 2), fontsize=7)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def class_lists_yaml() -> str:
    """The ``classes`` block of ``datasets/partworld.yaml`` (world ids are list positions)."""
    import yaml

    from .partworld_classes import DOWNSTREAM_CLASSES, PRETRAIN_CLASSES, class_table

    names = class_table().names
    block = {"classes": {"pretrain": [names[i] for i in PRETRAIN_CLASSES],
                         "downstream": [names[i] for i in DOWNSTREAM_CLASSES]}}
    return yaml.safe_dump(block, sort_keys=False, width=110)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m visionzoo.data.partworld_cli", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench", help="time the generation of many images")
    b.add_argument("--images", type=int, default=50000)
    b.add_argument("--size", type=int, default=64)
    b.add_argument("--style", default="clean")
    b.add_argument("--batch-size", type=int, default=256)
    b.add_argument("--threads", type=int, default=2)
    e = sub.add_parser("export", help="write an ImageFolder + annotations.json")
    e.add_argument("--cache-dir", required=True)
    e.add_argument("--split", default="train")
    e.add_argument("--classes", default="downstream")
    e.add_argument("--style", default="clean")
    e.add_argument("--size", type=int, default=64)
    e.add_argument("--images-per-class", type=int, default=None)
    e.add_argument("--seed", type=int, default=0)
    f = sub.add_parser("figure", help="save the sample-per-style figure")
    f.add_argument("path")
    f.add_argument("--size", type=int, default=96)
    sub.add_parser("classes", help="print the class lists of the dataset card")
    args = p.parse_args(argv)
    if args.cmd == "bench":
        print(json.dumps(bench(args.images, args.size, args.style, args.batch_size, args.threads)))
    elif args.cmd == "export":
        from .partworld_cache import export_partworld

        ds = PartWorld(args.split, args.classes, args.style, args.size, args.images_per_class, args.seed)
        print(export_partworld(ds, args.cache_dir))
    elif args.cmd == "figure":
        figure(args.path, args.size)
    else:
        print(class_lists_yaml(), end="")


if __name__ == "__main__":
    main()
