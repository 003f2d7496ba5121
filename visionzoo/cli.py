"""Command-line front ends: ``train.py <task> ...`` and ``eval.py <task> ...``.

Common flags are defined here once; each task adds its own from its config dataclass (so the flags
cannot drift from the code). ``--config file.yaml`` supplies defaults whose keys are the long flag
names (``batch-size`` or ``batch_size``); flags given on the command line win.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import time
import types
import typing
from pathlib import Path
from typing import Any

import yaml

from .errors import NonFiniteLossError, VisionZooError, close_matches


# ----------------------------------------------------------------------------- value parsing
def parse_pretrained(value: str) -> bool | str:
    """``true``/``false`` or a path / ``hf-hub:`` id / URL."""
    low = value.strip().lower()
    if low in ("true", "yes", "1"):
        return True
    if low in ("false", "no", "0", "none", ""):
        return False
    return value


SCIENTIFIC = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+")


def parse_kv(items: list[str] | None) -> dict[str, Any]:
    """``["depth=2", "img_size=32"]`` -> ``{"depth": 2, "img_size": 32}`` (values read as YAML)."""
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise argparse.ArgumentTypeError(f"expected key=value, got {item!r}")
        key, val = item.split("=", 1)
        value = yaml.safe_load(val)
        if isinstance(value, str) and SCIENTIFIC.fullmatch(value.strip()):
            value = float(value)  # YAML 1.1 reads "1e-3" (no dot) as a string; a user means the number
        out[key.strip().replace("-", "_")] = value
    return out


# ----------------------------------------------------------------------------- flags from dataclasses
def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def add_dataclass_args(parser: argparse.ArgumentParser, cls: type, title: str) -> None:
    """One ``--field-name`` per dataclass field: type, default, choices and help from the field."""
    fields = dataclasses.fields(cls)
    if not fields:
        return
    group = parser.add_argument_group(title)
    hints = typing.get_type_hints(cls)
    for f in fields:
        tp, optional = _unwrap_optional(hints[f.name])
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)  # type: ignore[misc]
        helptext = f.metadata.get("help", "")
        flag = "--" + f.name.replace("_", "-")
        kw: dict[str, Any] = {"dest": f.name, "default": default, "help": helptext}
        origin = typing.get_origin(tp)
        if tp is bool:
            kw["action"] = argparse.BooleanOptionalAction
        elif origin is typing.Literal:
            kw["choices"] = list(typing.get_args(tp))
            kw["type"] = type(kw["choices"][0])
        elif origin in (list, tuple):
            inner = typing.get_args(tp)[0] if typing.get_args(tp) else str
            kw.update(nargs="*" if optional else "+", type=inner)
        else:
            kw["type"] = tp
        if "choices" in f.metadata:
            kw["choices"] = f.metadata["choices"]
        group.add_argument(flag, **kw)


# ----------------------------------------------------------------------------- parsers
class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows real defaults only (not None/False), keeps epilog layout."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "%(default)" in text:
            return text
        return text + " (default: %(default)s)"


def _common(p: argparse.ArgumentParser, training: bool, task) -> None:
    g = p.add_argument_group("common")
    g.add_argument("--config", help="YAML file of defaults; keys are long flag names; command-line flags win")
    g.add_argument("--model", required=False, help="architecture or published name (see `python -m visionzoo list`)")
    g.add_argument("--pretrained", type=parse_pretrained, default=False,
                   help="true (model card), false, a checkpoint folder/file, hf-hub:org/repo[@rev], or a URL")
    g.add_argument("--model-args", nargs="*", metavar="KEY=VALUE", default=None,
                   help="extra architecture arguments, e.g. num_classes=10 img_size=64")
    g.add_argument("--dataset", default=task.default_dataset, help="dataset name (see `python -m visionzoo list`)")
    g.add_argument("--data-root", default=None, help="folder of a dataset that lives on disk")
    g.add_argument("--dataset-args", nargs="*", metavar="KEY=VALUE", default=None,
                   help="extra dataset arguments, e.g. image_size=64 style=sketch")
    g.add_argument("--batch-size", type=int, default=32, help="images per step and process")
    g.add_argument("--device", default="auto", help="auto (cuda > mps > cpu), cpu, cuda, cuda:1 ...")
    g.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32", help="autocast precision")
    g.add_argument("--compile", action=argparse.BooleanOptionalAction, default=False, help="torch.compile the model")
    g.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=False,
                   help="channels_last memory format (faster convolutions on GPU)")
    g.add_argument("--seed", type=int, default=0, help="seeds init, data order and augmentation")
    g.add_argument("--output-dir", default=None, help="run folder (default: runs/<task>-<time>)")
    g.add_argument("--workers", type=int, default=0, help="data-loading worker processes")
    g.add_argument("--quiet", action="store_true", help="print nothing but errors")
    if training:
        t = p.add_argument_group("training")
        t.add_argument("--epochs", type=int, default=10, help="passes over the training set")
        t.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
        t.add_argument("--opt", choices=["adamw", "adam", "sgd"], default="adamw", help="optimizer")
        t.add_argument("--weight-decay", type=float, default=0.05, help="decoupled (AdamW) or L2 weight decay")
        t.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
        t.add_argument("--schedule", choices=["cosine", "step"], default="cosine",
                       help="lr schedule after warm-up: cosine decay to --min-lr-ratio, or step decay "
                            "(× --step-gamma every --step-epochs, like torch's StepLR)")
        t.add_argument("--step-epochs", type=float, default=4.0, help="step schedule: epochs between decays")
        t.add_argument("--step-gamma", type=float, default=0.5, help="step schedule: lr factor at each decay")
        t.add_argument("--warmup-epochs", type=float, default=0.0, help="linear warm-up before the schedule")
        t.add_argument("--warmup-steps", type=int, default=None, help="overrides --warmup-epochs")
        t.add_argument("--min-lr-ratio", type=float, default=0.0, help="final lr / peak lr of the cosine")
        t.add_argument("--clip-grad", type=float, default=None, help="max gradient norm")
        t.add_argument("--sam-rho", type=float, default=0.0,
                       help="sharpness-aware minimisation radius ρ (0 = off; two passes per step)")
        t.add_argument("--sam-lambda", type=float, default=1.0,
                       help="weight λ of the sharpness term: ℓ(p) + λ[ℓ(p+ε*) − ℓ(p)] (1 = plain SAM)")
        t.add_argument("--eval-every", type=int, default=1, help="evaluate every N epochs (and at the end)")
        t.add_argument("--save-every", type=int, default=0, help="also keep checkpoints/epoch_N.pt every N epochs")
        t.add_argument("--log-every", type=int, default=10, help="log every N steps")
        t.add_argument("--max-steps", type=int, default=0, help="stop (resumably) after N steps in total")
        t.add_argument("--resume", default=None, help="run folder or checkpoints/last.pt to continue exactly")


def build_parser(training: bool) -> argparse.ArgumentParser:
    from .engine import get_task, list_tasks

    prog = "train.py" if training else "eval.py"
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=_HelpFormatter,
        description=("Train" if training else "Evaluate") + " a visionzoo method. "
                    f"`{prog} TASK --help` lists the flags of one task.")
    sub = parser.add_subparsers(dest="task", metavar="TASK", required=True)
    for name in list_tasks():
        task = get_task(name)
        sp = sub.add_parser(name, help=task.help, description=task.help, formatter_class=_HelpFormatter)
        _common(sp, training, task)
        add_dataclass_args(sp, task.Config, f"{name} options")
        epilog = getattr(task, "epilog", None)
        if epilog:
            sp.epilog = epilog
    return parser


def _apply_config_file(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Set the subparser's defaults from ``--config`` so explicit flags still win."""
    if "--config" not in argv and not any(a.startswith("--config=") for a in argv):
        return
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config")
    known, _ = pre.parse_known_args(argv)
    path = Path(known.config)
    if not path.exists():
        raise VisionZooError(f"--config {path}: no such file.")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise VisionZooError(f"--config {path}: expected a mapping of flag names to values.")
    task_name = next((a for a in argv if not a.startswith("-")), None)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sp = sub.choices.get(task_name) if task_name else None
    if sp is None:
        return
    dests = {a.dest: a for a in sp._actions if a.dest not in ("help", "config")}
    mapped = {}
    for key, val in data.items():
        dest = str(key).lstrip("-").replace("-", "_")
        if dest not in dests:
            hint = close_matches(dest, dests)
            raise VisionZooError(f"--config {path}: unknown key {key!r}" + (f"; did you mean {hint}?" if hint else "."))
        action = dests[dest]
        if isinstance(val, str) and action.type is not None and action.nargs is None:
            val = action.type(val)
        mapped[dest] = val
    sp.set_defaults(**mapped)


def parse_args(argv: list[str] | None, training: bool) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(training)
    _apply_config_file(parser, argv)
    args = parser.parse_args(argv)
    # the command that reproduces this run, also when called from code (train_main([...]))
    args._argv = ["train.py" if training else "eval.py", *argv]
    if not args.model:
        parser.error("--model is required (on the command line or in --config)")
    args.model_args = parse_kv(args.model_args) if isinstance(args.model_args, list) else (args.model_args or {})
    args.dataset_args = parse_kv(args.dataset_args) if isinstance(args.dataset_args, list) else (args.dataset_args or {})
    if args.output_dir is None:
        args.output_dir = os.path.join("runs", f"{args.task}-{time.strftime('%Y%m%d-%H%M%S')}")
    return args


def _run(main, argv: list[str] | None) -> int:
    try:
        main(argv)
    except NonFiniteLossError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    except VisionZooError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def _train(argv: list[str] | None) -> dict[str, Any]:
    from .engine import fit, get_task
    args = parse_args(argv, training=True)
    task = get_task(args.task)
    custom = getattr(task, "run_train", None)
    if callable(custom):  # protocols made of several fits (e.g. class-incremental tasks) drive the engine
        return custom(args)
    return fit(task, args)


def _eval(argv: list[str] | None) -> dict[str, Any]:
    from .engine import get_task
    from .engine.eval_run import run_evaluation
    args = parse_args(argv, training=False)
    return run_evaluation(get_task(args.task), args)


def train_main(argv: list[str] | None = None) -> int:
    """Console script ``visionzoo-train``."""
    return _run(_train, argv)


def eval_main(argv: list[str] | None = None) -> int:
    """Console script ``visionzoo-eval``."""
    return _run(_eval, argv)
