"""The class-incremental learner: one engine ``fit`` per task, the model carried across tasks.

``train.py <task> --dataset partworld --tasks 10 ...`` calls :meth:`ContinualTask.run_train`. For
each task ``t`` it sets the current label range, calls :func:`visionzoo.engine.fit` with a copy of
the flags (``--output-dir <run>/task_<t>``), and reads the per-task accuracies from the fit's last
evaluation (on the test items of every class seen so far; unseen classes are masked, no task id).
Training masks the logits of classes outside the current task (``--mask-logits``); there is no
rehearsal buffer. After the last task it writes the accuracy matrix, Acc/AAA/forgetting, the
figures and ``results.json``/``results.md`` into the run folder.

Run folder::

    task_00/ ... task_09/    one engine run each (args.yaml, metrics.jsonl, final/, checkpoints/)
    cl_state.json            finished tasks (for --resume)
    results.json results.md  accuracy_curve.png accuracy_matrix.png
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset

from ...checkpoint import load_safetensors, load_state_into, read_config, save_pretrained
from ...cli import parse_pretrained
from ...engine import fit
from ...engine.data import SeededItems
from ...engine.distributed import cleanup_distributed, init_distributed
from ...engine.evaluator import evaluate
from ...engine.task import Task, TaskParts
from ...engine.trainer import seed_everything
from ...errors import CheckpointError, VisionZooError, unknown_name
from ...factory import create_model, create_transforms
from .backbone import FrozenViTLearner
from .config import ContinualConfig
from .flops import training_flops
from .metrics import cl_metrics
from .plots import plot_curves, plot_matrix
from .protocol import Protocol, build_protocol
from .report import write_run_report

STATE_FILE = "cl_state.json"


def parse_weights_flag(value: str | bool) -> bool | str:
    """``"true"``/``"false"`` or a weight source (the CLI's ``--pretrained`` rule)."""
    return value if isinstance(value, bool) else parse_pretrained(value)


def _epoch_seconds(run_dir: Path) -> list[float]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [float(r["seconds"]) for r in recs if r.get("kind") == "epoch"]


class ContinualTask(Task):
    """Base of the class-incremental tasks (``hippotune``, ``l2p``, ``coda``, ``seqhead``, ``simplecil``, ``joint``).

    Subclasses set ``families`` (allowed model families, the first is used for bare timm names),
    ``trains`` (False: a training-free method such as SimpleCIL) and ``joint`` (one stage with all
    classes: the upper bound).
    """

    Config = ContinualConfig
    metric = "acc1"
    default_dataset = "partworld"
    families: tuple[str, ...] = ()
    trains: bool = True
    joint: bool = False

    def __init__(self) -> None:
        self.protocol: Protocol | None = None
        self.model: nn.Module | None = None
        self.stage = 0
        self.label_range = (0, 0)  # labels trained in the current stage
        self.task_of_label: Tensor | None = None
        self.defer_eval = False

    # ------------------------------------------------------------------ set-up
    def resolve_arch(self, name: str) -> str:
        """``--model``: an architecture of an allowed family, a model card, or a bare timm name."""
        from ...cards import find_card
        from ...registry import is_model

        def allowed(arch: str) -> bool:
            return any(arch.startswith(f + "_") for f in self.families)

        if "." in name and find_card(name) is not None:
            arch = find_card(name).architecture
            if not allowed(arch):
                raise VisionZooError(f"model card {name} is a {arch}; `{self.name}` takes "
                                     f"{' / '.join(f + '_*' for f in self.families)} models.")
            return name
        if is_model(name) and allowed(name):
            return name
        import timm
        if timm.is_model(name):
            return f"{self.families[0]}_{name}"
        if is_model(name):
            raise VisionZooError(f"`{self.name}` trains {' / '.join(f + '_*' for f in self.families)} models, not "
                                 f"{name!r}; pass e.g. --model {self.families[0]}_vit_tiny_partworld.")
        raise unknown_name("model", name, [f"{f}_vit_tiny_partworld" for f in self.families],
                           hint=f"`{self.name}` takes <family>_<timm ViT> names or a bare timm ViT name.")

    def model_kwargs(self, cfg: Any) -> dict[str, Any]:
        """Architecture arguments coming from task flags (e.g. ``--adapt-blocks``)."""
        return {}

    def aux_weights(self, cfg: Any) -> dict[str, float]:
        """Weights of the auxiliary terms a model returns (``forward(x, return_aux=True)``)."""
        return {}

    def setup(self, args: argparse.Namespace) -> None:
        """Datasets, split and a fresh (or loaded) model for a run."""
        cfg = self.config_from_args(args)
        self.cfg = cfg
        self.protocol = build_protocol(args.dataset, args.data_root, args.dataset_args, cfg, seed=args.seed)
        self.task_of_label = self.protocol.task_of_label()
        self.model = self.create(args, cfg)

    def create(self, args: argparse.Namespace, cfg: Any) -> FrozenViTLearner:
        p = self.protocol
        arch = self.resolve_arch(args.model)
        pretrained = args.pretrained
        if isinstance(pretrained, str) and pretrained:  # a checkpoint of an earlier run
            model = create_model(arch, pretrained=pretrained)
            self.check_checkpoint(model, str(pretrained))
            return model
        kwargs: dict[str, Any] = {"num_classes": p.num_classes, **self.model_kwargs(cfg)}
        if getattr(cfg, "classifier", None):
            kwargs["classifier"] = cfg.classifier
        kwargs.update(args.model_args or {})
        if pretrained is not True:
            kwargs.setdefault("backbone_pretrained", parse_weights_flag(cfg.backbone_pretrained))
        model = create_model(arch, pretrained=pretrained is True, **kwargs)
        if not isinstance(model, FrozenViTLearner):
            raise VisionZooError(f"{arch} is not a continual learner of visionzoo.methods.hippotune.")
        model.set_class_order(p.scenario.order, p.names_in_order())
        return model

    def check_checkpoint(self, model: nn.Module, where: str) -> None:
        """A loaded checkpoint must have this run's classes and class order."""
        p = self.protocol
        if not isinstance(model, FrozenViTLearner):
            raise CheckpointError(f"{where} does not hold a continual learner of visionzoo.methods.hippotune.")
        if model.num_classes != p.num_classes:
            raise CheckpointError(f"{where} has a head over {model.num_classes} classes; {p.dataset} has "
                                  f"{p.num_classes}.")
        model.check_class_order(p.scenario.order, where)
        if model.class_names is not None and list(model.class_names) != p.names_in_order():
            raise CheckpointError(f"{where} lists other class names than {p.dataset} in this class order.")

    # ------------------------------------------------------------------ engine hooks
    def build(self, args: argparse.Namespace, training: bool) -> TaskParts:
        if self.protocol is None or self.model is None:
            self.setup(args)
            self.enter_stage(0)
        p, model = self.protocol, self.model
        stage_last = p.num_tasks - 1 if self.joint else self.stage
        eval_set = None
        if not (training and self.defer_eval):  # evaluated after the rows are re-anchored instead
            eval_set = SeededItems(p.test_set(stage_last), create_transforms(model, training=False), args.seed)
        train_set = None
        if training:
            raw = self.stage_train_set()
            train_set = SeededItems(raw, create_transforms(model, training=True), args.seed)
        return TaskParts(model=model, train_set=train_set, eval_set=eval_set)

    def stage_train_set(self) -> Dataset:
        """Training items of the current task (joint: of every task, i.e. all classes)."""
        p = self.protocol
        return p.train_set(p.num_tasks - 1, cumulative=True) if self.joint else p.train_set(self.stage)

    def enter_stage(self, stage: int) -> None:
        """Make ``stage`` current: its label range for training and the classes seen for evaluation."""
        b = self.protocol.bounds
        self.stage = stage
        self.label_range = (0, b[-1]) if self.joint else (b[stage], b[stage + 1])
        self.model.num_seen.fill_(self.label_range[1])
        if hasattr(self.model, "set_task"):
            self.model.set_task(stage)

    def param_groups(self, model: nn.Module, args: argparse.Namespace) -> list[dict[str, Any]]:
        # The head is never weight-decayed: rows of classes outside the current task get no gradient,
        # and decoupled decay would still shrink them, erasing old classes.
        scale = getattr(self.cfg, "head_lr_scale", 1.0)
        head, decay, no_decay = [], [], []
        skip = model.no_weight_decay() if hasattr(model, "no_weight_decay") else set()  # timm's convention
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            if name.startswith("head."):
                head.append(p)
            else:
                (decay if p.ndim > 1 and name not in skip else no_decay).append(p)
        body = args.lr * getattr(self.cfg, "adapter_lr_scale", 1.0)
        groups = [{"params": decay, "lr": body}, {"params": no_decay, "weight_decay": 0.0, "lr": body},
                  {"params": head, "weight_decay": 0.0, "lr": args.lr * scale}]
        return [g for g in groups if g["params"]]

    def masked_logits(self, logits: Tensor) -> Tensor:
        """Training logits: classes outside the current task (``--mask-logits``) or unseen ones at −inf."""
        lo, hi = self.label_range
        if getattr(self.cfg, "mask_logits", True):
            lo_mask = lo
        else:
            lo_mask = 0
        out = logits.clone()
        out[:, :lo_mask] = float("-inf")
        out[:, hi:] = float("-inf")
        return out

    def loss(self, model: nn.Module, batch: Any, args: argparse.Namespace) -> dict[str, Tensor]:
        images, target = batch[0], batch[1]
        logits, aux = model(images, return_aux=True)
        ce = F.cross_entropy(self.masked_logits(logits.float()), target)
        total = ce
        for key, w in self.aux_weights(self.cfg).items():
            if w and key in aux:
                total = total + w * aux[key]
        return {"loss": total, "ce": ce.detach(), **{k: v.detach() for k, v in aux.items()}}

    @torch.no_grad()
    def eval_step(self, model: nn.Module, batch: Any, args: argparse.Namespace) -> dict[str, float]:
        images, target = batch[0], batch[1]
        pred = model(images).float().argmax(dim=1)
        correct = (pred == target).float()
        tasks = self.task_of_label.to(target.device)[target]
        last = self.protocol.num_tasks - 1 if self.joint else self.stage
        out = {"correct": float(correct.sum()), "count": float(len(target))}
        for j in range(last + 1):
            sel = tasks == j
            out[f"correct_{j}"] = float(correct[sel].sum())
            out[f"count_{j}"] = float(sel.sum())
        return out

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        out = {"acc1": 100.0 * sums.get("correct", 0.0) / max(1.0, sums.get("count", 0.0)),
               "count": int(sums.get("count", 0))}
        j = 0
        while f"count_{j}" in sums:
            out[f"acc_task_{j}"] = 100.0 * sums[f"correct_{j}"] / max(1.0, sums[f"count_{j}"])
            j += 1
        return out

    # ------------------------------------------------------------------ the protocol
    def stage_args(self, args: argparse.Namespace, stage_dir: Path, resume: Path | None) -> argparse.Namespace:
        s = argparse.Namespace(**vars(args))
        s.output_dir = str(stage_dir)
        s.resume = str(resume) if resume is not None else None
        if not self.cfg.eval_each_epoch:
            s.eval_every = max(1, args.epochs)
        return s

    def run_train(self, args: argparse.Namespace) -> dict[str, Any]:
        """The class-incremental protocol (``train.py <task>``); returns the run's result dict."""
        t0 = time.time()
        seed_everything(args.seed)  # the memories, prompts and head are initialised here, before any fit
        self.setup(args)
        p, cfg = self.protocol, self.cfg
        out = Path(args.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        stages = [0] if self.joint else list(range(p.num_tasks))
        state = self.restore(args, out) if args.resume else None
        if state is None:
            state = {"matrix": [], "curve": [], "epoch_seconds": [], "done": -1,
                     "class_order": p.scenario.order.tolist()}
            if cfg.start_task:
                state["done"] = self.continue_from_checkpoint(args, cfg.start_task)
        flops = self.measure_flops(args) if self.trains else None
        for stage in stages:
            if stage <= state["done"]:
                continue
            self.enter_stage(stage)
            stage_dir = out / ("joint" if self.joint else f"task_{stage:02d}")
            last = stage_dir / "checkpoints" / "last.pt"
            resume = last if args.resume and last.exists() else None
            if self.trains:
                metrics = self.train_stage(args, stage_dir, resume)
                state["epoch_seconds"] += _epoch_seconds(stage_dir)
            else:
                metrics = self.fit_training_free(args, stage_dir)
            n_eval = p.num_tasks if self.joint else stage + 1
            state["matrix"].append([metrics[f"acc_task_{j}"] for j in range(n_eval)])
            state["curve"].append(metrics["acc1"])
            state["done"] = stage
            (out / STATE_FILE).write_text(json.dumps(state, indent=1) + "\n")
        result = self.finish(args, out, state, flops, time.time() - t0)
        return result

    def train_stage(self, args: argparse.Namespace, stage_dir: Path, resume: Path | None) -> dict[str, float]:
        """One task: class-mean rows (``--head-init``), the engine fit, then (``--head-final prototype``)
        the task's rows re-anchored at the trained model's class means, saved and evaluated."""
        cfg = self.cfg
        if resume is None and hasattr(self.model, "begin_task"):  # CODA-Prompt: draw this task's components
            self.model.begin_task(self.stage, seed=args.seed)
        if cfg.head_init == "prototype" and resume is None:
            self.init_head_rows(args)
        lda = getattr(self.model, "lda", None)
        refresh = cfg.head_final == "prototype" or lda is not None
        self.defer_eval = refresh and not cfg.eval_each_epoch
        try:
            res = fit(self, self.stage_args(args, stage_dir, resume))
        finally:
            self.defer_eval = False
        if not refresh:
            return res["metrics"]
        if cfg.head_final == "prototype":
            self.init_head_rows(args)
        if lda is not None:
            self.update_lda(args)
        metrics = evaluate_now(self, args, self.build(args, training=False).eval_set)
        save_pretrained(self.model, stage_dir / "final", extra={"steps": res["steps"], **metrics})
        (stage_dir / "stage_metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
        return metrics

    @torch.no_grad()
    def stage_features(self, args: argparse.Namespace) -> Iterator[tuple[Tensor, Tensor]]:
        """``(features [B, d], labels [B])`` of the current task's training images: what the head reads
        under the current model, with eval preprocessing (the current task's data only)."""
        model = self.model
        items = SeededItems(self.stage_train_set(), create_transforms(model, training=False), args.seed)
        loader = DataLoader(items, batch_size=args.batch_size, shuffle=False, num_workers=args.workers)
        device = next(model.buffers()).device
        was_training = model.training
        model.eval()
        try:
            for batch in loader:
                images, labels = batch[0].to(device), batch[1].to(device)
                yield model.embed(images).float(), labels
        finally:
            model.train(was_training)

    @torch.no_grad()
    def update_lda(self, args: argparse.Namespace) -> None:
        """Add the current task's features to the model's streaming LDA (``--classifier lda``)."""
        for feats, labels in self.stage_features(args):
            self.model.lda.update(feats, labels)

    @torch.no_grad()
    def init_head_rows(self, args: argparse.Namespace) -> None:
        """Rows of the current task's classes := their mean head input over the task's training images
        (eval preprocessing, current model). Uses the current task's data only."""
        model = self.model
        head = getattr(model, "head", None)
        if head is None or not hasattr(head, "init_rows"):
            return
        device = next(model.buffers()).device
        lo, hi = self.label_range
        sums = torch.zeros(hi - lo, model.embed_dim, device=device)
        counts = torch.zeros(hi - lo, device=device)
        for feats, labels in self.stage_features(args):
            sums.index_add_(0, labels - lo, feats)
            counts.index_add_(0, labels - lo, torch.ones_like(labels, dtype=counts.dtype))
        head.init_rows(torch.arange(lo, hi, device=device), sums / counts.clamp_min(1.0)[:, None])

    def fit_training_free(self, args: argparse.Namespace, stage_dir: Path) -> dict[str, float]:
        """Stages of a method without training (SimpleCIL): subclasses update the model here."""
        raise NotImplementedError

    def continue_from_checkpoint(self, args: argparse.Namespace, start: int) -> int:
        """``--start-task k`` with ``--pretrained ckpt``: the checkpoint must have seen the first k tasks."""
        b = self.protocol.bounds
        if not 0 < start < self.protocol.num_tasks:
            raise VisionZooError(f"--start-task must lie in 1..{self.protocol.num_tasks - 1}, got {start}.")
        if not isinstance(args.pretrained, str):
            raise VisionZooError("--start-task needs --pretrained <checkpoint folder of task start_task - 1>.")
        seen = int(self.model.num_seen)
        if seen != b[start]:
            raise CheckpointError(f"{args.pretrained} has seen {seen} classes, but continuing at task {start} needs "
                                  f"a checkpoint after task {start - 1} ({b[start]} classes).")
        return start - 1

    def restore(self, args: argparse.Namespace, out: Path) -> dict[str, Any] | None:
        """``--resume <run folder>``: finished tasks from cl_state.json, the model from the last one."""
        path = out / STATE_FILE
        if Path(args.resume).resolve() != out.resolve():
            raise VisionZooError(f"--resume of a class-incremental run takes its run folder; pass --resume {out} "
                                 f"(or --output-dir {args.resume}).")
        if not path.exists():
            return None
        state = json.loads(path.read_text())
        self.model.check_class_order(state["class_order"], f"{path} (the run being resumed)")
        done = int(state["done"])
        if done >= 0:
            ckpt = out / ("joint" if self.joint else f"task_{done:02d}") / "final"
            config = read_config(ckpt)
            weights = load_safetensors(ckpt / "model.safetensors", config.get("weights_sha256"))
            load_state_into(self.model, weights, config["weights"], where=str(ckpt))
            self.check_checkpoint(self.model, str(ckpt))
        return state

    def measure_flops(self, args: argparse.Namespace) -> dict[str, float]:
        """Training GFLOPs per image on two training images of the first task."""
        self.enter_stage(0)
        parts = self.build(args, training=True)
        items = [parts.train_set[i] for i in range(min(2, len(parts.train_set)))]
        images = torch.stack([it[0] for it in items])
        labels = torch.tensor([it[1] for it in items])

        def step(model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
            return self.loss(model, (x, y), args)["loss"]

        return training_flops(self.model, step, images, labels)

    def finish(self, args: argparse.Namespace, out: Path, state: dict[str, Any], flops: dict[str, float] | None,
               seconds: float) -> dict[str, Any]:
        p = self.protocol
        seen = [p.bounds[-1]] if self.joint else p.bounds[1:len(state["matrix"]) + 1]
        metrics = cl_metrics(state["matrix"], state["curve"])
        secs = state["epoch_seconds"]
        trainable = sum(x.numel() for x in self.model.parameters() if x.requires_grad)
        result = {
            "method": self.name, "model": self.model.visionzoo_cfg.get("architecture", args.model),
            "dataset": p.dataset, "tasks": p.num_tasks,
            "class_order_seed": None if self.cfg.class_order else self.cfg.class_order_seed,
            "class_order": p.scenario.order.tolist(), "eval_split": self.cfg.eval_split,
            "train_per_class": self.cfg.train_per_class, "test_per_class": self.cfg.test_per_class,
            "epochs": args.epochs, "lr": args.lr, "batch_size": args.batch_size, "seed": args.seed,
            "metrics": metrics, "accuracy_matrix": state["matrix"], "accuracy_curve": state["curve"],
            "classes_seen": seen, "flops": flops, "trainable_params": trainable,
            "seconds_per_epoch": sum(secs) / len(secs) if secs else None,
            "seconds": round(seconds, 2), "command": self.command_line(args),
            "figures": {"curve": "accuracy_curve.png", "matrix": "accuracy_matrix.png"},
        }
        label = f"{self.name} ({result['model']})"
        plot_curves({label: (seen, state["curve"])}, out / "accuracy_curve.png",
                    f"{p.dataset}, {p.num_tasks} tasks")
        plot_matrix(state["matrix"], out / "accuracy_matrix.png", label)
        write_run_report(out, result)
        if not args.quiet:
            print(f"{self.name}: Acc {metrics['acc']:.2f}  AAA {metrics['aaa'] if metrics['aaa'] is None else round(metrics['aaa'], 2)}"
                  f"  forgetting {metrics['forgetting'] if metrics['forgetting'] is None else round(metrics['forgetting'], 2)}"
                  f"  -> {out / 'results.md'}", flush=True)
        return result

    @staticmethod
    def command_line(args: argparse.Namespace) -> str:
        argv = getattr(args, "_argv", None) or sys.argv
        return " ".join(shlex.quote(a) for a in argv)

    # ------------------------------------------------------------------ eval.py
    def run_eval(self, args: argparse.Namespace, info: Any, log: Any) -> dict[str, Any]:
        """``eval.py <task> --pretrained <checkpoint>``: per-task accuracy of a checkpoint on the classes it
        has seen (its class order must match the run's split)."""
        if not isinstance(args.pretrained, str):
            raise VisionZooError(f"eval.py {self.name} needs --pretrained <checkpoint folder written by train.py>.")
        self.setup(args)
        p = self.protocol
        seen = int(self.model.num_seen)
        if seen not in p.bounds[1:]:
            raise CheckpointError(f"{args.pretrained} has seen {seen} classes, which is not the end of a task of "
                                  f"this split (task ends: {p.bounds[1:]}).")
        stage = p.bounds.index(seen) - 1
        self.enter_stage(stage)
        parts = self.build(args, training=False)
        model = self.model.to(info.device)
        metrics = evaluate(self, model, parts.eval_set, args, info, log)
        row = {"model": args.model, "weights": str(args.pretrained), "dataset": p.dataset, "after task": stage,
               "classes seen": seen, **metrics}
        out = Path(args.output_dir)
        if info.is_main:
            from ...engine.eval_run import markdown_table
            log.write_json("results.json", {"task": self.name, "rows": [row]})
            (out / "results.md").write_text(markdown_table([row]))
            log.info(f"acc on {seen} seen classes: {metrics['acc1']:.2f} -> {out / 'results.md'}")
        return {"rows": [row]}


def evaluate_now(task: ContinualTask, args: argparse.Namespace, dataset, log=None) -> dict[str, float]:
    """Evaluate ``task.model`` on ``dataset`` outside ``fit`` (training-free methods)."""
    info = init_distributed(args.device)
    try:
        task.model.to(info.device)
        return evaluate(task, task.model, dataset, args, info, log)
    finally:
        cleanup_distributed()
