"""Learning-rate schedule: linear warm-up then cosine decay, by optimizer step."""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


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
