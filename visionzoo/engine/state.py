"""Full training state for ``--resume``: model, optimizer, scheduler, scaler, RNG, step, epoch."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..checkpoint import atomic_torch_save, load_state_into, state_to_save
from ..errors import CheckpointError

STATE_NAME = "last.pt"


def rng_state() -> dict[str, Any]:
    """RNG states as tensors/lists only, so ``weights_only=True`` can read them back."""
    np_state = np.random.get_state()
    out: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": [list(x) if isinstance(x, tuple) else x for x in random.getstate()],
        "numpy": [np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), *np_state[2:]],
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = torch.cuda.get_rng_state_all()
    return out


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    npst = state["numpy"]
    np.random.set_state((npst[0], npst[1].numpy().astype(np.uint32), *npst[2:]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_training_state(path: str | os.PathLike, *, model, optimizer, scheduler, scaler, step: int,
                        epoch: int, step_in_epoch: int, best: float | None, args: dict[str, Any]) -> None:
    """Write the resume file atomically (rank 0 only)."""
    model = getattr(model, "module", model)
    weights, mode = state_to_save(model)
    atomic_torch_save({
        "model": weights, "model_mode": mode,
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "scaler": scaler.state_dict() if scaler is not None else None,
        "rng": rng_state(),
        "step": step, "epoch": epoch, "step_in_epoch": step_in_epoch, "best": best,
        "args": args,
    }, path)


def load_training_state(path: str | os.PathLike) -> dict[str, Any]:
    """Read a resume file with ``weights_only=True``; damaged files raise CheckpointError."""
    path = Path(path)
    if path.is_dir():
        path = path / "checkpoints" / STATE_NAME if (path / "checkpoints").is_dir() else path / STATE_NAME
    if not path.exists():
        raise CheckpointError(f"no training state at {path}; --resume takes a run folder or its checkpoints/last.pt.")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise CheckpointError(f"cannot read training state {path} ({type(e).__name__}: {e}); it is corrupt or "
                              "truncated. Resume from an earlier checkpoint.") from e
    if not isinstance(state, dict) or "model" not in state or "step" not in state:
        raise CheckpointError(f"{path} is not a visionzoo training state.")
    return state


def restore(state: dict[str, Any], *, model, optimizer, scheduler, scaler, where: str) -> None:
    """Validate then restore everything from a loaded resume state."""
    load_state_into(getattr(model, "module", model), state["model"], state["model_mode"], where=where)
    try:
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
    except (ValueError, KeyError) as e:
        raise CheckpointError(f"{where}: optimizer/scheduler state does not fit this run ({e}); resume with "
                              "the same model, trainable parameters and optimizer.") from e
    if scaler is not None and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])
    set_rng_state(state["rng"])
