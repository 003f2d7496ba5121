"""save_pretrained / from_pretrained, trained-only saving, and refusing bad checkpoints."""

from __future__ import annotations

import json

import pytest
import timm
import torch
from safetensors.torch import load_file, save_file

import visionzoo
from visionzoo.errors import CheckpointError, UnknownNameError

from .conftest import TINY_VIT

ARCH = "classifier_vit_tiny_patch16_224"


@pytest.fixture
def backbone_file(tmp_path):
    """A 'pretrained' timm ViT weights file on disk (random but fixed)."""
    torch.manual_seed(0)
    net = timm.create_model("vit_tiny_patch16_224", **TINY_VIT)
    path = tmp_path / "backbone.safetensors"
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(path))
    return path


def _perturb_trainable(model):
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.1)


def test_round_trip_full_model_gives_identical_outputs(tmp_path):
    model = visionzoo.create_model(ARCH, num_classes=5, class_names=list("abcde"), **TINY_VIT).eval()
    _perturb_trainable(model)
    folder = visionzoo.save_pretrained(model, tmp_path / "ckpt")
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["weights"] == "full" and cfg["architecture"] == ARCH
    assert cfg["class_names"] == list("abcde")
    assert cfg["preprocessing"]["input_size"] == [3, 32, 32] and cfg["visionzoo_version"] == visionzoo.__version__
    loaded = visionzoo.from_pretrained(folder).eval()
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x), rtol=0, atol=0)
    assert loaded.class_names == list("abcde")


def test_adapter_checkpoint_holds_only_trained_tensors(tmp_path, backbone_file):
    model = visionzoo.create_model(ARCH, num_classes=4, backbone_pretrained=str(backbone_file),
                                   linear_probe=True, **TINY_VIT).eval()
    _perturb_trainable(model)
    folder = visionzoo.save_pretrained(model, tmp_path / "probe")
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["weights"] == "trained" and cfg["base_weights"] == str(backbone_file)
    saved = load_file(str(folder / "model.safetensors"))
    params = dict(model.named_parameters())
    saved_params = {k for k in saved if k in params}
    assert saved_params == {"net.head.weight", "net.head.bias"}  # only the head was trainable
    assert all(k not in params for k in set(saved) - saved_params)  # the rest are buffers, if any
    loaded = visionzoo.from_pretrained(folder).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x), rtol=0, atol=0)


def test_transforms_come_from_the_checkpoint_offline(tmp_path, monkeypatch):
    model = visionzoo.create_model(ARCH, num_classes=2, **TINY_VIT)
    model.pretrained_cfg = {**model.pretrained_cfg, "mean": [0.1, 0.2, 0.3], "std": [0.4, 0.5, 0.6],
                            "crop_pct": 0.8}
    folder = visionzoo.save_pretrained(model, tmp_path / "ckpt")
    monkeypatch.setenv("VISIONZOO_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    img = torch.rand(3, 50, 60)
    from_folder = visionzoo.create_transforms(folder)(img)
    from_model = visionzoo.create_transforms(model)(img)
    torch.testing.assert_close(from_folder, from_model)
    assert from_folder.shape == (3, 32, 32)
    # the mean/std really are the saved ones, not a default
    expected = visionzoo.create_transforms(visionzoo.from_pretrained(folder))(img)
    torch.testing.assert_close(from_folder, expected)
    assert "0.1" in str(visionzoo.create_transforms(folder))


def test_model_without_preprocessing_refuses_to_guess(tmp_path):
    model = torch.nn.Linear(2, 2)
    with pytest.raises(visionzoo.errors.VisionZooError, match="refusing to guess"):
        visionzoo.create_transforms(model)


def test_truncated_weights_give_clear_error(tmp_path):
    model = visionzoo.create_model(ARCH, num_classes=2, **TINY_VIT)
    folder = visionzoo.save_pretrained(model, tmp_path / "ckpt")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    cfg = json.loads((folder / "config.json").read_text())
    with pytest.raises(CheckpointError, match="sha256"):
        visionzoo.from_pretrained(folder)
    del cfg["weights_sha256"]  # even without the recorded hash the file is refused
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        visionzoo.from_pretrained(folder)


def test_mismatched_checkpoint_loads_nothing(tmp_path):
    src = visionzoo.create_model(ARCH, num_classes=7, **TINY_VIT)
    folder = visionzoo.save_pretrained(src, tmp_path / "ckpt")
    target = visionzoo.create_model(ARCH, num_classes=3, **TINY_VIT)
    before = {k: v.clone() for k, v in target.state_dict().items()}
    state = load_file(str(folder / "model.safetensors"))
    from visionzoo.checkpoint import load_state_into
    with pytest.raises(CheckpointError, match=r"shape mismatches.*net.head.weight.*Nothing was loaded"):
        load_state_into(target, state, "full", where=str(folder))
    for k, v in target.state_dict().items():
        assert torch.equal(v, before[k]), f"{k} was changed by a failed load"
    with pytest.raises(CheckpointError, match="shape mismatches"):
        visionzoo.from_pretrained(folder, num_classes=3)


def test_checkpoint_of_another_architecture_is_refused(tmp_path):
    folder = visionzoo.save_pretrained(visionzoo.create_model(ARCH, num_classes=2, **TINY_VIT), tmp_path / "c")
    with pytest.raises(CheckpointError, match="holds a 'classifier_vit_tiny_patch16_224' checkpoint"):
        visionzoo.create_model("classifier_resnet18", pretrained=str(folder))


def test_pickled_code_in_torch_file_is_never_run(tmp_path):
    class Evil:
        def __reduce__(self):
            return (exec, ("raise SystemExit('code from a weights file ran')",))

    path = tmp_path / "evil.pth"
    torch.save({"net.head.weight": Evil()}, path)
    with pytest.raises(CheckpointError, match="weights_only=True"):
        visionzoo.create_model(ARCH, pretrained=str(path), num_classes=2, **TINY_VIT)


def test_weights_file_via_pretrained_path(tmp_path):
    src = visionzoo.create_model(ARCH, num_classes=2, **TINY_VIT).eval()
    path = tmp_path / "w.safetensors"
    save_file({k: v.contiguous() for k, v in src.state_dict().items()}, str(path))
    loaded = visionzoo.create_model(ARCH, pretrained=str(path), num_classes=2, **TINY_VIT).eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), src(x), rtol=0, atol=0)


def test_unknown_names_suggest_close_matches():
    with pytest.raises(UnknownNameError, match="Did you mean: classifier_vit_tiny_patch16_224"):
        visionzoo.create_model("clasifier_vit_tiny_patch16_224")
    with pytest.raises(UnknownNameError, match="backbone.*Did you mean: vit_tiny_patch16_224"):
        visionzoo.create_model("classifier_vit_tiny_patch16_24")
    assert visionzoo.list_models("classifier_vit*") == ["classifier_vit_small_patch16_224",
                                                       "classifier_vit_tiny_patch16_224"]


def test_save_is_atomic_and_replaces_whole_folder(tmp_path):
    model = visionzoo.create_model(ARCH, num_classes=2, **TINY_VIT)
    folder = visionzoo.save_pretrained(model, tmp_path / "ckpt")
    (folder / "stale.txt").write_text("old")
    visionzoo.save_pretrained(model, folder)
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp folders left
