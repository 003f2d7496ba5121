"""Bad inputs to RAM-family models fail early with errors that name the cause and the fix."""

from __future__ import annotations

import deepinv as dinv
import pytest
import torch

from visionzoo.errors import VisionZooError
from visionzoo.methods.ram import (
    NoiseLevelError,
    NonFiniteMeasurementError,
    OperatorShapeError,
    RAMInputError,
    UnsupportedChannelsError,
    ram_tiny,
)
from visionzoo.methods.ram.operators import build_physics

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return ram_tiny(in_channels=(1, 3)).eval()


def test_unsupported_channel_count_lists_heads(model):
    physics = build_physics("inpainting:ratio=0.5", (2, 32, 32))
    y = physics(torch.rand(1, 2, 32, 32))
    with pytest.raises(UnsupportedChannelsError, match=r"2 channels.*heads for \[1, 3\]"):
        model(y, physics)
    # deepinv's own RAM fails with an unhelpful message on the same input
    ref = dinv.models.RAM(in_channels=(1, 3), pretrained=False)
    with pytest.raises(ValueError, match="not in list"):
        ref(y, physics)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_measurement(model, bad):
    physics = build_physics("blur:sigma=1", (3, 32, 32))
    y = physics(torch.rand(1, 3, 32, 32))
    y[0, 1, 3, 4] = bad
    with pytest.raises(NonFiniteMeasurementError, match="NaN|Inf"):
        model(y, physics)


def test_operator_and_measurement_size_mismatch(model):
    physics = build_physics("blur:sigma=1", (3, 32, 32))
    y = torch.rand(1, 3, 37, 31)
    with pytest.raises(OperatorShapeError, match=r"built for images of size \(3, 32, 32\)"):
        model(y, physics)
    inpaint = build_physics("inpainting:ratio=0.5", (3, 32, 32))
    with pytest.raises(OperatorShapeError):
        model(torch.rand(1, 3, 30, 30), inpaint)
    sr = build_physics("sr:factor=2", (3, 32, 32))
    with pytest.raises(OperatorShapeError):
        model(torch.rand(1, 3, 32, 32), sr)  # a full-size image given where a x2 measurement belongs


def test_negative_noise_levels(model):
    physics = build_physics("denoise:noise=gaussian:0.1", (1, 32, 32))
    y = physics(torch.rand(1, 1, 32, 32))
    with pytest.raises(NoiseLevelError, match="negative"):
        model(y, physics, sigma=-0.1)
    with pytest.raises(NoiseLevelError, match="negative"):
        model(y, sigma=torch.tensor([-0.2]))
    physics.noise_model.sigma = torch.tensor(-0.05)
    with pytest.raises(NoiseLevelError, match="physics.noise_model.sigma"):
        model(y, physics)


def test_other_bad_inputs(model):
    physics = build_physics("denoise", (1, 16, 16))
    with pytest.raises(RAMInputError, match="floating-point"):
        model(torch.ones(1, 1, 16, 16, dtype=torch.int64), physics)
    with pytest.raises(RAMInputError, match="complex"):
        model(torch.ones(1, 1, 16, 16, dtype=torch.complex64), physics)
    with pytest.raises(RAMInputError, match="linear operator"):
        model(torch.rand(1, 1, 16, 16), dinv.physics.Physics(A=lambda x: x))
    with pytest.raises(ValueError, match="operator"):
        model(torch.rand(1, 1, 16, 16))
    # all of them are VisionZooErrors and ValueErrors, so callers can catch either
    assert issubclass(UnsupportedChannelsError, VisionZooError) and issubclass(RAMInputError, ValueError)


def test_checks_can_be_disabled_for_speed(model):
    physics = build_physics("denoise:noise=gaussian:0.05", (1, 24, 24))
    y = physics(torch.rand(1, 1, 24, 24))
    model.check_inputs = False
    try:
        with torch.no_grad():
            out = model(y, physics)
    finally:
        model.check_inputs = True
    assert out.shape == y.shape
