"""Learning-rate schedules by optimizer step: linear warm-up, then cosine decay or step decay."""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from ..errors import VisionZooError


def cosine_with_warmup(optimizer: Optimizer, total_steps: int, warmup_steps: int = 0,
                       min_lr_ratio: float = 0.0) -> LambdaLR:
    """Multiplier ramps 0→1 over ``warmup_steps`` then follows a cosine to ``min_lr_ratio``."""
    total_steps = max(1, total_steps)

    def factor(step: int) -> float:
        if warmup_steps > 0 and step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return LambdaLR(optimizer, factor)


def step_with_warmup(optimizer: Optimizer, steps_per_epoch: int, step_epochs: float, gamma: float,
                     warmup_steps: int = 0) -> LambdaLR:
    """Warm-up, then lr × ``gamma`` every ``step_epochs`` epochs (torch's StepLR, counted in steps).

    A LambdaLR over optimizer steps rather than ``torch.optim.lr_scheduler.StepLR`` stepped per
    epoch, so that one scheduler object serves every schedule and mid-epoch resume stays exact.
    """
    period = max(1, round(step_epochs * steps_per_epoch))

    def factor(step: int) -> float:
        if warmup_steps > 0 and step < warmup_steps:
            return (step + 1) / warmup_steps
        return gamma ** (step // period)

    return LambdaLR(optimizer, factor)


def build_schedule(optimizer: Optimizer, args, steps_per_epoch: int, total_steps: int,
                   warmup_steps: int) -> LambdaLR:
    """The schedule named by ``--schedule`` (cosine | step)."""
    if getattr(args, "schedule", "cosine") == "step":
        if args.step_epochs <= 0 or not 0 < args.step_gamma <= 1:
            raise VisionZooError(f"--schedule step needs --step-epochs > 0 and 0 < --step-gamma <= 1, got "
                             f"{args.step_epochs} and {args.step_gamma}.")
        return step_with_warmup(optimizer, steps_per_epoch, args.step_epochs, args.step_gamma, warmup_steps)
    return cosine_with_warmup(optimizer, total_steps, warmup_steps, args.min_lr_ratio)
