"""The training loop every method plugs into (see :class:`~visionzoo.engine.task.Task`).

Run folder (``--output-dir``)::

    args.yaml            resolved flags
    metrics.jsonl        one JSON record per logged step / evaluation
    checkpoints/last.pt  full training state for --resume (atomic; also every --save-every epochs)
    best/  final/        save_pretrained folders (config.json + model.safetensors)
    results.json         final metrics and where everything is
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import torch
import yaml
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from ..checkpoint import save_pretrained
from ..errors import NonFiniteLossError, VisionZooError
from .data import ResumableSampler, SeededItems
from .distributed import DistInfo, all_true, barrier, cleanup_distributed, init_distributed
from .evaluator import evaluate, to_device
from .precision import autocast, grad_scaler
from .runlog import RunLogger, fmt_metrics
from .sam import sam_backward
from .schedule import build_schedule
from .state import STATE_NAME, load_training_state, restore, save_training_state
from .task import Task


def seed_everything(seed: int) -> None:
    import random

    import numpy as np
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def build_optimizer(groups: list[dict[str, Any]], args: argparse.Namespace) -> torch.optim.Optimizer:
    name = args.opt.lower()
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=args.lr, weight_decay=args.weight_decay)
    if name == "adam":
        return torch.optim.Adam(groups, lr=args.lr, weight_decay=args.weight_decay)
    if name == "sgd":
        return torch.optim.SGD(groups, lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    raise VisionZooError(f"unknown optimizer {args.opt!r}; use adamw, adam or sgd.")


def _args_dict(args: argparse.Namespace) -> dict[str, Any]:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if not k.startswith("_")}


def command_line(args: argparse.Namespace) -> str:
    """``python train.py ...`` as parsed (``sys.argv`` when the namespace was not built by the CLI)."""
    argv = getattr(args, "_argv", None) or ["train.py", *sys.argv[1:]]
    return "python " + " ".join(shlex.quote(a) for a in argv)


def fit(task: Task, args: argparse.Namespace) -> dict[str, Any]:
    """Train ``task`` as ``args`` say; returns the final results (also written to results.json)."""
    info = init_distributed(args.device)
    try:
        return _fit(task, args, info)
    finally:
        cleanup_distributed()


def _fit(task: Task, args: argparse.Namespace, info: DistInfo) -> dict[str, Any]:
    out = Path(args.output_dir)
    log = RunLogger(out, enabled=info.is_main, quiet=args.quiet)
    seed_everything(args.seed)  # same init on every rank; DDP also broadcasts at wrap time
    parts = task.build(args, training=True)
    model = parts.model.to(info.device)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    if parts.train_set is None:
        raise VisionZooError(f"task {task.name!r} built no training set.")
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        raise VisionZooError(f"{args.model} has no trainable parameters; nothing to train.")

    train_items = parts.train_set if isinstance(parts.train_set, SeededItems) else SeededItems(parts.train_set, None, args.seed)
    sampler = ResumableSampler(len(train_items), seed=args.seed, shuffle=True, rank=info.rank,
                               world_size=info.world_size)
    steps_per_epoch = math.ceil(sampler.per_epoch() / args.batch_size)
    total_steps = steps_per_epoch * args.epochs
    optimizer = build_optimizer(task.param_groups(model, args), args)
    warmup = args.warmup_steps if args.warmup_steps is not None else int(args.warmup_epochs * steps_per_epoch)
    scheduler = build_schedule(optimizer, args, steps_per_epoch, total_steps, warmup)
    scaler = grad_scaler(args.precision, info.device)
    if args.sam_rho > 0 and scaler is not None:
        raise VisionZooError("--sam-rho does not combine with --precision fp16 (loss scaling); use bf16 or fp32.")

    step, start_epoch, start_in_epoch, best = 0, 0, 0, None
    if args.resume:
        state = load_training_state(args.resume)
        restore(state, model=model, optimizer=optimizer, scheduler=scheduler, scaler=scaler, where=str(args.resume))
        step, start_epoch, start_in_epoch, best = state["step"], state["epoch"], state["step_in_epoch"], state["best"]
        if start_in_epoch >= steps_per_epoch:
            start_epoch, start_in_epoch = start_epoch + 1, 0
        log.info(f"resumed from {args.resume} at step {step} (epoch {start_epoch}, batch {start_in_epoch})")

    if info.is_main:
        out.mkdir(parents=True, exist_ok=True)
        (out / "args.yaml").write_text(yaml.safe_dump(_args_dict(args), sort_keys=True))
    train_model: nn.Module = model
    if info.enabled:
        train_model = DistributedDataParallel(model, device_ids=[info.device.index] if info.device.type == "cuda" else None)
    if args.compile:
        train_model = torch.compile(train_model)

    ckpt_dir = out / "checkpoints"
    state_path = ckpt_dir / STATE_NAME
    n_params = sum(p.numel() for p in trainable)
    log.info(f"training {args.model} on {args.dataset}: {len(train_items)} images, {args.epochs} epochs x "
             f"{steps_per_epoch} steps, batch {args.batch_size} x {info.world_size} proc, {n_params:,} trainable "
             f"params, device {info.device}, precision {args.precision}")

    def save_state(epoch: int, in_epoch: int) -> None:
        if info.is_main:
            save_training_state(state_path, model=model, optimizer=optimizer, scheduler=scheduler, scaler=scaler,
                                step=step, epoch=epoch, step_in_epoch=in_epoch, best=best, args=_args_dict(args))
        barrier(info)

    metrics: dict[str, float] = {}
    t0 = time.time()
    interrupted = False
    for epoch in range(start_epoch, args.epochs):
        skip = start_in_epoch if epoch == start_epoch else 0
        sampler.set_epoch(epoch, start=skip * args.batch_size)
        train_items.set_epoch(epoch)
        loader = DataLoader(train_items, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers,
                            collate_fn=parts.collate_fn, pin_memory=info.device.type == "cuda",
                            # its own generator: creating the iterator must not draw from the global RNG,
                            # or a resumed run would see a shifted dropout stream
                            generator=torch.Generator().manual_seed(args.seed * 7_919 + epoch))
        train_model.train()
        in_epoch = skip
        epoch_start = time.time()
        for batch in log.progress(loader, len(loader), f"epoch {epoch + 1}/{args.epochs}"):
            batch = to_device(batch, info.device)
            optimizer.zero_grad(set_to_none=True)
            if args.sam_rho > 0:
                outs = {}

                def closure(batch=batch, outs=outs):
                    with autocast(args.precision, info.device):
                        o = task.loss(train_model, batch, args)
                    if not outs:
                        outs.update(o)
                    return o["loss"]

                loss = sam_backward(closure, trainable, args.sam_rho, args.sam_lambda)
            else:
                with autocast(args.precision, info.device):
                    outs = task.loss(train_model, batch, args)
                loss = outs["loss"]
            if not all_true(bool(torch.isfinite(loss.detach()).all()), info):
                where = state_path if state_path.exists() else "none written yet"
                raise NonFiniteLossError(
                    f"loss became {loss.item()} at step {step + 1} (epoch {epoch + 1}); stopping. The last good "
                    f"checkpoint is untouched: {where}. Lower --lr, add --clip-grad, or use --precision fp32.")
            if args.sam_rho > 0:
                pass  # gradients are already in place
            elif scaler is not None:
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
            else:
                loss.backward()
            if args.clip_grad:
                torch.nn.utils.clip_grad_norm_(trainable, args.clip_grad)
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            scheduler.step()
            step += 1
            in_epoch += 1
            if step % args.log_every == 0 or in_epoch == steps_per_epoch:
                scalars = {k: float(v.detach()) for k, v in outs.items()}
                log.record(kind="train", step=step, epoch=epoch + 1, lr=scheduler.get_last_lr()[0], **scalars)
                if not log.tty:
                    log.info(f"step {step}/{total_steps} epoch {epoch + 1} " + fmt_metrics(scalars))
            if args.max_steps and step >= args.max_steps:
                interrupted = True
                break
        epoch_s = time.time() - epoch_start
        if interrupted and in_epoch < steps_per_epoch:
            save_state(epoch, in_epoch)
            log.info(f"stopped at --max-steps {args.max_steps}; resume with --resume {out}")
            break
        log.record(kind="epoch", epoch=epoch + 1, step=step, seconds=round(epoch_s, 3))
        is_last = epoch + 1 == args.epochs
        if parts.eval_set is not None and ((epoch + 1) % args.eval_every == 0 or is_last):
            metrics = evaluate(task, model, parts.eval_set, args, info, log, parts.collate_fn)
            log.record(kind="eval", epoch=epoch + 1, step=step, **metrics)
            log.info(f"epoch {epoch + 1}: " + fmt_metrics(metrics))
            score = metrics.get(task.metric)
            if score is not None and (best is None or score > best):
                best = score
                if info.is_main:
                    save_pretrained(model, out / "best", extra={"epoch": epoch + 1, task.metric: score})
        save_state(epoch + 1, 0)
        if args.save_every and (epoch + 1) % args.save_every == 0 and info.is_main:
            save_training_state(ckpt_dir / f"epoch_{epoch + 1:04d}.pt", model=model, optimizer=optimizer,
                                scheduler=scheduler, scaler=scaler, step=step, epoch=epoch + 1, step_in_epoch=0,
                                best=best, args=_args_dict(args))
        if interrupted:
            log.info(f"stopped at --max-steps {args.max_steps}; resume with --resume {out}")
            break

    interrupted = step < total_steps
    results: dict[str, Any] = {"task": task.name, "model": args.model, "dataset": args.dataset, "steps": step,
                               "interrupted": interrupted, "seconds": round(time.time() - t0, 2),
                               "world_size": info.world_size, "metrics": metrics, "best": best,
                               "output_dir": str(out), "resume_state": str(state_path),
                               "command": command_line(args)}
    if not interrupted and info.is_main:
        results["final"] = str(save_pretrained(model, out / "final", extra={"steps": step, **metrics}))
        if (out / "best").exists():
            results["best_checkpoint"] = str(out / "best")
    barrier(info)
    if info.is_main:
        log.write_json("results.json", results)
        log.info(f"results: {out / 'results.json'}")
    return results
