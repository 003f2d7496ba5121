"""RAM family: ram_base equals deepinv's RAM; small/tiny run on every channel count and odd sizes."""

from __future__ import annotations

import warnings

import deepinv as dinv
import pytest
import torch

import visionzoo
from visionzoo.errors import CheckpointError
from visionzoo.methods.ram import RAM_BASE, RAMNet, ram_base, ram_small, ram_tiny
from visionzoo.methods.ram.fast_physics import CircularSincResampler
from visionzoo.methods.ram.operators import simulate

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# deepinv's benchmark-style tasks plus MRI, on an odd size (37x31, padded inside RAM) and 64x48.
CASES = [
    ("blur:sigma=2,noise=gaussian:0.05", (3, 37, 31)),
    ("inpainting:ratio=0.3,noise=gaussian:0.01", (3, 37, 31)),
    ("sr:factor=2", (3, 36, 30)),
    ("denoise:noise=gaussian:0.1", (1, 37, 31)),
    ("mri:accel=4", (2, 37, 31)),
    ("blur:sigma=1", (3, 64, 48)),
]


@pytest.fixture(scope="module")
def pair():
    """deepinv's RAM with random weights (scalars randomised too) and our ram_base with the same."""
    torch.manual_seed(0)
    ref = dinv.models.RAM(pretrained=False).eval()
    with torch.no_grad():
        for p in ref.parameters():
            if p.numel() == 1:  # residual gains and fact_realign are 1.0 at init
                p.uniform_(0.5, 1.5)
    ours = ram_base().eval()
    ours.load_state_dict(ref.state_dict())
    return ref, ours


def _measure(op: str, shape: tuple[int, int, int], seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(1, *shape, generator=g)
    return simulate(op, x, seed=seed)


def test_state_dict_matches_deepinv(pair):
    ref, ours = pair
    ref_sd, our_sd = ref.state_dict(), ours.state_dict()
    assert list(our_sd) == list(ref_sd)
    assert all(our_sd[k].shape == ref_sd[k].shape for k in ref_sd)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in ref.parameters())


@pytest.mark.parametrize("op,shape", CASES)
def test_ram_base_output_equals_deepinv(pair, op, shape):
    ref, ours = pair
    x, y, physics = _measure(op, shape)
    with torch.no_grad():
        expected = ref(y, physics)
        got = ours(y, physics)
    assert got.shape == x.shape
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("op,shape", [CASES[0], CASES[4], CASES[5]])
def test_fast_inference_path_matches_deepinv(pair, op, shape):
    ref, ours = pair
    fast = RAMNet(RAM_BASE)
    fast.load_state_dict(ours.state_dict())
    fast.optimize_for_inference()  # channels-last, FFT multiscale, inference_mode
    x, y, physics = _measure(op, shape)
    with torch.no_grad():
        expected = ref(y, physics)
    got = fast(y, physics)
    assert not got.requires_grad
    scale = expected.abs().max()
    assert (got - expected).abs().max() <= 1e-4 * scale
    # channels-last weights are still saved as contiguous tensors (safetensors needs that)
    assert all(v.is_contiguous() for v in fast.state_dict().values())


def test_fft_resampler_equals_deepinv_upsampling():
    for factor in (2, 4, 8):
        ref = dinv.physics.Upsampling(img_size=(3, 64, 48), filter="sinc", factor=factor, padding="circular")
        ours = CircularSincResampler((3, 64, 48), factor)
        coarse = torch.randn(2, 3, 64 // factor, 48 // factor)
        fine = torch.randn(2, 3, 64, 48)
        torch.testing.assert_close(ours.A(coarse), ref.A(coarse), rtol=0, atol=1e-5)
        torch.testing.assert_close(ours.A_adjoint(fine), ref.A_adjoint(fine), rtol=0, atol=1e-5)


@pytest.mark.parametrize("builder", [ram_small, ram_tiny])
@pytest.mark.parametrize("channels,hw", [(1, (37, 31)), (2, (33, 40)), (3, (37, 31))])
def test_small_and_tiny_forward(builder, channels, hw):
    torch.manual_seed(0)
    model = builder().eval()
    op = {1: "blur:sigma=1,noise=gaussian:0.02", 2: "mri:accel=4", 3: "inpainting:ratio=0.5"}[channels]
    x, y, physics = _measure(op, (channels, *hw))
    with torch.no_grad():
        out = model(y, physics)
    assert out.shape == x.shape
    assert torch.isfinite(out).all()
    # the output depends on the measurement (not a constant map)
    with torch.no_grad():
        out2 = model(y.flip(-1), physics)
    assert not torch.allclose(out, out2)


def test_family_sizes_and_registry():
    counts = {n: sum(p.numel() for p in visionzoo.create_model(n).parameters())
              for n in ("ram_base", "ram_small", "ram_tiny")}
    assert 35.5e6 < counts["ram_base"] < 35.7e6  # the paper's 35.6 M
    assert counts["ram_tiny"] * 4 < 8e6  # a few MB of float32 weights
    assert counts["ram_tiny"] < counts["ram_small"] < counts["ram_base"]
    assert {"ram_base", "ram_small", "ram_tiny"} <= set(visionzoo.list_models("ram*"))


def test_tiny_trains_and_bf16_option_runs():
    torch.manual_seed(0)
    model = ram_tiny()
    x, y, physics = _measure("inpainting:ratio=0.5", (3, 32, 32))
    out = model(y, physics)
    out.square().mean().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    model.optimize_for_inference(autocast_dtype=torch.bfloat16)
    fast = model(y, physics)
    assert fast.dtype == torch.float32 and fast.shape == x.shape and torch.isfinite(fast).all()


def _official_like_state(ref: torch.nn.Module) -> dict:
    state = {k: v.clone() for k, v in ref.state_dict().items()}
    state["unused_scalar"] = torch.tensor(3.0)  # the official file has a few unused scalars
    return state


def test_load_pretrained_weights_like_deepinv(pair, tmp_path):
    ref, _ = pair
    state = _official_like_state(ref)
    with pytest.raises(RuntimeError):
        ref.load_state_dict(state)  # strict loading fails: this is why deepinv loads non-strictly
    model = ram_base()
    model.load_pretrained_weights(state)
    assert model.unused_pretrained_keys == ["unused_scalar"]
    x, y, physics = _measure(*CASES[0])
    with torch.no_grad():
        torch.testing.assert_close(model.eval()(y, physics), ref(y, physics), rtol=0, atol=0)

    # the zoo's own entry point, with a local copy of such a file
    path = tmp_path / "ram.pth.tar"
    torch.save(state, path)
    loaded = visionzoo.create_model("ram_base", pretrained=str(path)).eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(y, physics), ref(y, physics), rtol=0, atol=0)


def test_load_pretrained_weights_rejects_wrong_files(pair):
    ref, _ = pair
    state = _official_like_state(ref)
    with pytest.raises(CheckpointError, match="shape mismatches"):
        ram_tiny().load_pretrained_weights(state)
    missing = {k: v for k, v in state.items() if not k.startswith("m_body.")}
    with pytest.raises(CheckpointError, match="lack"):
        ram_base().load_pretrained_weights(missing)
    no_scalar = {k: v for k, v in state.items() if k != "fact_realign"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ram_base().load_pretrained_weights(no_scalar)
    assert any("fact_realign" in str(w.message) for w in caught)


def test_card_names_official_weights():
    card = visionzoo.cards.all_cards()["ram_base.official"]
    assert card.architecture == "ram_base" and card.default
    assert card.weight_source()[:2] == ("hf-hub:mterris/ram", "ram.pth.tar")


@pytest.mark.slow
def test_ram_base_equals_deepinv_on_ct_and_large_fast_path(pair):
    ref, ours = pair
    x, y, physics = _measure("ct:angles=30,noise=gaussian:0.01", (1, 48, 48))
    with torch.no_grad():
        torch.testing.assert_close(ours(y, physics), ref(y, physics), rtol=0, atol=0)
    fast = RAMNet(RAM_BASE)
    fast.load_state_dict(ours.state_dict())
    fast.optimize_for_inference()
    x, y, physics = _measure("inpainting:ratio=0.3,noise=gaussian:0.01", (3, 128, 128))
    with torch.no_grad():
        expected = ref(y, physics)
    assert (fast(y, physics) - expected).abs().max() <= 1e-4 * expected.abs().max()
