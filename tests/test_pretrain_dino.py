"""``train.py pretrain --objective dino``: self-distillation on a tiny ViT (depth 2, width 32)."""

from __future__ import annotations

import json

import pytest
import timm
import torch

import visionzoo
from visionzoo.cli import train_main
from visionzoo.methods.pretrain.dino import Dino
from visionzoo.methods.pretrain.multicrop import MultiCrop

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TINY = dict(depth=2, embed_dim=32, num_heads=2)


def _views(b: int = 4, n_local: int = 2) -> list[torch.Tensor]:
    return [torch.randn(b, 3, 64, 64), torch.randn(b, 3, 64, 64), *(torch.randn(b, 3, 32, 32) for _ in range(n_local))]


def test_loss_finite_teacher_is_ema_of_student_and_centres_update():
    torch.manual_seed(0)
    model = Dino("vit_tiny_partworld", out_dim=64, ema_momentum=0.9, **TINY).train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    assert not any(p.requires_grad for p in model.net.parameters())
    for _ in range(3):
        teacher_before = [p.clone() for p in model.net.parameters()]
        student = [p.detach().clone() for p in model.student.parameters()]
        m = model.update_teacher()
        assert m == pytest.approx(0.9)  # total_steps = 0: constant momentum
        for t0, s, t1 in zip(teacher_before, student, model.net.parameters(), strict=True):
            torch.testing.assert_close(t1, m * t0 + (1 - m) * s)
        centre_before = model.center.clone()
        out = model.loss(_views())
        assert set(out) == {"dino", "ibot", "loss"} and all(torch.isfinite(v) for v in out.values())
        assert not torch.equal(model.center, centre_before)  # running mean of the teacher outputs moved
        assert model.patch_center.abs().sum() > 0
        opt.zero_grad()
        out["loss"].backward()
        assert model.mask_token.grad is not None and model.student_head.prototypes.grad is not None
        assert all(p.grad is None for p in model.net.parameters())  # no gradient reaches the teacher
        opt.step()
    # after training steps the teacher lags the student: neither equal nor independent
    diff = [(a - b).abs().max() for a, b in zip(model.net.parameters(), model.student.parameters(), strict=True)]
    assert max(diff) > 0
    assert int(model.ema_steps) == 3


def test_centering_is_the_running_mean_of_teacher_outputs():
    model = Dino("vit_tiny_partworld", out_dim=16, ibot_weight=0.0, **TINY)
    t_cls = torch.rand(6, 16)
    model.update_centers(t_cls, None)
    torch.testing.assert_close(model.center, 0.1 * t_cls.mean(0))
    model.update_centers(t_cls, None)
    torch.testing.assert_close(model.center, 0.9 * 0.1 * t_cls.mean(0) + 0.1 * t_cls.mean(0))
    assert "ibot" not in model.loss(_views())


def test_momentum_schedule_and_masks():
    model = Dino("vit_tiny_partworld", out_dim=16, ema_momentum=0.99, **TINY)
    model.total_steps = 10
    assert model.momentum() == pytest.approx(0.99)
    model.ema_steps.fill_(10)
    assert model.momentum() == pytest.approx(1.0)
    masks = model.random_masks(8, 8, 8, torch.device("cpu"))
    frac = masks.flatten(1).float().mean(1)
    assert (frac[1::2] == 0).all() and ((frac[0::2] >= 0.09) & (frac[0::2] <= 0.51)).all()


def test_multicrop_gives_two_global_and_n_local_views():
    views = MultiCrop((0.5,) * 3, (0.25,) * 3, n_local=3)(torch.rand(3, 64, 64))
    assert [tuple(v.shape) for v in views] == [(3, 64, 64)] * 2 + [(3, 32, 32)] * 3


def test_recipe_runs_and_exports_the_teacher_for_timm(tmp_path):
    out = tmp_path / "dino"
    args = ["pretrain", "--objective", "dino", "--model", "vit_tiny_partworld", "--model-args", "depth=2",
            "embed_dim=32", "num_heads=2", "--dataset-args", "images_per_class=1", "--epochs", "1",
            "--batch-size", "30", "--dino-local-crops", "2", "--dino-out-dim", "32", "--export-fp16", "--quiet",
            "--output-dir", str(out), "--export", str(tmp_path / "export")]
    assert train_main(args) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["steps"] == 2 and 0.0 <= results["metrics"]["acc1"] <= 100.0
    exported = tmp_path / "export.safetensors"
    net = timm.create_model("vit_tiny_partworld", pretrained=True, num_classes=0, pretrained_cfg_overlay=dict(
        file=str(exported), num_classes=0), **TINY).eval()
    trained = visionzoo.from_pretrained(results["final"]).eval()
    x = torch.rand(2, 3, 64, 64)
    with torch.no_grad():  # the export is the teacher backbone, stored in fp16
        torch.testing.assert_close(net(x), trained.net(x), atol=2e-2, rtol=2e-2)


def test_training_path_goes_through_forward():
    """A list of crops through ``forward`` gives the losses (so a DDP wrapper sees the training forward)."""
    torch.manual_seed(0)
    model = Dino("vit_tiny_partworld", out_dim=64, **TINY).train()
    out = model(_views())
    assert set(out) == {"dino", "ibot", "loss"}
    assert model(torch.randn(2, 3, 64, 64)).shape == (2, 32)  # images: teacher features
