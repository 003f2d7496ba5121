"""Baselines (Aᵀy, A†y, TV-PGD), the PSNR/SSIM evaluation loop and its table/figure writers."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from deepinv.loss.metric import PSNR
from deepinv.utils.phantoms import generate_shepp_logan

from visionzoo.methods.ram import ram_tiny
from visionzoo.methods.ram.baselines import BASELINES, adjoint, pseudo_inverse, tv_pgd
from visionzoo.methods.ram.evaluate import evaluate
from visionzoo.methods.ram.operators import simulate
from visionzoo.methods.ram.report import markdown_table, save_figure_grid, write_tables

# deepinv's phantom generator calls torch.meshgrid without indexing=
pytestmark = pytest.mark.filterwarnings("ignore:torch.meshgrid")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _phantom(size: int = 32) -> torch.Tensor:
    """[1, 3, size, size] Shepp-Logan phantom in [0.1, 0.9] (synthetic, no image files)."""
    return (generate_shepp_logan(size)[None, None].repeat(1, 3, 1, 1) * 0.8 + 0.1).float()


def test_baselines_reconstruct():
    x = _phantom()
    psnr = PSNR()
    _, y, physics = simulate("inpainting:ratio=0.5", x, seed=0)
    torch.testing.assert_close(adjoint(y, physics), y * physics.mask)
    torch.testing.assert_close(pseudo_inverse(y, physics), y * physics.mask)
    _, y, physics = simulate("denoise:noise=gaussian:0.1", x, seed=0)
    assert psnr(tv_pgd(y, physics, iterations=30), x) > psnr(y, x) + 2  # TV removes noise
    x_op, y, physics = simulate("sr:factor=2", x, seed=0)
    sr_pinv = pseudo_inverse(y, physics)
    assert sr_pinv.shape == x_op.shape
    assert psnr(sr_pinv, x_op) > psnr(adjoint(y, physics), x_op)
    assert set(BASELINES) == {"adjoint", "pinv", "tv_pgd"}


def test_evaluate_and_writers(tmp_path):
    np.random.seed(0)
    torch.manual_seed(0)
    images = {"phantom": _phantom(32)[0], "noise": torch.rand(3, 32, 32)}
    model = ram_tiny().eval()
    methods = {"ram_tiny": model, "adjoint": BASELINES["adjoint"], "pinv": BASELINES["pinv"]}
    ops = ["inpainting:ratio=0.5", "mri:accel=4", "sr:factor=2,noise=gaussian:0.01"]
    result = evaluate(methods, ops, images, seed=0)
    assert len(result.rows) == len(ops) * len(images) * len(methods)
    assert all(np.isfinite(r.psnr) and -1 <= r.ssim <= 1 for r in result.rows)
    # adjoint and pseudo-inverse coincide for inpainting; the same measurement is used by all methods
    inp = {r.method: r.psnr for r in result.rows if r.operator.startswith("inpainting") and r.image == "phantom"}
    assert inp["adjoint"] == pytest.approx(inp["pinv"])
    summary = result.summary()
    assert {(s["operator"].split(":")[0], s["method"]) for s in summary} == {
        (o.split(":")[0], m) for o in ops for m in methods}
    assert all(s["images"] == 2 for s in summary)

    md, js, png = tmp_path / "t.md", tmp_path / "t.json", tmp_path / "grid.png"
    write_tables(result, md, js, title="RAM eval", meta={"command": "pytest"})
    text = md.read_text()
    assert "| operator | ram_tiny PSNR / SSIM | adjoint PSNR / SSIM | pinv PSNR / SSIM |" in text
    assert "`mri:accel=4,center=0,mask=gaussian,noise=none`" in text and "command" in text
    payload = json.loads(js.read_text())
    assert payload["meta"] == {"command": "pytest"} and len(payload["rows"]) == len(result.rows)
    assert markdown_table(summary).count("\n") == 2 + len(ops)

    assert len(result.examples) == len(ops)
    save_figure_grid(result.examples, png, method="ram_tiny")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no examples"):
        save_figure_grid([], png)


def test_figure_handles_vector_measurements(tmp_path):
    result = evaluate({"adjoint": adjoint}, ["cs:ratio=0.25"], [torch.rand(1, 16, 16)])
    save_figure_grid(result.examples, tmp_path / "cs.png")
    assert (tmp_path / "cs.png").stat().st_size > 0
