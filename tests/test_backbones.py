"""Backbone weights through timm (file overlay) and open_clip (path), via visionzoo's hub layer."""

from __future__ import annotations

import pytest
import timm
import torch
from safetensors.torch import save_file

from visionzoo.backbones import (
    create_open_clip_backbone,
    create_timm_backbone,
    preprocessing_from_open_clip,
    register_open_clip_config,
)
from visionzoo.errors import OfflineError, UnknownNameError

from .conftest import TINY_VIT
from .loopback import LoopbackServer

TINY_CLIP = {"embed_dim": 16,
             "vision_cfg": {"image_size": 32, "layers": 2, "width": 32, "patch_size": 8, "head_width": 16},
             "text_cfg": {"context_length": 12, "vocab_size": 49408, "width": 16, "heads": 1, "layers": 1}}


def test_timm_backbone_from_file_hub_and_url(tmp_path, monkeypatch):
    torch.manual_seed(0)
    ref = timm.create_model("vit_tiny_patch16_224", **TINY_VIT).eval()
    path = tmp_path / "model.safetensors"
    save_file({k: v.contiguous() for k, v in ref.state_dict().items()}, str(path))
    x = torch.randn(1, 3, 32, 32)
    with LoopbackServer() as srv:
        monkeypatch.setenv("HF_ENDPOINT", srv.url)
        srv.add_hub_file("me/vit", "model.safetensors", path.read_bytes())
        srv.files["/vit.safetensors"] = path.read_bytes()
        for spec in (str(path), "hf-hub:me/vit", srv.url + "/vit.safetensors"):
            net, source = create_timm_backbone("vit_tiny_patch16_224", spec, **TINY_VIT)
            assert source == spec
            with torch.no_grad():
                torch.testing.assert_close(net.eval()(x), ref(x), rtol=0, atol=0)
    # a fresh head keeps the pretrained trunk (timm drops the mismatching classifier)
    net, _ = create_timm_backbone("vit_tiny_patch16_224", str(path), num_classes=5, **TINY_VIT)
    torch.testing.assert_close(net.blocks[0].attn.qkv.weight, ref.blocks[0].attn.qkv.weight)


def test_timm_default_weights_through_the_hub_layer(tmp_path, monkeypatch):
    torch.manual_seed(0)
    ref = timm.create_model("vit_tiny_patch16_224", **TINY_VIT).eval()
    data = (tmp_path / "w.safetensors")
    save_file({k: v.contiguous() for k, v in ref.state_dict().items()}, str(data))
    repo = timm.models.get_pretrained_cfg("vit_tiny_patch16_224").hf_hub_id
    with LoopbackServer() as srv:
        monkeypatch.setenv("HF_ENDPOINT", srv.url)
        srv.add_hub_file(repo, "model.safetensors", data.read_bytes())
        net, source = create_timm_backbone("vit_tiny_patch16_224", True, **TINY_VIT)
    assert source == "timm:vit_tiny_patch16_224"
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(net.eval()(x), ref(x), rtol=0, atol=0)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OfflineError, match="resnet18.*offline mode is on"):
        create_timm_backbone("resnet18", True)


def test_timm_unknown_name():
    with pytest.raises(UnknownNameError, match="Did you mean: vit_small_patch16_224"):
        create_timm_backbone("vit_smal_patch16_224")


def test_open_clip_config_and_weights_from_path(tmp_path):
    register_open_clip_config("vz-test-tiny-clip", TINY_CLIP, folder=tmp_path)
    torch.manual_seed(0)
    ref, src = create_open_clip_backbone("vz-test-tiny-clip")
    assert src is None
    path = tmp_path / "open_clip_model.safetensors"
    save_file({k: v.contiguous() for k, v in ref.state_dict().items()}, str(path))
    loaded, src = create_open_clip_backbone("vz-test-tiny-clip", str(path))
    assert src == str(path)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(loaded.encode_image(x), ref.encode_image(x), rtol=0, atol=0)
    assert preprocessing_from_open_clip(loaded)["input_size"] == (3, 32, 32)


def test_open_clip_tag_offline_gives_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OfflineError, match="'RN50' tag 'openai'.*offline mode is on"):
        create_open_clip_backbone("RN50", "openai")
