"""Writers for evaluation results: Markdown + JSON tables and a PNG figure grid."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .evaluate import EvalResult, Example
from .operators import display_image


def markdown_table(summary: Sequence[dict], title: str = "") -> str:
    """Operators as rows, methods as columns, ``PSNR / SSIM`` in each cell."""
    methods = list(dict.fromkeys(r["method"] for r in summary))
    ops = list(dict.fromkeys(r["operator"] for r in summary))
    cell = {(r["operator"], r["method"]): r for r in summary}
    lines = [f"### {title}", ""] if title else []
    lines += ["| operator | " + " | ".join(f"{m} PSNR / SSIM" for m in methods) + " |",
              "|---|" + "---|" * len(methods)]
    for op in ops:
        cells = []
        for m in methods:
            r = cell.get((op, m))
            cells.append(f"{r['psnr']:.2f} / {r['ssim']:.3f}" if r else "–")
        lines.append(f"| `{op}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_tables(result: EvalResult, md_path: str | Path, json_path: str | Path, title: str = "",
                 meta: dict[str, Any] | None = None) -> None:
    """Write the per-(operator, method) means as Markdown and everything (rows too) as JSON.

    ``meta`` (e.g. the command, model names, image list) is stored in the JSON and printed above
    the Markdown table.
    """
    summary = result.summary()
    md = markdown_table(summary, title)
    if meta:
        md = "".join(f"- {k}: `{v}`\n" for k, v in meta.items()) + "\n" + md
    Path(md_path).parent.mkdir(parents=True, exist_ok=True)
    Path(md_path).write_text(md)
    payload = {"meta": meta or {}, "summary": summary, "rows": result.row_dicts()}
    Path(json_path).parent.mkdir(parents=True, exist_ok=True)
    Path(json_path).write_text(json.dumps(payload, indent=2) + "\n")


def _as_picture(t: Tensor) -> Tensor:
    """Any measurement/image -> ``[H, W]`` or ``[H, W, 3]`` in [0, 1] for imshow."""
    t = t.detach().float().cpu()
    if t.ndim == 4:
        t = display_image(t[:1])[0]
    elif t.ndim == 3 and t.shape[0] in (1, 2, 3):
        t = display_image(t[None])[0]
    else:  # vector measurements (compressed sensing): fold into a square
        flat = t.reshape(-1)
        side = math.ceil(math.sqrt(flat.numel()))
        flat = torch.cat([flat, flat.new_zeros(side * side - flat.numel())])
        t = flat.reshape(1, side, side)
    lo, hi = float(t.min()), float(t.max())
    if lo < 0 or hi > 1:  # k-space, sinograms, signed data: rescale for display
        t = (t - lo) / max(hi - lo, 1e-12)
    return t[0] if t.shape[0] == 1 else t.permute(1, 2, 0)


def save_figure_grid(examples: Sequence[Example], path: str | Path, method: str | None = None) -> None:
    """One row per example: measurement | Aᵀy | ``method`` (default: the first) | truth."""
    from matplotlib.figure import Figure  # no pyplot: no global backend or figure state

    if not examples:
        raise ValueError("no examples to plot; evaluate(..., examples_per_operator >= 1).")
    method = method or next(iter(examples[0].outputs))
    cols = ["measurement", "Aᵀy", method, "truth"]
    from deepinv.loss.metric import PSNR

    fig = Figure(figsize=(10, 2.8 * len(examples)))
    axes = fig.subplots(len(examples), 4, squeeze=False)
    for row, ex in zip(axes, examples, strict=True):
        pics = [ex.measurement, ex.adjoint.clamp(0, 1), ex.outputs[method].clamp(0, 1), ex.truth]
        psnr = PSNR(max_pixel=1.0, complex_abs=ex.truth.shape[1] == 2)
        for j, (ax, pic, title) in enumerate(zip(row, pics, cols, strict=True)):
            img = _as_picture(pic)
            ax.imshow(img.numpy(), cmap="gray" if img.ndim == 2 else None, vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if j == 0:
                ax.set_ylabel(ex.operator.split(",noise=")[0], fontsize=7)
            if j in (1, 2):  # every row: the operators differ, so do the scores
                title += f"\n{float(psnr(pic.float(), ex.truth.float()).mean()):.2f} dB"
            ax.set_title(title, fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
