"""Self-supervised fine-tuning: the loss follows the noise model; finetune uses measurements only."""

from __future__ import annotations

import inspect

import deepinv as dinv
import pytest
import torch
from deepinv.transform import Rotate, Shift

from visionzoo.errors import VisionZooError
from visionzoo.methods.ram import ram_tiny
from visionzoo.methods.ram.operators import build_physics, simulate
from visionzoo.methods.ram.selfsup import choose_losses, finetune, noise_kind

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("op,kind,consistency", [
    ("inpainting:ratio=0.5,noise=none", "none", dinv.loss.MCLoss),
    ("blur:sigma=1,noise=gaussian:0.05", "gaussian", dinv.loss.SureGaussianLoss),
    ("sr:factor=2,noise=poisson:0.1", "poisson", dinv.loss.SurePoissonLoss),
    ("inpainting:noise=poisson_gaussian:0.1:0.02", "poisson_gaussian", dinv.loss.SurePGLoss),
])
def test_loss_follows_noise_model(op, kind, consistency):
    physics = build_physics(op, (3, 32, 32))
    assert noise_kind(physics) == kind
    losses = choose_losses(physics, (1, 3, 32, 32))
    assert [type(loss) for loss in losses] == [consistency, dinv.loss.EILoss]
    assert losses[1].weight == 0.1
    if kind == "gaussian":
        assert losses[0].sigma2 == pytest.approx(0.05**2)
    if kind == "poisson_gaussian":
        assert (losses[0].gain, losses[0].sigma2) == pytest.approx((0.1, 0.02**2))


def test_unknown_noise_uses_splitting_and_denoising_has_no_ei():
    physics = build_physics("inpainting:ratio=0.5", (1, 16, 16))
    physics.set_noise_model(dinv.physics.UniformNoise(a=0.1))
    assert noise_kind(physics) == "unknown"
    losses = choose_losses(physics, (1, 1, 16, 16))
    assert isinstance(losses[0], dinv.loss.SplittingLoss) and losses[0].split_ratio == 0.9
    denoise = build_physics("denoise:noise=gaussian:0.1", (1, 16, 16))
    assert [type(loss) for loss in choose_losses(denoise)] == [dinv.loss.SureGaussianLoss]


def test_ei_transform_choice():
    assert isinstance(choose_losses(build_physics("blur", (3, 32, 32)))[1].T, Rotate)
    assert isinstance(choose_losses(build_physics("inpainting", (3, 32, 32)))[1].T, Shift)
    assert isinstance(choose_losses(build_physics("blur", (3, 32, 32)), transform="shift")[1].T, Shift)


def test_finetune_takes_no_ground_truth():
    params = inspect.signature(finetune).parameters
    assert not {"x", "x_gt", "target", "ground_truth"} & set(params)


def test_finetune_single_measurement_reduces_its_loss():
    torch.manual_seed(0)
    model = ram_tiny()
    _, y, physics = simulate("inpainting:ratio=0.5", torch.rand(1, 3, 32, 32), seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    history = finetune(model, physics, y, epochs=3, lr=1e-3, patience=3)
    assert history["train_indices"] == history["val_indices"] == [0]  # one measurement: it validates itself
    assert history["losses"] == ["MCLoss", "EILoss"]
    assert len(history["val_loss"]) == 4  # before training + 3 epochs
    assert min(history["val_loss"][1:]) < history["val_loss"][0]
    assert history["best_epoch"] >= 1
    changed = any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert changed and not model.training


def test_finetune_splits_several_measurements_and_validates_args():
    torch.manual_seed(0)
    model = ram_tiny(in_channels=(1,))
    physics = build_physics("denoise:noise=gaussian:0.1", (1, 16, 16))
    y = physics(torch.rand(3, 1, 16, 16))
    history = finetune(model, physics, y, epochs=1, lr=1e-4, val_fraction=0.2)
    assert len(history["val_indices"]) == 1 and len(history["train_indices"]) == 2
    assert not set(history["val_indices"]) & set(history["train_indices"])
    assert history["losses"] == ["SureGaussianLoss"]
    with pytest.raises(VisionZooError, match="operators for 3 measurements"):
        finetune(model, [physics, physics], y, epochs=1)
    with pytest.raises(VisionZooError, match="epochs >= 1"):
        finetune(model, physics, y, epochs=0)
