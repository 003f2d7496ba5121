"""``make demo`` step for HippoTune: a short class-incremental run on PartWorld's 100 downstream
classes (10 tasks, seed-1993 class order) with the shipped tiny ViT, HippoTune against SimpleCIL and
the L2P prompt pool in the same harness, and HippoTune and SimpleCIL once more with the streaming LDA
classifier; accuracy curves in ``accuracy_curves.png``, the table in
``comparison.md``, each run's accuracy matrix in its own folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...backbones.partworld import VIT_TINY_PARTWORLD_FILE
from .report import load_result, write_comparison
from .suite import LDA, LR, as_command_line, run_name

# (label, task, model, task-specific flags); the learning rates of docs/hippotune.md (suite.LR). The LDA
# rows show what the classifier alone is worth: the same streaming LDA on HippoTune's and on frozen features.
METHODS: tuple[tuple[str, str, str, list[str]], ...] = (
    ("hippotune", "hippotune", "hippotune_vit_tiny_partworld", LR["hippotune"]),
    ("hippotune + LDA", "hippotune", "hippotune_vit_tiny_partworld", [*LR["hippotune"], *LDA]),
    ("simplecil", "simplecil", "simplecil_vit_tiny_partworld", []),
    ("simplecil + LDA", "simplecil", "simplecil_vit_tiny_partworld", LDA),
    ("l2p", "l2p", "l2p_vit_tiny_partworld", LR["l2p"]),
)


def demo_settings(quick: bool) -> dict[str, str]:
    """Images per class and epochs of the demo (quick: for CI)."""
    if quick:
        return {"train": "4", "test": "2", "epochs": "1"}
    return {"train": "20", "test": "10", "epochs": "2"}


def run_demo(out_dir: Path, quick: bool = False, *, backbone_pretrained: str = "true",
             model_args: list[str] | None = None, image_size: int = 64) -> dict[str, Any]:
    """Run the five methods; returns ``{"rows": [...], "outputs": ..., "figure": ..., "commands": ...}``.

    ``backbone_pretrained``/``model_args``/``image_size`` exist for tests (a toy random ViT).
    """
    from ...cli import train_main

    out_dir = Path(out_dir)
    if backbone_pretrained == "true" and not VIT_TINY_PARTWORLD_FILE.exists():
        print(f"   hippotune: shipped backbone {VIT_TINY_PARTWORLD_FILE} missing; nothing to run.")
        return {"rows": [{"step": "hippotune", "what": "skipped: shipped tiny ViT missing"}],
                "outputs": str(out_dir)}
    s = demo_settings(quick)
    results, commands = [], {}
    for label, task, model, extra in METHODS:
        argv = [task, "--model", model, "--dataset", "partworld", "--tasks", "10",
                "--train-per-class", s["train"], "--test-per-class", s["test"], "--epochs", s["epochs"],
                "--batch-size", "32", "--weight-decay", "0", "--backbone-pretrained", backbone_pretrained,
                *extra, "--quiet", "--output-dir", str(out_dir / run_name(label))]
        if model_args:
            argv += ["--model-args", *model_args]
        if image_size != 64:
            argv += ["--dataset-args", f"image_size={image_size}"]
        with as_command_line(argv):
            code = train_main(argv)
        if code:
            raise SystemExit(code)
        results.append(load_result(out_dir / run_name(label)))
        commands[label] = "python train.py " + " ".join(argv)
    title = f"PartWorld downstream, 10 tasks, tiny ViT ({s['train']} train img/class, {s['epochs']} epoch(s))"
    labels = [m[0] for m in METHODS]
    summary = write_comparison(results, out_dir, title, labels)
    rows = [{"step": "hippotune", "what": f"{label}, PartWorld downstream, 10 tasks",
             "Acc": round(r["metrics"]["acc"], 2),
             "AAA": None if r["metrics"]["aaa"] is None else round(r["metrics"]["aaa"], 2),
             "forgetting": None if r["metrics"]["forgetting"] is None else round(r["metrics"]["forgetting"], 2)}
            for label, r in zip(labels, results, strict=True)]
    print(f"   hippotune: table {out_dir / 'comparison.md'}, curves {out_dir / 'accuracy_curves.png'}")
    return {"rows": rows, "outputs": str(out_dir), "figure": str(out_dir / "accuracy_curves.png"),
            "commands": commands, "comparison": summary["rows"]}
