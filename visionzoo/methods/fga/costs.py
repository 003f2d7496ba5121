"""Wall-clock time and peak memory of a block of code, on CPU or GPU.

GPU: the CUDA caching allocator's peak (``torch.cuda.max_memory_allocated``), reset per block.
CPU: the process's peak resident set (``VmHWM`` in ``/proc/self/status``), reset per block by
writing ``5`` to ``/proc/self/clear_refs`` (Linux >= 4.0). Where that is not possible the peak is
the process's lifetime maximum and ``exact`` is False.
"""

from __future__ import annotations

import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

_STATUS = Path("/proc/self/status")
_CLEAR = Path("/proc/self/clear_refs")


def _status_kb(key: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_cpu_peak() -> bool:
    try:
        _CLEAR.write_text("5")
        return True
    except OSError:
        return False


def _rss_mb() -> float:
    kb = _status_kb("VmRSS")
    if kb is not None:
        return kb / 1024
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is bytes on macOS, kB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def _cpu_peak_mb() -> float:
    kb = _status_kb("VmHWM")
    return kb / 1024 if kb is not None else _rss_mb()


@dataclass
class Meter:
    """Accumulates seconds over blocks and keeps the largest peak (MiB) seen.

    ``peak_mb``: absolute peak (GPU: allocated; CPU: resident set of the whole process);
    ``extra_mb``: the peak above what was in use when the block started; ``cpu_seconds``: CPU time of
    the process (all threads), steadier than wall time on a machine shared with other work.
    """

    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    peak_mb: float = 0.0
    extra_mb: float = 0.0
    exact: bool = True
    calls: int = 0

    def __post_init__(self) -> None:
        self.device = torch.device(self.device)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def __enter__(self) -> Meter:
        self._sync()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device) / 2**20
        else:
            self.exact = _reset_cpu_peak() and self.exact
            self._base = _rss_mb()
        self._t0, self._c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self._sync()
        self.seconds += time.perf_counter() - self._t0
        self.cpu_seconds += time.process_time() - self._c0
        self.calls += 1
        peak = (torch.cuda.max_memory_allocated(self.device) / 2**20 if self.device.type == "cuda"
                else _cpu_peak_mb())
        self.peak_mb = max(self.peak_mb, peak)
        self.extra_mb = max(self.extra_mb, peak - self._base)
