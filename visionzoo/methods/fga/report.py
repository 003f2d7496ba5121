"""FGA result tables: accuracy per set (the paper's Table 1 layout) and costs per method."""

from __future__ import annotations

from typing import Any

from ...engine.eval_run import markdown_table


def _fmt_costs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        out.append({"method": r["method"], "views": r["views"],
                    "s/image": f"{r['s_per_image']:.4f}", "head s/image": f"{r['head_s_per_image']:.4f}",
                    "setup s (per class set)": f"{r['setup_s']:.2f}", "peak MiB": f"{r['peak_mem_mb']:.0f}",
                    "head extra MiB": f"{r['head_extra_mem_mb']:.1f}"})
    return out


def results_markdown(title: str, accuracy: list[dict[str, Any]], costs: list[dict[str, Any]],
                     notes: list[str] | None = None) -> str:
    """A Markdown report: the accuracy table (top-1 %), the cost table and notes."""
    text = f"# {title}\n\nTop-1 accuracy (%); `ood_avg` = mean over every set but the first.\n\n"
    text += markdown_table(accuracy)
    text += "\nCost per method (image encoding of the views it uses + its own head; setup = text encoding, once "
    text += "per class set).\n\n" + markdown_table(_fmt_costs(costs))
    if notes:
        text += "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    return text
