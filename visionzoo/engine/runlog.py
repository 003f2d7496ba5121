"""Rank-0 logging: tqdm bars on a terminal, plain lines otherwise; metrics.jsonl and results.json."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


class RunLogger:
    """Writes human lines to stdout and machine records to ``<out>/metrics.jsonl``."""

    def __init__(self, out_dir: Path | None, enabled: bool = True, quiet: bool = False):
        self.out_dir, self.enabled, self.quiet = out_dir, enabled, quiet
        self.tty = sys.stderr.isatty()
        self.start = time.time()
        if enabled and out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)

    def info(self, msg: str) -> None:
        if self.enabled and not self.quiet:
            print(msg, flush=True)

    def record(self, **fields: Any) -> None:
        if not (self.enabled and self.out_dir is not None):
            return
        fields = {"time": round(time.time() - self.start, 3), **fields}
        with open(self.out_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(fields) + "\n")

    def progress(self, iterable, total: int, desc: str):
        """A tqdm bar on an interactive terminal, the bare iterable otherwise."""
        if self.enabled and self.tty and not self.quiet:
            from tqdm import tqdm
            return tqdm(iterable, total=total, desc=desc, leave=False, dynamic_ncols=True)
        return iterable

    def write_json(self, name: str, data: dict[str, Any]) -> Path | None:
        if not (self.enabled and self.out_dir is not None):
            return None
        path = self.out_dir / name
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        tmp.replace(path)
        return path


def fmt_metrics(m: dict[str, Any]) -> str:
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in m.items())
