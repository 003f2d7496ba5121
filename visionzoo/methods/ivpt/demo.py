"""``make demo`` step for IVPT: the shipped IVPT and VPT-Deep checkpoints on PartWorld downstream classes.

Both checkpoints (``models/ivpt_vit_tiny_partworld/``, ``models/vpt_deep_vit_tiny_partworld/``)
adapt the shipped tiny backbone; ``eval.py ivpt`` scores them in one run on the test split of the
classes they were trained on: accuracy, consistency and stability from PartWorld's ground-truth
part keypoints, plus a few part-map figures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...backbones.partworld import MODELS_DIR

IVPT_CKPT = MODELS_DIR / "ivpt_vit_tiny_partworld"
VPT_CKPT = MODELS_DIR / "vpt_deep_vit_tiny_partworld"


def partworld_class_ids(names: list[str]) -> list[int]:
    """World ids of PartWorld classes given by name."""
    from ...data.partworld_classes import class_table

    table = {n: i for i, n in enumerate(class_table().names)}
    missing = [n for n in names if n not in table]
    if missing:
        raise ValueError(f"not PartWorld classes: {missing[:3]}")
    return [table[n] for n in names]


def run_demo(out_dir: Path, quick: bool = False) -> dict[str, Any]:
    """Evaluate the shipped IVPT and VPT-Deep checkpoints; returns ``{"rows": [...], "outputs": ...}``."""
    from ...checkpoint import read_config
    from ...cli import eval_main

    out_dir = Path(out_dir)
    missing = [str(p) for p in (IVPT_CKPT, VPT_CKPT) if not (p / "config.json").exists()]
    if missing:
        print(f"   ivpt: shipped checkpoints missing ({', '.join(missing)}); nothing to evaluate.")
        return {"rows": [{"step": "ivpt", "what": "skipped: shipped checkpoints missing"}], "outputs": str(out_dir)}
    ids = partworld_class_ids(read_config(IVPT_CKPT)["class_names"])
    per_class = 6 if quick else 20
    argv = ["ivpt", "--model", "ivpt_vit_tiny_partworld", "--pretrained", str(IVPT_CKPT),
            "--vpt-checkpoint", str(VPT_CKPT), "--dataset", "partworld",
            "--dataset-args", f"classes={ids}", f"images_per_class={per_class}",
            "--batch-size", "64", "--ivpt-maps", "auto,parts", "--visualize", "2" if quick else "4",
            "--output-dir", str(out_dir), "--quiet"]
    code = eval_main(argv)
    if code:
        raise SystemExit(code)
    res = json.loads((out_dir / "results.json").read_text())
    rows = [{"step": "ivpt", "what": f"{r['method'].split(' (')[0]} maps {r['maps']}, PartWorld downstream, {r['classes']} classes",
             "acc1": round(r["acc1"], 2), "consistency": round(r["consistency"], 2),
             "stability": round(r["stability"], 2), "images": r["images"]} for r in res["rows"]]
    print(f"   ivpt: table {out_dir / 'results.md'}, part-map figures in {out_dir / 'figures'}")
    return {"rows": rows, "outputs": str(out_dir), "figures": res["figures"],
            "command": "python eval.py " + " ".join(argv)}
