"""Markdown + JSON results of class-incremental runs (one run, or several methods side by side)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...engine.eval_run import markdown_table


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3g}" if 0 < abs(v) < 1 else f"{v:.2f}"
    return str(v)


def summary_row(result: dict[str, Any]) -> dict[str, Any]:
    """The one-line summary of a run result (as written by the learner)."""
    m = result["metrics"]
    flops = result.get("flops") or {}
    return {"method": result["method"], "model": result["model"], "Acc": m["acc"], "AAA": m["aaa"],
            "forgetting": m["forgetting"], "train GFLOPs/img (fwd)": flops.get("forward_gflops"),
            "train GFLOPs/img (fwd+bwd)": flops.get("train_gflops"),
            "s/epoch": result.get("seconds_per_epoch"), "trainable params": result.get("trainable_params")}


def comparison_markdown(results: list[dict[str, Any]]) -> str:
    """A Markdown table with one row per run."""
    rows = [{k: _fmt(v) for k, v in summary_row(r).items()} for r in results]
    return markdown_table(rows)


def matrix_markdown(matrix: list[list[float]], curve: list[float], seen: list[int]) -> str:
    """The accuracy matrix as a Markdown table (rows: after task t; columns: task j; last: all seen)."""
    cols = max(len(r) for r in matrix)
    rows = []
    for t, (r, a, s) in enumerate(zip(matrix, curve, seen, strict=True)):
        row: dict[str, Any] = {"after": f"task {t}" if len(matrix) > 1 else "joint", "seen": s}
        row.update({f"T{j}": _fmt(r[j]) if j < len(r) else "" for j in range(cols)})
        row["all seen"] = _fmt(a)
        rows.append(row)
    return markdown_table(rows)


def write_run_report(out: Path, result: dict[str, Any]) -> None:
    """``results.json`` and ``results.md`` of one run in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "results.json.tmp"
    tmp.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    tmp.replace(out / "results.json")
    m = result["metrics"]
    lines = [f"# {result['method']} on {result['dataset']} ({result['tasks']} tasks)", "",
             f"Model `{result['model']}`, class order seed {result['class_order_seed']}, eval split "
             f"`{result['eval_split']}`.", "",
             f"**Acc** {_fmt(m['acc'])} · **AAA** {_fmt(m['aaa'])} · **forgetting** {_fmt(m['forgetting'])}", "",
             comparison_markdown([result]), "## Accuracy matrix (%)", "",
             matrix_markdown(result["accuracy_matrix"], result["accuracy_curve"], result["classes_seen"]), ""]
    if result.get("command"):
        lines += ["Command:", "", "```", result["command"], "```", ""]
    (out / "results.md").write_text("\n".join(lines))


def load_result(run_dir: str | Path) -> dict[str, Any]:
    """``results.json`` of a class-incremental run folder."""
    path = Path(run_dir) / "results.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; is {run_dir} a finished class-incremental run?")
    data = json.loads(path.read_text())
    if "accuracy_matrix" not in data:
        raise ValueError(f"{path} is not the result of a class-incremental run (no accuracy_matrix).")
    return data


def write_comparison(results: list[dict[str, Any]], out: Path, title: str = "",
                     labels: list[str] | None = None) -> dict[str, Any]:
    """Side-by-side table (``comparison.md``/``comparison.json``) and accuracy curves
    (``accuracy_curves.png``) of several runs in ``out``."""
    from .plots import plot_curves

    out.mkdir(parents=True, exist_ok=True)
    labels = labels or [r["method"] for r in results]
    curves = {lab: (r["classes_seen"], r["accuracy_curve"]) for lab, r in zip(labels, results, strict=True)
              if len(r["accuracy_curve"]) > 1}
    refs = {f"{lab} (all classes at once)": r["accuracy_curve"][-1] for lab, r in zip(labels, results, strict=True)
            if len(r["accuracy_curve"]) == 1}
    plot_curves(curves, out / "accuracy_curves.png", title, refs)
    rows = []
    for lab, r in zip(labels, results, strict=True):
        row = summary_row(r)
        row["method"] = lab
        rows.append(row)
    table = markdown_table([{k: _fmt(v) for k, v in row.items()} for row in rows])
    commands = [f"- {lab}: `{r.get('command', '')}`" for lab, r in zip(labels, results, strict=True)]
    (out / "comparison.md").write_text(f"# {title}\n\n{table}\nCommands:\n\n" + "\n".join(commands) + "\n")
    summary = {"title": title, "rows": rows,
               "commands": {lab: r.get("command") for lab, r in zip(labels, results, strict=True)},
               "accuracy_matrices": {lab: r["accuracy_matrix"] for lab, r in zip(labels, results, strict=True)},
               "accuracy_curves": {lab: {"classes_seen": r["classes_seen"], "acc": r["accuracy_curve"]}
                                   for lab, r in zip(labels, results, strict=True)}}
    (out / "comparison.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    """``python -m visionzoo.methods.hippotune.report RUN_DIR... --out DIR [--labels ...]``."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m visionzoo.methods.hippotune.report",
                                description="Compare finished class-incremental runs (table + curves).")
    p.add_argument("runs", nargs="+", help="run folders (each with results.json)")
    p.add_argument("--out", required=True, help="folder for comparison.md/.json and accuracy_curves.png")
    p.add_argument("--labels", nargs="*", default=None, help="one label per run (default: the method names)")
    p.add_argument("--title", default="", help="figure and table title")
    args = p.parse_args(argv)
    results = [load_result(r) for r in args.runs]
    if args.labels and len(args.labels) != len(results):
        p.error(f"{len(args.labels)} labels for {len(results)} runs")
    write_comparison(results, Path(args.out), args.title, args.labels)
    print((Path(args.out) / "comparison.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
