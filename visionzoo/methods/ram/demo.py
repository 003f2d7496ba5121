"""``make demo`` step for the RAM family: the shipped ``ram_tiny`` (trained on natural-train only).

1. ``zero-shot``: ``eval.py ram`` on natural-eval images with the operators it was trained on,
   against ``Aᵀy``, ``A†y`` and TV-regularised proximal gradient (table + figure grid).
2. ``finetune``: ``train.py ram --finetune`` on an operator it was never trained on (demosaicing):
   self-supervised, from a single natural-train measurement (no ground truth in the loss); PSNR
   before/after on that measurement and on held-out natural-eval measurements.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from .mixture import DEFAULT_OPERATORS

CARD_NAME = "ram_tiny.natural"
UNSEEN_OPERATOR = "demosaic"


def _shipped() -> bool:
    from ...cards import find_card

    card = find_card(CARD_NAME)
    if card is None:
        return False
    src, _, _ = card.weight_source()
    return Path(src).exists()


def zero_shot(out: Path, quick: bool) -> tuple[list[dict[str, Any]], list[str]]:
    from ...cli import eval_main

    argv = ["ram", "--model", "ram_tiny", "--pretrained", "true", "--operators", *DEFAULT_OPERATORS,
            "--image-size", "128" if quick else "256", "--eval-images", "3" if quick else "0",
            "--baselines", "adjoint", "pinv", "tv_pgd", "--tv-iterations", "30" if quick else "100",
            "--output-dir", str(out), "--quiet"]
    if eval_main(argv):
        raise SystemExit(f"eval.py {' '.join(argv)} failed")
    summary = json.loads((out / "results.json").read_text())["summary"]
    cell = {(r["operator"], r["method"]): r for r in summary}
    rows = []
    for op in dict.fromkeys(r["operator"] for r in summary):
        ours = cell[(op, "ram_tiny")]
        row = {"step": "ram", "what": f"zero-shot {op.split(',noise=')[0]}", "images": ours["images"],
               "ram_tiny_psnr": round(ours["psnr"], 2)}
        for m in ("adjoint", "pinv", "tv_pgd"):
            if (op, m) in cell:
                row[f"{m}_psnr"] = round(cell[(op, m)]["psnr"], 2)
        row["ram_tiny_s"] = round(ours["seconds"], 3)
        if (op, "tv_pgd") in cell:
            row["tv_pgd_s"] = round(cell[(op, "tv_pgd")]["seconds"], 3)
        rows.append(row)
    return rows, argv


def finetune_step(out: Path, quick: bool) -> tuple[list[dict[str, Any]], list[str]]:
    from ...cli import train_main

    argv = ["ram", "--finetune", "--model", "ram_tiny", "--pretrained", "true", "--finetune-operator",
            UNSEEN_OPERATOR, "--finetune-images", "1", "--finetune-epochs", "15" if quick else "40",
            "--finetune-lr", "5e-4", "--finetune-patience", "10", "--image-size", "96" if quick else "128",
            "--eval-images", "3" if quick else "0", "--output-dir", str(out), "--quiet"]
    if train_main(argv):
        raise SystemExit(f"train.py {' '.join(argv)} failed")
    res = json.loads((out / "results.json").read_text())
    rows = [{"step": "ram", "what": f"self-supervised fine-tuning on {UNSEEN_OPERATOR} (unseen), {r['set']}",
             "dataset": r["dataset"], "images": r["images"], "psnr_before": round(r["psnr_before"], 2),
             "psnr_after": round(r["psnr_after"], 2)} for r in res["rows"]]
    return rows, argv


def run_demo(out_dir: Path, quick: bool = False) -> dict[str, Any]:
    """Zero-shot reconstruction, then self-supervised fine-tuning; returns ``{"rows": [...], "outputs": ...}``."""
    import torch

    out_dir = Path(out_dir)
    if not _shipped():
        print(f"   ram: the shipped checkpoint {CARD_NAME} is missing (models/ram_tiny.yaml); nothing to run.")
        return {"rows": [{"step": "ram", "what": "skipped: shipped ram_tiny checkpoint missing"}],
                "outputs": str(out_dir)}
    threads = torch.get_num_threads()
    torch.set_num_threads(min(threads, 2))
    try:
        rows, zs_argv = zero_shot(out_dir / "zero-shot", quick)
        ft_rows, ft_argv = finetune_step(out_dir / "finetune", quick)
    finally:
        torch.set_num_threads(threads)
    print(f"   ram: tables {out_dir / 'zero-shot' / 'results.md'}, {out_dir / 'finetune' / 'results.md'}; "
          f"figures {out_dir / 'zero-shot' / 'figure.png'}, {out_dir / 'finetune' / 'figure.png'}")
    return {"rows": rows + ft_rows, "outputs": str(out_dir),
            "figures": [str(out_dir / "zero-shot" / "figure.png"), str(out_dir / "finetune" / "figure.png")],
            "commands": [shlex.join(["python", "eval.py", *zs_argv]), shlex.join(["python", "train.py", *ft_argv])]}
