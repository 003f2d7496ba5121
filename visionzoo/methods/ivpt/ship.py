"""Train, measure and ship the tiny IVPT and VPT-Deep checkpoints (the project's recipe).

    python -m visionzoo.methods.ivpt.ship [--backbone vit_tiny_partworld] [--backbone-weights true|FILE]
                                          [--out runs/ivpt-ship] [--dry-run]

On a tiny backbone (``--backbone``, a timm ViT; ``--backbone-weights true`` = its shipped weights,
``models/vit_tiny_partworld.safetensors`` by default, or a timm safetensors file such as a
``train.py pretrain --objective dino`` export) and PartWorld downstream classes: ``train.py ivpt``
and ``train.py vpt`` with the same data, epochs and batch size, then one ``eval.py ivpt`` run
scoring both (accuracy, consistency, stability) with 4 part-map figures. With ``--ship`` (shipped
backbone weights only) the two ``final`` checkpoints are copied to ``models/ivpt_<backbone>/`` and
``models/vpt_deep_<backbone>/``, their model cards are written with the measured numbers and the
commands, and a figure is copied to ``docs/ivpt_parts_tiny.png`` (``docs/ivpt_parts_<backbone>.png``
for another backbone).
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from ...backbones.partworld import MODELS_DIR

REPO = MODELS_DIR.parent


def commands(args: argparse.Namespace) -> dict[str, list[str]]:
    """The three command lines (argv after ``train.py`` / ``eval.py``)."""
    classes = f"classes={args.classes.replace(' ', '')}"
    size = str(args.img_size)
    data = ["--dataset", "partworld", "--dataset-args", classes, f"images_per_class={args.train_per_class}",
            f"image_size={size}", "in_memory=true", "--eval-dataset-args", f"images_per_class={args.test_per_class}"]
    common = ["--epochs", str(args.epochs), "--batch-size", str(args.batch_size), "--seed", str(args.seed),
              "--eval-every", str(args.epochs), "--warmup-epochs", "1", "--weight-decay", "0",
              "--schedule", args.schedule, "--step-epochs", str(args.step_epochs), "--step-gamma", str(args.step_gamma)]
    out = Path(args.out)
    backbone = [f"backbone_pretrained={args.backbone_weights}", f"img_size={size}"]
    ivpt = ["ivpt", "--model", f"ivpt_{args.backbone}", "--model-args", *backbone, f"n_pro={args.n_pro}",
            f"center_features={str(args.center_features).lower()}", *data, *common, "--lr", str(args.lr),
            "--proto-lr-mult", str(args.proto_lr_mult), "--presence-pool", str(args.presence_pool),
            "--proto-init", args.proto_init, *shlex.split(args.ivpt_args), "--output-dir", str(out / "ivpt")]
    vpt = ["vpt", "--model", f"vpt_deep_{args.backbone}", "--model-args", *backbone,
           f"num_prompts={args.num_prompts or _headline_prototypes(args.n_pro)}", *data, *common, "--lr", str(args.vpt_lr),
           "--proto-lr-mult", "1", "--output-dir", str(out / "vpt")]
    ev = ["ivpt", "--model", f"ivpt_{args.backbone}", "--pretrained", str(out / "ivpt" / "final"),
          "--vpt-checkpoint", str(out / "vpt" / "final"), "--dataset", "partworld", "--dataset-args", classes,
          f"images_per_class={args.test_per_class}", "--batch-size", "64", "--visualize", "4",
          "--ivpt-maps", args.ivpt_maps, "--output-dir", str(out / "eval")]
    return {"train_ivpt": ivpt, "train_vpt": vpt, "eval": ev}


def _headline_prototypes(n_pro: str) -> int:
    """Foreground prototypes of the stage IVPT is scored on (n_pro[-3]), so VPT-Deep gets as many prompts."""
    stages = [int(n) for n in yaml.safe_load(n_pro)]
    return (stages[-3] if len(stages) >= 3 else stages[-1]) - 1


def _shell(script: str, argv: list[str]) -> str:
    return f"python {script} " + " ".join(shlex.quote(a) for a in argv)


def _card(arch: str, tag: str, folder: Path, config: dict[str, Any], recipe: str, metrics: dict[str, Any],
          note: str, backbone: str = "vit_tiny_partworld") -> str:
    from ...hub import sha256_file

    args = dict(config["model_args"])
    args["class_names"] = config["class_names"]
    card = {
        "name": f"{arch}.{tag}", "architecture": arch, "default": True,
        "weights": {"source": folder.name, "sha256": sha256_file(folder / "model.safetensors"),
                    "format": "safetensors"},
        "checkpoint_folder": "save_pretrained: config.json + model.safetensors (the trained adapter only; the frozen "
                             f"backbone is rebuilt from models/{backbone}.safetensors)",
        "model_args": args, "preprocessing": config["preprocessing"],
        "trained_on": ["partworld downstream classes (train split), style clean"],
        "backbone": f"{backbone} (models/{backbone}.safetensors, frozen)",
        "recipe": recipe, "metrics": metrics, "note": note, "license": "Apache-2.0",
    }
    return f"# {note}\n" + yaml.safe_dump(card, sort_keys=False, width=120)


def claim_verdict(rows: list[dict[str, Any]]) -> str:
    """One sentence: does every IVPT row beat VPT-Deep's last-block row in consistency and stability?"""
    base = next((r for r in rows if r["method"].startswith("VPT-Deep") and "last" in r["method"]), None)
    ivpt = [r for r in rows if r["method"].startswith("IVPT")]
    if base is None or not ivpt:
        return ""
    fmt = "; ".join(f"{r['method']} {r['consistency']:.1f}/{r['stability']:.1f} (acc {r['acc1']:.1f})" for r in ivpt)
    holds = all(r["consistency"] > base["consistency"] and r["stability"] > base["stability"] for r in ivpt)
    return (f"The paper's claim (IVPT more consistent and stable than VPT-Deep) {'holds' if holds else 'does NOT hold'} "
            f"here: consistency/stability {fmt} vs VPT-Deep last block {base['consistency']:.1f}/"
            f"{base['stability']:.1f} (acc {base['acc1']:.1f}).")


def ship(out: Path, cmds: dict[str, list[str]], backbone: str = "vit_tiny_partworld") -> list[str]:
    """Copy checkpoints into ``models/``, write the cards and the docs figure; returns what was written."""
    from ...checkpoint import read_config

    res = json.loads((out / "eval" / "results.json").read_text())
    eval_cmd = _shell("eval.py", cmds["eval"])
    written = []
    for method, arch, key in (("IVPT", f"ivpt_{backbone}", "train_ivpt"), ("VPT-Deep", f"vpt_deep_{backbone}", "train_vpt")):
        target = MODELS_DIR / arch
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(out / ("ivpt" if method == "IVPT" else "vpt") / "final", target)
        metrics: dict[str, Any] = {}
        mine = [r for r in res["rows"] if r["method"].split(" (")[0] == method]
        for r in mine:
            suffix = r["method"][len(method):].strip(" ()").replace(" ", "_")
            for k in ("acc1", "consistency", "stability"):
                name = f"{k}_partworld_downstream_test" + (f"_{suffix}" if suffix and k != "acc1" else "")
                metrics[name] = {"value": round(r[k], 2), "maps": r["maps"], "images": r["images"],
                                 "command": eval_cmd}
        note = (f"{method} on the shipped tiny PartWorld ViT {backbone}, {mine[0]['classes']} PartWorld downstream classes; "
                "consistency/stability from PartWorld's ground-truth part keypoints (docs/ivpt.md). "
                f"{claim_verdict(res['rows'])}")
        path = MODELS_DIR / f"{arch}.yaml"
        path.write_text(_card(arch, "partworld", target, read_config(target), _shell("train.py", cmds[key]),
                              metrics, note, backbone))
        written += [str(target), str(path)]
    if res.get("figures"):
        fig = REPO / "docs" / ("ivpt_parts_tiny.png" if backbone == "vit_tiny_partworld" else f"ivpt_parts_{backbone}.png")
        shutil.copy(res["figures"][min(1, len(res["figures"]) - 1)], fig)
        written.append(str(fig))
    return written


def main(argv: list[str] | None = None) -> int:
    from ...cli import eval_main, train_main

    p = argparse.ArgumentParser(prog="python -m visionzoo.methods.ivpt.ship", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backbone", default="vit_tiny_partworld", help="timm ViT (architecture of the backbone)")
    p.add_argument("--backbone-weights", default="true",
                   help="'true' (the backbone's shipped weights) or a timm safetensors file, e.g. a "
                        "`train.py pretrain --objective dino` export")
    p.add_argument("--out", default="runs/ivpt-ship")
    p.add_argument("--classes", default=str(list(range(60, 80))),
                   help="'downstream' (all 100) or a YAML list of world ids (default: the first 20 downstream)")
    p.add_argument("--train-per-class", type=int, default=24)
    p.add_argument("--test-per-class", type=int, default=10)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--img-size", type=int, default=128,
                   help="input side: 128 gives a 16x16 token grid on the 64-px backbone (interpolated positions)")
    p.add_argument("--schedule", choices=["cosine", "step"], default="step")
    p.add_argument("--step-epochs", type=float, default=4.0)
    p.add_argument("--step-gamma", type=float, default=0.5)
    p.add_argument("--proto-init", choices=["random", "kmeans"], default="kmeans")
    p.add_argument("--ivpt-maps", default="auto,parts", help="IVPT maps to report (eval.py --ivpt-maps)")
    p.add_argument("--n-pro", default="[11,9,7,6]", help="IVPT stages (K = 5 final parts, PartWorld's 5 parts)")
    p.add_argument("--lr", type=float, default=3e-3, help="IVPT head/prompt lr")
    p.add_argument("--proto-lr-mult", type=float, default=0.3)
    p.add_argument("--presence-pool", type=int, default=3, help="3 as the reference (2 suits an 8x8 grid)")
    p.add_argument("--center-features", action=argparse.BooleanOptionalAction, default=False,
                   help="prototype maps from mean-centred features (keeps the background prototype off the object)")
    p.add_argument("--ivpt-args", default="", help="more train.py ivpt flags (one string), e.g. '--w-entropy 0.2'")
    p.add_argument("--num-prompts", type=int, default=0, help="VPT-Deep prompts (0: as many as IVPT's scored stage)")
    p.add_argument("--vpt-lr", type=float, default=3e-3)
    p.add_argument("--dry-run", action="store_true", help="print the commands only")
    p.add_argument("--ship", action="store_true", help="copy checkpoints to models/, write cards and docs figure")
    p.add_argument("--skip-train", action="store_true", help="reuse the trained runs in --out")
    args = p.parse_args(argv)
    if args.ship and args.backbone_weights != "true":
        p.error("--ship needs --backbone-weights true: a shipped checkpoint must rebuild its backbone from models/")
    cmds = commands(args)
    for name, argv_ in cmds.items():
        print(f"{name}: {_shell('eval.py' if name == 'eval' else 'train.py', argv_)}")
    if args.dry_run:
        return 0
    if not args.skip_train:
        for key in ("train_ivpt", "train_vpt"):
            if train_main(cmds[key]):
                return 1
    if eval_main(cmds["eval"]):
        return 1
    print((Path(args.out) / "eval" / "results.md").read_text())
    if args.ship:
        for w in ship(Path(args.out), cmds, args.backbone):
            print("wrote", w)
    return 0


if __name__ == "__main__":
    sys.exit(main())
