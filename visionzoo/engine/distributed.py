"""DDP set-up from ``torchrun`` environment variables (gloo on CPU, NCCL on GPU)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` picks CUDA, then MPS, then CPU."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"--device {name} was asked for but CUDA is not available; use --device cpu or auto.")
    return dev


def init_distributed(device: str = "auto") -> DistInfo:
    """Join the process group when launched by torchrun; otherwise a single process."""
    dev = resolve_device(device)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo(device=dev)
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if dev.type == "cuda":
        torch.cuda.set_device(local_rank)
        dev = torch.device("cuda", local_rank)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
    return DistInfo(rank=rank, world_size=world, local_rank=local_rank, device=dev)


def cleanup_distributed() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_sums(sums: dict[str, float], info: DistInfo) -> dict[str, float]:
    """Sum a dict of floats over ranks (keys must match on every rank)."""
    if not info.enabled:
        return dict(sums)
    gathered: list[list[str]] = [[] for _ in range(info.world_size)]
    dist.all_gather_object(gathered, sorted(sums))  # a rank with no batches has no keys yet
    keys = sorted(set().union(*gathered))
    t = torch.tensor([float(sums.get(k, 0.0)) for k in keys], dtype=torch.float64,
                     device=info.device if info.device.type == "cuda" else "cpu")
    dist.all_reduce(t)
    return dict(zip(keys, t.tolist(), strict=True))


def all_true(flag: bool, info: DistInfo) -> bool:
    """True only if ``flag`` is true on every rank."""
    if not info.enabled:
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=info.device if info.device.type == "cuda" else "cpu")
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return bool(t.item() > 0)


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()
