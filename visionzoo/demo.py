"""``make demo``: the main jobs of visionzoo on embedded data, offline, with a summary at the end.

Steps (each writes into its own folder under ``--output-dir``):

1. ``backbone``: the shipped tiny ViT (pretrained on PartWorld's pretraining classes) gets a linear
   probe on PartWorld *downstream* classes through ``train.py classify``, then ``eval.py classify``
   measures it on the source style and a shifted style — registry, hub layer, engine, checkpoints
   and both command lines, end to end.
2. one step per method that provides ``visionzoo.methods.<method>.demo.run_demo(out_dir, quick)``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

METHOD_DEMOS = ("ram", "ivpt", "fga", "hippotune")


def backbone_step(out: Path, quick: bool) -> dict[str, Any]:
    from .cli import eval_main, train_main

    per_class = "10" if quick else "30"
    common = ["--model", "classifier_vit_tiny_partworld", "--batch-size", "64", "--quiet"]
    data = ["--dataset", "partworld", "--dataset-args", "classes=downstream", f"images_per_class={per_class}",
            "in_memory=true"]
    code = train_main(["classify", *common, "--model-args", "backbone_pretrained=true", *data,
                       "--linear-probe", "--epochs", "3" if quick else "8", "--lr", "3e-3", "--weight-decay", "0",
                       "--output-dir", str(out / "train")])
    if code:
        raise SystemExit(code)
    final = json.loads((out / "train" / "results.json").read_text())["final"]
    rows = []
    for style in ("clean", "sketch"):
        ev = out / f"eval-{style}"
        code = eval_main(["classify", *common, "--pretrained", final, *data, f"style={style}", "--eval-split",
                          "test", "--output-dir", str(ev)])
        if code:
            raise SystemExit(code)
        row = json.loads((ev / "results.json").read_text())["rows"][0]
        rows.append({"step": "backbone", "what": f"linear probe, PartWorld downstream, {style}",
                     "acc1": round(row["acc1"], 2), "images": row["count"]})
    return {"rows": rows, "outputs": str(out)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m visionzoo.demo", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output-dir", default="runs/demo")
    p.add_argument("--quick", action="store_true", help="smaller versions of every step")
    p.add_argument("--only", nargs="*", default=None, help="run only these steps (backbone, ram, ivpt, ...)")
    args = p.parse_args(argv)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    steps: dict[str, Any] = {"backbone": backbone_step}
    for name in METHOD_DEMOS:
        try:
            module = importlib.import_module(f"visionzoo.methods.{name}.demo")
        except ModuleNotFoundError:
            continue
        steps[name] = module.run_demo
    summary: dict[str, Any] = {}
    for name, fn in steps.items():
        if args.only and name not in args.only:
            continue
        t0 = time.time()
        print(f"== demo step: {name}", flush=True)
        result = fn(out / name, quick=args.quick)
        result["seconds"] = round(time.time() - t0, 1)
        summary[name] = result
        print(f"   done in {result['seconds']} s; outputs in {out / name}", flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    print("\nSummary")
    for result in summary.values():
        for row in result.get("rows", []):
            print("  " + ", ".join(f"{k}={v}" for k, v in row.items()))
    print(f"\nAll demo results: {out.resolve()} (summary.json, one folder per step)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
