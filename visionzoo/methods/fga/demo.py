"""``make demo`` step for FGA: the shipped prompts on the shipped tiny CLIP, PartWorld shifted styles.

The CoOp prompt (``models/coop_clip_tiny_partworld/``) and the SAPT prompt
(``models/fga_clip_tiny_partworld/``) were tuned 16-shot on the source style of PartWorld's
downstream classes. ``eval.py fga`` compares zero-shot CLIP (one prompt and the 80-template
ensemble), CoOp, TPT, Zero, their CoOp combinations, SAPT, STSS and FGA (SAPT + STSS) on the source
style and every shifted style, on the same views: a table like the paper's Table 1, the cost of
each method, and a figure of one test image's views marked kept or dropped by FGA.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...backbones.partworld import MODELS_DIR

COOP_CKPT = MODELS_DIR / "coop_clip_tiny_partworld"
FGA_CKPT = MODELS_DIR / "fga_clip_tiny_partworld"
CLIP_DIR = MODELS_DIR / "clip_tiny_partworld"


QUICK_SETS = ("partworld:clean", "partworld:sketch", "partworld:cartoon", "partworld:noisy")


def demo_argv(out_dir: Path, quick: bool) -> list[str]:
    """The ``eval.py`` arguments of the demo.

    Full: one test image per class (100) on the source style and each of the 7 shifted styles, 64
    views each: the same command as the accuracy table in ``docs/fga.md``. Quick: 16 images on the
    source style and 3 shifted styles.
    """
    argv = ["fga", "--model", "fga_clip_tiny_partworld", "--pretrained", str(FGA_CKPT),
            "--coop-pretrained", str(COOP_CKPT), "--dataset", "partworld",
            "--dataset-args", "classes=downstream", "images_per_class=1"]
    if quick:
        argv += ["--eval-sets", *QUICK_SETS, "--images-per-set", "16"]
    return argv + ["--figures", "1", "--output-dir", str(out_dir), "--quiet"]


def run_demo(out_dir: Path, quick: bool = False) -> dict[str, Any]:
    """Evaluate FGA and its baselines; returns ``{"rows": [...], "outputs": ..., "figures": ..., "command": ...}``."""
    from ...cli import eval_main

    out_dir = Path(out_dir)
    missing = [str(p) for p in (CLIP_DIR, COOP_CKPT, FGA_CKPT) if not p.exists()]
    if missing:
        print(f"   fga: shipped weights missing ({', '.join(missing)}); nothing to evaluate.")
        return {"rows": [{"step": "fga", "what": "skipped: shipped weights missing"}], "outputs": str(out_dir)}
    argv = demo_argv(out_dir, quick)
    code = eval_main(argv)
    if code:
        raise SystemExit(code)
    res = json.loads((out_dir / "results.json").read_text())
    costs = {r["method"]: r for r in res["costs"]}
    source = res["sets"][0]["name"]
    rows = [{"step": "fga", "what": f"{r['method']}, PartWorld downstream (100 classes)",
             f"acc1_{source}": round(r[source], 2), "acc1_ood_avg": round(r["ood_avg"], 2),
             "s_per_image": round(costs[r["method"]]["s_per_image"], 4)} for r in res["accuracy"]]
    print(f"   fga: table {out_dir / 'results.md'}, view figure(s) {', '.join(res['figures'])}")
    return {"rows": rows, "outputs": str(out_dir), "figures": res["figures"], "table": str(out_dir / "results.md"),
            "command": "python eval.py " + " ".join(argv)}
