"""Operator strings: every documented operator builds; bad strings list what is accepted."""

from __future__ import annotations

import deepinv as dinv
import pytest
import torch

from visionzoo.errors import UnknownNameError
from visionzoo.methods.ram.operators import (
    OPERATOR_HELP,
    OPERATORS,
    OperatorSpecError,
    build_physics,
    parse_operator,
    prepare_image,
    simulate,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# The examples of the module docstring, with the size each is built for.
DOCUMENTED = {
    "blur:sigma=2,noise=gaussian:0.05": (37, 31),
    "motion_blur:length=21": (37, 31),
    "inpainting:ratio=0.5": (37, 31),
    "sr:factor=2": (36, 30),
    "denoise:noise=poisson:0.1": (37, 31),
    "demosaic": (37, 31),
    "mri:accel=4": (37, 31),
    "ct:angles=60": (31, 31),
    "cs:ratio=0.25": (20, 18),
}


def test_every_operator_is_documented_and_exemplified():
    assert {s.split(":")[0] for s in DOCUMENTED} == set(OPERATORS)
    for name in OPERATORS:
        assert f"  {name} " in OPERATOR_HELP
    for noise in ("gaussian:SIGMA", "poisson:GAIN", "poisson_gaussian:GAIN:SIGMA", "none"):
        assert noise in OPERATOR_HELP


@pytest.mark.parametrize("text", list(DOCUMENTED))
def test_documented_operators_build_and_measure(text):
    h, w = DOCUMENTED[text]
    x = torch.rand(1, 3, h, w, generator=torch.Generator().manual_seed(0))
    x_op, y, physics = simulate(text, x, seed=3)
    assert isinstance(physics, dinv.physics.LinearPhysics)
    assert torch.isfinite(y).all()
    back = physics.A_adjoint(y)
    assert back.shape == x_op.shape
    # adjointness <Ax, v> = <x, A^T v> holds for the built operator
    u, v = torch.randn_like(x_op), torch.randn_like(y)
    lhs, rhs = (physics.A(u) * v).sum(), (u * physics.A_adjoint(v)).sum()
    assert torch.isclose(lhs, rhs, rtol=1e-3, atol=1e-3)
    # the same seed gives the same operator and noise; another seed another draw where random
    _, y2, _ = simulate(text, x, seed=3)
    torch.testing.assert_close(y2, y, rtol=0, atol=1e-6)


def test_seed_changes_random_operators():
    x = torch.rand(1, 3, 32, 32)
    for text in ("inpainting:ratio=0.5", "motion_blur", "mri:accel=4", "denoise"):
        a = simulate(text, x, seed=0)[1]
        b = simulate(text, x, seed=1)[1]
        assert not torch.allclose(a, b), text


def test_parse_canonical_form_and_defaults():
    spec = parse_operator(" Blur : sigma = 1.5 , noise = Gaussian:0.02 ")
    assert spec.name == "blur" and spec["sigma"] == 1.5
    assert spec.noise.kind == "gaussian" and spec.noise.sigma == 0.02
    assert str(spec) == "blur:sigma=1.5,noise=gaussian:0.02"
    assert parse_operator(str(spec)) == spec
    assert str(parse_operator("denoise")) == "denoise:noise=gaussian:0.1"
    pg = parse_operator("denoise:noise=poisson_gaussian:0.1:0.02")
    assert (pg.noise.gain, pg.noise.sigma) == (0.1, 0.02)
    assert parse_operator("inpainting:pixelwise=no")["pixelwise"] is False
    assert parse_operator("sr:factor=4,filter=SINC")["filter"] == "sinc"


def test_unknown_operator_lists_names_and_parameters():
    with pytest.raises(UnknownNameError) as e:
        parse_operator("blurr:sigma=2")
    msg = str(e.value)
    assert "Did you mean: blur" in msg
    assert "inpainting" in msg and "ratio=0.5" in msg and "noise=" in msg  # the whole help follows


@pytest.mark.parametrize("text,match", [
    ("blur:radius=2", r"no parameter 'radius'.*accepts: sigma=2, noise=gaussian:0.05"),
    ("blur:sigma=-1", "sigma=-1 must be > 0"),
    ("blur:sigma=abc", "not a valid float"),
    ("blur:sigma", "not KEY=VALUE"),
    ("blur:sigma=1,sigma=2", "given twice"),
    ("inpainting:ratio=1.5", r"must be in \(0, 1\]"),
    ("sr:factor=2.5", "not a valid int"),
    ("sr:filter=lanczos", "not one of bicubic, bilinear, gaussian, sinc"),
    ("mri:noise=poisson:0.1", "Poisson noise is undefined"),
    ("denoise:noise=gaussian", r"takes 1 value\(s\) \(gaussian:SIGMA\)"),
    ("denoise:noise=gaussian:-0.1", "finite number >= 0"),
    ("denoise:noise=poisson:0", "gain must be > 0"),
    ("", "operator string is needed"),
])
def test_bad_parameters_are_explained(text, match):
    with pytest.raises(OperatorSpecError, match=match):
        parse_operator(text)


def test_unknown_noise_model_lists_kinds():
    with pytest.raises(UnknownNameError, match="poisson_gaussian"):
        parse_operator("denoise:noise=laplace:0.1")


def test_size_and_channel_requirements():
    with pytest.raises(OperatorSpecError, match=r"not divisible by the factor 2; crop it to 36x30"):
        build_physics("sr:factor=2", (3, 37, 31))
    with pytest.raises(OperatorSpecError, match="square"):
        build_physics("ct", (1, 37, 31))
    with pytest.raises(OperatorSpecError, match="2-channel"):
        build_physics("mri", (3, 32, 32))
    with pytest.raises(OperatorSpecError, match="larger than the image"):
        build_physics("blur:sigma=5", (3, 16, 16))
    with pytest.raises(OperatorSpecError, match="too large"):
        build_physics("cs:ratio=0.5", (3, 256, 256))


def test_prepare_image_for_mri_ct_demosaic():
    x = torch.rand(2, 3, 8, 10)
    grey = 0.299 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]
    mri = prepare_image(x, "mri")
    assert mri.shape == (2, 2, 8, 10)
    torch.testing.assert_close(mri[:, 0], grey)
    assert torch.all(mri[:, 1] == 0)
    torch.testing.assert_close(prepare_image(x, "ct")[:, 0], grey)
    assert prepare_image(x[:, :1], "demosaic").shape == (2, 3, 8, 10)
    assert prepare_image(x, "blur") is x


def test_cs_operator_has_unit_norm():
    physics = build_physics("cs:ratio=0.25", (1, 24, 24))
    norm = physics.compute_sqnorm(torch.randn(1, 1, 24, 24), verbose=False)
    assert 0.8 < float(norm) < 1.2
