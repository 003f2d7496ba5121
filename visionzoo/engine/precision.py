"""Mixed precision: autocast context and grad scaler from ``--precision``."""

from __future__ import annotations

import contextlib

import torch

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def autocast(precision: str, device: torch.device):
    """``torch.autocast`` for bf16/fp16, a null context for fp32."""
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision not in _DTYPES:
        raise ValueError(f"--precision must be fp32, bf16 or fp16, not {precision!r}")
    return torch.autocast(device_type=device.type, dtype=_DTYPES[precision])


def grad_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler | None:
    """fp16 needs loss scaling; bf16 and fp32 do not."""
    return torch.amp.GradScaler(device.type) if precision == "fp16" else None
