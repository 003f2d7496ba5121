"""The PartWorld measurement suite behind docs/hippotune.md (tiny ViT, 100 downstream classes, 10 tasks).

    python -m visionzoo.methods.hippotune.suite --group compare [--runs-dir runs/hippotune-suite]
    python -m visionzoo.methods.hippotune.suite --group ablate
    python -m visionzoo.methods.hippotune.suite --group choices     # the paper's unknowns, on the val split
    python -m visionzoo.methods.hippotune.suite --group classifier  # LDA classifier, memory partitions (clean)
    python -m visionzoo.methods.hippotune.suite --group shift       # the cartoon style, 60 images per class

Each run is one ``train.py`` command (printed, and stored in its results.json); finished runs are
skipped, so the suite resumes. Each group writes ``<runs-dir>/<group>/comparison.{md,json}`` and
``accuracy_curves.png``. ``compare``, ``ablate``, ``classifier`` and ``shift`` report the test split;
``choices`` (used to pick the defaults) the val split. ``shift`` is the same protocol on PartWorld's
cartoon style (a domain shift from the photo-like pretraining images, in the spirit of ImageNet-R) with
60 training images per class and 4 epochs per task. Set ``OMP_NUM_THREADS=1`` on a shared machine.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

COMMON = ["--dataset", "partworld", "--tasks", "10", "--train-per-class", "20", "--epochs", "3",
          "--batch-size", "32", "--weight-decay", "0", "--seed", "0"]
SHIFT = ["--dataset", "partworld", "--dataset-args", "style=cartoon", "--tasks", "10", "--train-per-class", "60",
         "--epochs", "4", "--batch-size", "32", "--weight-decay", "0", "--seed", "0"]
TEST = ["--test-per-class", "20"]
VAL = ["--eval-split", "val", "--test-per-class", "10"]
# head lr 0.01; memories/prompts 10x slower (val-split choice, docs/hippotune.md); seqhead: lr 0.01 (val)
SLOW_ADAPTER = ["--lr", "0.01", "--adapter-lr-scale", "0.1"]
LR = {"hippotune": SLOW_ADAPTER, "seqhead": ["--lr", "0.01"], "l2p": SLOW_ADAPTER, "coda": SLOW_ADAPTER,
      "joint": SLOW_ADAPTER}
H = ("hippotune", "hippotune_vit_tiny_partworld")
SC = ("simplecil", "simplecil_vit_tiny_partworld")
SEQ = ("seqhead", "seqhead_vit_tiny_partworld")
# memories adapted in the first task only, then frozen (their features stay valid for the LDA statistics)
FIRST = ["--memory-partitions", "1", "--adapter-lr-scale", "1"]
LDA = ["--classifier", "lda"]

# name -> (task, model, extra flags)
GROUPS: dict[str, dict[str, tuple[str, str, list[str]]]] = {
    "compare": {
        "hippotune": (*H, []),
        "simplecil": ("simplecil", "simplecil_vit_tiny_partworld", []),
        "seqhead": ("seqhead", "seqhead_vit_tiny_partworld", []),
        "seqhead-linear": ("seqhead", "seqhead_vit_tiny_partworld",
                           ["--model-args", "head=linear", "--head-init", "random"]),
        "l2p": ("l2p", "l2p_vit_tiny_partworld", []),
        "joint": ("joint", "hippotune_vit_tiny_partworld", []),
        "joint seqhead": ("joint", "seqhead_vit_tiny_partworld", []),
        "l2p lr=0.01": ("l2p", "l2p_vit_tiny_partworld", ["--adapter-lr-scale", "1"]),
        "coda": ("coda", "coda_vit_tiny_partworld", []),
        "coda lr=0.01": ("coda", "coda_vit_tiny_partworld", ["--adapter-lr-scale", "1"]),
    },
    "ablate": {
        "hippotune": (*H, []),
        "t_max=1": (*H, ["--model-args", "t_max=1"]),
        "no L_orth": (*H, ["--lambda-orth", "0"]),
        "no L_ent": (*H, ["--lambda-ent", "0"]),
    },
    "choices": {  # in order of priority (the suite can be stopped early; report.py compares what finished)
        "default": (*H, []),
        "t_max=1": (*H, ["--model-args", "t_max=1"]),
        "alpha=0.9": (*H, ["--model-args", "alpha=0.9"]),
        "memory lr 3e-4": (*H, ["--adapter-lr-scale", "0.03"]),
        "top_k=0": (*H, ["--model-args", "top_k=0"]),
        "query=mean": (*H, ["--model-args", "query=mean"]),
        "t_max=2": (*H, ["--model-args", "t_max=2"]),
        "default seed 1": (*H, ["--seed", "1"]),  # run-to-run spread of the same recipe
        "eps=0": (*H, ["--model-args", "eps=0"]),
        "M=8": (*H, ["--model-args", "memory_size=8"]),
        "grad_steps=1": (*H, ["--model-args", "grad_steps=1"]),
        "lambda_orth=1e-2": (*H, ["--lambda-orth", "1e-2"]),
        "lambda_ent=1e-1": (*H, ["--lambda-ent", "1e-1"]),
        "M=128": (*H, ["--model-args", "memory_size=128"]),
        "d_v=32": (*H, ["--model-args", "value_dim=32"]),
    },
    "classifier": {
        "hippotune": (*H, []),
        "hippotune, memory partitions 10 (M 40)": (*H, ["--memory-partitions", "10", "--adapter-lr-scale", "1",
                                                       "--model-args", "memory_size=40"]),
        "hippotune, first-task memories": (*H, FIRST),
        "hippotune, first-task memories + LDA": (*H, [*FIRST, *LDA]),
        "hippotune + LDA": (*H, LDA),
        "simplecil": (*SC, []),
        "simplecil + LDA": (*SC, LDA),
        "seqhead": (*SEQ, []),
    },
    "shift": {
        "hippotune": (*H, []),
        "hippotune, memory lr 1e-2": (*H, ["--adapter-lr-scale", "1"]),
        "hippotune, memory partitions 10 (M 40)": (*H, ["--memory-partitions", "10", "--adapter-lr-scale", "1",
                                                       "--model-args", "memory_size=40"]),
        "hippotune, first-task memories": (*H, FIRST),
        "hippotune, first-task memories, trained head": (*H, [*FIRST, "--head-final", "trained"]),
        "hippotune, first-task memories + LDA": (*H, [*FIRST, *LDA]),
        "hippotune + LDA": (*H, LDA),
        "simplecil": (*SC, []),
        "simplecil + LDA": (*SC, LDA),
        "seqhead": (*SEQ, []),
        "l2p": ("l2p", "l2p_vit_tiny_partworld", ["--adapter-lr-scale", "1"]),
        "coda": ("coda", "coda_vit_tiny_partworld", []),
        "coda + LDA": ("coda", "coda_vit_tiny_partworld", LDA),
        "joint hippotune, memory lr 1e-2": ("joint", "hippotune_vit_tiny_partworld", ["--adapter-lr-scale", "1"]),
        "joint hippotune, memory lr 1e-2 + LDA": ("joint", "hippotune_vit_tiny_partworld",
                                                   ["--adapter-lr-scale", "1", *LDA]),
        "joint seqhead": ("joint", "seqhead_vit_tiny_partworld", []),
    },
}
SETTINGS = {"shift": SHIFT}  # the protocol flags of a group (default: COMMON)


# runs with identical commands in two groups are run once
SHARED = {("ablate", "hippotune"): ("compare", "hippotune"), ("classifier", "hippotune"): ("compare", "hippotune"),
          ("classifier", "simplecil"): ("compare", "simplecil"), ("classifier", "seqhead"): ("compare", "seqhead")}


@contextmanager
def as_command_line(argv: list[str]) -> Iterator[None]:
    """``sys.argv`` = ``train.py <argv>`` while a run records the command that reproduces it."""
    saved = sys.argv
    sys.argv = ["train.py", *argv]
    try:
        yield
    finally:
        sys.argv = saved


def run_name(name: str) -> str:
    """Folder of a run: ``"hippotune, memory lr 1e-2 + LDA"`` -> ``hippotune_memory_lr_1e-2_LDA``."""
    return "_".join(re.sub(r"[^\w.=+-]+", " ", name).replace("=", "-").replace("+", " ").split())


def argv_of(task: str, model: str, extra: list[str], split: list[str], out: Path, backbone: str,
            common: list[str] = COMMON) -> list[str]:
    lr = [] if task == "simplecil" else LR[task]
    return [task, "--model", model, *common, *split, *lr, "--backbone-pretrained", backbone, *extra,
            "--quiet", "--output-dir", str(out)]


def run_group(group: str, runs_dir: Path, backbone: str = "true", only: list[str] | None = None) -> dict[str, Any]:
    """Run (or skip when finished) every run of ``group`` (or those named in ``only``); write the comparison
    of the finished ones; return the summary."""
    from ...cli import train_main
    from .report import load_result, write_comparison

    split = VAL if group == "choices" else TEST
    results, labels = [], []
    for name, (task, model, extra) in GROUPS[group].items():
        home, home_name = SHARED.get((group, name), (group, name))
        out = runs_dir / home / run_name(home_name)
        argv = argv_of(task, model, extra, split, out, backbone, SETTINGS.get(group, COMMON))
        if only and name not in only and not (out / "results.json").exists():
            continue
        if not (out / "results.json").exists():
            print("python train.py " + " ".join(shlex.quote(a) for a in argv), flush=True)
            with as_command_line(argv):
                code = train_main(argv)
            if code:
                raise SystemExit(code)
        results.append(load_result(out))
        labels.append(name)
    where = "val" if group == "choices" else "test"
    setting = "cartoon style, 60 train images/class, 4 epochs" if group == "shift" else \
        "20 train images/class, 3 epochs"
    title = f"PartWorld downstream, 10 tasks, tiny ViT, {setting}, {where} split ({group})"
    return write_comparison(results, runs_dir / group, title, labels)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m visionzoo.methods.hippotune.suite", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--group", nargs="+", choices=sorted(GROUPS), default=["compare", "ablate"])
    p.add_argument("--runs-dir", default="runs/hippotune-suite")
    p.add_argument("--backbone", default="true", help="backbone weights (true: the shipped tiny ViT)")
    p.add_argument("--only", nargs="+", metavar="NAME",
                   help="run only these runs of the group (names as in the table; to split a group over processes)")
    args = p.parse_args(argv)
    for group in args.group:
        if args.only:
            unknown = [n for n in args.only if n not in GROUPS[group]]
            if unknown:
                p.error(f"--only: no run {unknown} in group {group}; runs: {list(GROUPS[group])}")
        run_group(group, Path(args.runs_dir), args.backbone, args.only)
        print((Path(args.runs_dir) / group / "comparison.md").read_text(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
