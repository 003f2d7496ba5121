"""``eval.py``: evaluate a model on a dataset and write results (JSON + Markdown)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..errors import VisionZooError
from .distributed import cleanup_distributed, init_distributed
from .evaluator import evaluate
from .runlog import RunLogger, fmt_metrics
from .task import Task


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """A GitHub Markdown table from a list of flat dicts (columns in first-seen order)."""
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]

    def cell(v: Any) -> str:
        return f"{v:.2f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def run_evaluation(task: Task, args: argparse.Namespace) -> dict[str, Any]:
    """Evaluate ``args.model`` (with ``args.pretrained``) on ``args.dataset``; rank 0 writes results."""
    info = init_distributed(args.device)
    try:
        out = Path(args.output_dir)
        log = RunLogger(out, enabled=info.is_main, quiet=args.quiet)
        custom = getattr(task, "run_eval", None)
        if callable(custom):  # methods with several baselines/tables write their own report
            return custom(args, info, log)
        parts = task.build(args, training=False)
        if parts.eval_set is None:
            raise VisionZooError(f"task {task.name!r} built no evaluation set.")
        model = parts.model.to(info.device)
        metrics = evaluate(task, model, parts.eval_set, args, info, log, parts.collate_fn)
        row = {"model": args.model, "weights": str(args.pretrained), "dataset": args.dataset, **metrics}
        if info.is_main:
            log.write_json("results.json", {"task": task.name, "rows": [row]})
            (out / "results.md").write_text(markdown_table([row]))
            log.info(fmt_metrics(metrics))
            log.info(f"results: {out / 'results.json'} and {out / 'results.md'}")
        return {"rows": [row]}
    finally:
        cleanup_distributed()


def read_results(run_dir: str | Path) -> dict[str, Any]:
    return json.loads((Path(run_dir) / "results.json").read_text())
