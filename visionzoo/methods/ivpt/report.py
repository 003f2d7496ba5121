"""``eval.py ivpt`` / ``eval.py vpt``: accuracy, consistency and stability of IVPT and VPT-Deep in
one run, written as ``results.json`` + ``results.md`` (+ part-map PNGs with ``--visualize N``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import v2 as T

from ...data import build_dataset
from ...engine.data import SeededItems
from ...engine.eval_run import markdown_table
from ...errors import VisionZooError
from ...factory import load_pretrained
from .interp_eval import InterpSettings, pick_maps, score_model
from .model import IVPT
from .task import dataset_kwargs
from .visualize import part_map_figure, unnormalise
from .vpt import VPTDeep


def interp_transform(pre: dict[str, Any]) -> T.Compose:
    """Resize to the model's input size (no crop, so keypoints stay) and normalise."""
    _, h, w = pre["input_size"]
    return T.Compose([T.Resize((int(h), int(w)), antialias=True), T.Normalize(list(pre["mean"]), list(pre["std"]))])


def keypoint_dataset(args: argparse.Namespace, split: str, extra: list[str] | None,
                     image_size: int | None = None) -> Dataset:
    """The evaluation split with part keypoints and object boxes (``with_meta=True``); CUB is
    cropped to the bird box as the EvalProtoPNet protocol asks. PartWorld is rendered at
    ``image_size`` (the model's input side) unless ``--dataset-args image_size=`` says otherwise."""
    kw = dataset_kwargs(args, extra)
    kw["with_meta"] = True
    if args.dataset == "partworld" and image_size:
        kw.setdefault("image_size", int(image_size))
    if args.dataset == "cub":
        kw.setdefault("cropped", True)
    try:
        return build_dataset(args.dataset, root=args.data_root, split=split, **kw)
    except TypeError as e:
        raise VisionZooError(f"dataset {args.dataset!r} has no part keypoints ({e}); consistency and stability "
                             "need them: use partworld or cub.") from e


def load_baseline(spec: str, classes: list[str]) -> VPTDeep:
    model = load_pretrained(spec)
    if not isinstance(model, VPTDeep):
        raise VisionZooError(f"--vpt-checkpoint {spec} holds a {type(model).__name__}, not a VPT-Deep model.")
    if model.num_classes != len(classes):
        raise VisionZooError(f"--vpt-checkpoint {spec} predicts {model.num_classes} classes but the evaluation set "
                             f"has {len(classes)}; evaluate on the classes it was trained on.")
    return model


def ivpt_headline(model: IVPT, choice: str) -> str:
    """Comma-separated map choices with ``auto`` resolved: the stage with n_pro[-3] prototypes (the
    reference scores that one)."""
    n = len(model.config.n_pro)
    auto = f"stage{n - 3}" if n >= 3 else "parts"
    picks = [auto if c.strip() == "auto" else c.strip() for c in choice.split(",") if c.strip()]
    return ",".join(dict.fromkeys(picks))


def score_rows(models: list[tuple[str, nn.Module, str, str]], loader: DataLoader, device: torch.device,
               settings: InterpSettings) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Score each ``(method, model, weights, maps choices)``; returns table rows (one per choice in the
    comma-separated ``choices``) and per-map details."""
    rows, details = [], {}
    for method, model, weights, choices in models:
        res = score_model(model.to(device), loader, device, settings)
        picks = [c.strip() for c in choices.split(",") if c.strip()]
        for choice in picks:
            name = pick_maps(res["maps"], choice)
            m = res["maps"][name]
            label = method if len(picks) == 1 else f"{method} ({choice})"
            rows.append({"method": label, "weights": weights, "maps": f"{name} ({m['prototypes']}/class)",
                         "acc1": res["acc1"], "consistency": m["consistency"], "stability": m["stability"],
                         "images": res["images"], "classes": res["classes"]})
        details[method] = res
    return rows, details


def write_figures(model: IVPT, dataset: Dataset, count: int, folder: Path, device: torch.device) -> list[str]:
    """``count`` part-map figures of images spread over ``dataset``."""
    if count <= 0:
        return []
    pre = model.pretrained_cfg
    picks = torch.linspace(0, len(dataset) - 1, count).round().long().unique().tolist()
    paths = []
    model.eval()
    for i in picks:
        image, label, meta = dataset[i]
        with torch.no_grad():
            out = model(image[None].to(device), return_all=True)
        raw = unnormalise(image[None], pre["mean"], pre["std"])[0]
        names = model.class_names or []
        cls = names[label] if label < len(names) else str(label)
        pred = int(out.logits.argmax(-1))
        title = f"#{i} {cls} (pred: {names[pred] if pred < len(names) else pred})"
        paths.append(str(part_map_figure(raw, out, 0, folder / f"ivpt_parts_{i:05d}.png", title=title,
                                         keypoints=meta["keypoints"], prompted_blocks=model.prompted_idx)))
    return paths


def run_interp_eval(task, args: argparse.Namespace, info, log) -> dict[str, Any]:
    """The custom evaluation of the ``ivpt`` and ``vpt`` tasks (rank 0 does the work)."""
    if not info.is_main:
        return {}
    cfg = task.config_from_args(args)
    out = Path(args.output_dir)
    raw = keypoint_dataset(args, cfg.eval_split, cfg.eval_dataset_args)
    classes = list(raw.classes)
    model = task.build_model(args, classes).to(info.device)
    side = int(model.pretrained_cfg["input_size"][-1])
    if args.dataset == "partworld" and getattr(raw, "image_size", side) != side:
        if "image_size" in dataset_kwargs(args, cfg.eval_dataset_args):
            raise VisionZooError(f"--dataset-args image_size={raw.image_size} but the model takes {side} px; boxes and "
                                 "keypoints must be in the pixels the model sees: drop image_size or set it to "
                                 f"{side}.")
        raw = keypoint_dataset(args, cfg.eval_split, cfg.eval_dataset_args, image_size=side)
    weights = ("card: " + str(getattr(model, "visionzoo_cfg", {}).get("card", args.model)) if args.pretrained is True
               else str(args.pretrained) if args.pretrained else "random")
    settings = InterpSettings(half_size=cfg.half_size, part_thresh=cfg.part_thresh, noise_std=cfg.noise_std,
                              noise_clip=cfg.noise_clip, seed=args.seed)
    if isinstance(model, IVPT):
        entries = [("IVPT", model, weights, ivpt_headline(model, cfg.ivpt_maps))]
        if cfg.vpt_checkpoint:
            base = load_baseline(cfg.vpt_checkpoint, classes)
            if tuple(base.pretrained_cfg["input_size"]) != tuple(model.pretrained_cfg["input_size"]):
                raise VisionZooError("IVPT and the VPT-Deep baseline take different input sizes; compare them on "
                                     "the same backbone and image size.")
            entries.append(("VPT-Deep", base, str(cfg.vpt_checkpoint), cfg.vpt_maps))
    else:
        entries = [("VPT-Deep", model, weights, cfg.vpt_maps)]
    data = SeededItems(raw, interp_transform(model.pretrained_cfg), args.seed)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=False, num_workers=args.workers)
    log.info(f"scoring {', '.join(e[0] for e in entries)} on {len(data)} {args.dataset} images "
             f"({len(classes)} classes, split {cfg.eval_split})")
    rows, details = score_rows(entries, loader, info.device, settings)
    figures = []
    if isinstance(model, IVPT) and getattr(cfg, "visualize", 0):
        figures = write_figures(model, data, cfg.visualize, out / "figures", info.device)
    result = {"task": task.name, "dataset": args.dataset, "dataset_args": dataset_kwargs(args, cfg.eval_dataset_args),
              "split": cfg.eval_split, "protocol": vars(settings), "rows": rows, "details": details,
              "figures": figures}
    log.write_json("results.json", result)
    (out / "results.md").write_text(markdown_table(rows))
    for r in rows:
        log.info(f"{r['method']}: acc1 {r['acc1']:.2f}  consistency {r['consistency']:.2f}  "
                 f"stability {r['stability']:.2f}  ({r['maps']})")
    log.info(f"results: {out / 'results.json'} and {out / 'results.md'}" + (f"; figures in {out / 'figures'}"
                                                                            if figures else ""))
    return result
