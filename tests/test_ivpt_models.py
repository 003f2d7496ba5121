"""IVPT and VPT-Deep models: any timm ViT, wrapped blocks, frozen backbone, determinism, bad input, saving."""

from __future__ import annotations

import pytest
import timm
import torch
from safetensors.torch import load_file, save_file

import visionzoo
from visionzoo.methods.ivpt import IVPT, VPTDeep
from visionzoo.methods.ivpt.backbone import PromptConfigError, PromptedBlock, record_attention

from .conftest import TINY_VIT

N_PRO = [5, 4, 3]  # two prompted layers on the depth-2 test ViT, K = 2 final parts

VITS = {
    "cls": dict(TINY_VIT),
    "cls+4reg": dict(TINY_VIT, reg_tokens=4),
    "no-cls,avg,32x48": dict(TINY_VIT, img_size=(32, 48), class_token=False, global_pool="avg"),
}


def _ivpt(**kw) -> IVPT:
    torch.manual_seed(0)
    return visionzoo.create_model("ivpt_vit_tiny_patch16_224", num_classes=3, n_pro=N_PRO, **{**TINY_VIT, **kw})


@pytest.mark.parametrize("kind", list(VITS))
def test_ivpt_on_any_vit_layout(kind):
    kw = VITS[kind]
    model = _ivpt(**kw)
    h, w = (kw["img_size"],) * 2 if isinstance(kw["img_size"], int) else kw["img_size"]
    x = torch.randn(2, 3, h, w)
    out = model(x, return_all=True)
    grid = (h // 8, w // 8)
    assert out.logits.shape == (2, 3) and out.part_logits.shape == (2, 2, 3)
    assert [tuple(m.shape) for m in out.stage_maps] == [(2, n, *grid) for n in N_PRO]
    assert [tuple(g.shape) for g in out.groupings] == [(2, 4, 2), (2, 3, 2)]
    for maps in out.stage_maps + out.grouped_maps:
        torch.testing.assert_close(maps.sum(1), torch.ones(2, *grid), atol=1e-5, rtol=0)
    assert out.part_features.shape == (2, 32, 3)
    assert model.num_prefix == {"cls": 1, "cls+4reg": 5, "no-cls,avg,32x48": 0}[kind]
    vpt = visionzoo.create_model("vpt_deep_vit_tiny_patch16_224", num_classes=3, num_prompts=3, **{**TINY_VIT, **kw})
    logits, maps = vpt.prototype_maps(x)
    assert logits.shape == (2, 3) and maps["layer1"].shape == (2, 3, *grid)


def test_blocks_are_wrapped_and_qkv_runs_once():
    ref = timm.create_model("vit_tiny_patch16_224", **TINY_VIT)
    model = _ivpt()
    assert model.prompted_idx == [0, 1]
    for blk in model.backbone.blocks:
        assert type(blk) is PromptedBlock and type(blk.block) is type(ref.blocks[0])  # wrapped, class untouched
    calls = []
    hooks = [blk.block.attn.qkv.register_forward_hook(lambda m, i, o: calls.append(i[0].shape))
             for blk in model.backbone.blocks]
    model.eval()(torch.randn(2, 3, 32, 32))
    for h in hooks:
        h.remove()
    # one qkv projection per block, over 1 prefix + 16 patch tokens + K = 2 prompts
    assert calls == [torch.Size([2, 19, 32])] * 2
    # without prompts the wrapper is the original block
    blk = model.backbone.blocks[0]
    x = torch.randn(2, 17, 32)
    torch.testing.assert_close(blk(x), blk.block(x), rtol=0, atol=0)


def test_only_adapter_trains_and_eval_is_deterministic():
    model = _ivpt()
    assert not any(p.requires_grad for p in model.backbone.parameters())
    x = torch.randn(2, 3, 32, 32)
    model.train()
    assert not model.backbone.training  # frozen backbone stays in eval mode
    out = model(x, return_all=True)
    (out.logits.sum() + sum(g.sum() for g in out.grouped_maps)).backward()
    assert all(p.grad is None for p in model.backbone.parameters())
    assert model.prompt_projectors[0].proj.weight.grad is not None  # prompts reach the classifier
    assert model.stages[0].prototypes.grad is not None and model.groupings[0].linear.weight.grad is not None
    torch.manual_seed(1)
    g1 = model(x, return_all=True).groupings[0]
    g2 = model(x, return_all=True).groupings[0]
    assert not torch.equal(g1, g2)  # gumbel noise in training
    model.eval()
    torch.manual_seed(1)
    a = model(x, return_all=True)
    torch.manual_seed(2)
    b = model(x, return_all=True)
    torch.testing.assert_close(a.logits, b.logits, rtol=0, atol=0)
    torch.testing.assert_close(a.groupings[0], b.groupings[0], rtol=0, atol=0)


def test_centered_features_ignore_a_shared_offset():
    model = _ivpt(center_features=True).eval()
    e = torch.randn(2, 32, 4, 4)
    maps = model.stages[0](model._for_maps(e))
    shifted = model.stages[0](model._for_maps(e + torch.randn(2, 32, 1, 1)))  # same offset on every patch
    torch.testing.assert_close(maps, shifted, atol=1e-5, rtol=0)
    assert model.config.center_features and model(torch.randn(1, 3, 32, 32)).shape == (1, 3)


def test_empty_prototypes_get_uniform_grouping():
    model = _ivpt().eval()
    with torch.no_grad():
        model.stages[0].spatial_bias[0].fill_(50.0)  # prototype 0 wins every pixel; 1..3 win none
        out = model(torch.randn(2, 3, 32, 32), return_all=True)
    torch.testing.assert_close(out.groupings[0][:, 1:], torch.full((2, 3, 2), 0.5))


@pytest.mark.parametrize("arch", ["ivpt", "vpt_deep"])
def test_bad_configurations_fail_at_construction(arch):
    with pytest.raises(PromptConfigError, match="not a timm VisionTransformer"):
        visionzoo.create_model(f"{arch}_resnet18", num_classes=3)
    ok = {"n_pro": N_PRO} if arch == "ivpt" else {}
    with pytest.raises(PromptConfigError, match="not divisible by the patch size"):
        visionzoo.create_model(f"{arch}_vit_tiny_patch16_224", num_classes=3, **{**TINY_VIT, "img_size": 36}, **ok)
    layers = {"ivpt": {"n_pro": [6, 5, 4, 3]}, "vpt_deep": {"prompt_layers": 3}}[arch]
    with pytest.raises(PromptConfigError, match="3 prompted layers asked for, but .* has 2 blocks"):
        visionzoo.create_model(f"{arch}_vit_tiny_patch16_224", num_classes=3, **TINY_VIT, **layers)
    model = visionzoo.create_model(f"{arch}_vit_tiny_patch16_224", num_classes=3, **TINY_VIT, **ok)
    with pytest.raises(PromptConfigError, match="built for 32x32"):
        model(torch.randn(1, 3, 48, 48))


def test_trained_only_checkpoint_round_trip(tmp_path):
    torch.manual_seed(3)
    vit = timm.create_model("vit_tiny_patch16_224", **TINY_VIT)
    save_file({k: v.contiguous() for k, v in vit.state_dict().items()}, str(tmp_path / "vit.safetensors"))
    for arch, extra in (("ivpt", {"n_pro": N_PRO}), ("vpt_deep", {"num_prompts": 2})):
        model = visionzoo.create_model(f"{arch}_vit_tiny_patch16_224", num_classes=3,
                                       backbone_pretrained=str(tmp_path / "vit.safetensors"), **TINY_VIT, **extra)
        torch.testing.assert_close(model.backbone.cls_token, vit.cls_token)
        with torch.no_grad():
            for p in model.parameters():
                if p.requires_grad:
                    p.add_(0.1 * torch.randn_like(p))
        visionzoo.save_pretrained(model, tmp_path / arch)
        keys = load_file(str(tmp_path / arch / "model.safetensors"))
        assert not any(".attn." in k or "patch_embed" in k for k in keys)  # adapter only
        loaded = visionzoo.load_pretrained(tmp_path / arch).eval()
        x = torch.randn(2, 3, 32, 32)
        with torch.no_grad():
            torch.testing.assert_close(loaded(x), model.eval()(x), rtol=0, atol=0)
        # the same model accepts a plain timm backbone state dict (a card whose weights are the backbone's)
        fresh = visionzoo.create_model(f"{arch}_vit_tiny_patch16_224", num_classes=3, **TINY_VIT, **extra)
        fresh.load_pretrained_weights(vit.state_dict())
        torch.testing.assert_close(fresh.backbone.blocks[1].block.attn.qkv.weight, vit.blocks[1].attn.qkv.weight)


def test_prompt_attention_rows_are_distributions():
    vpt = visionzoo.create_model("vpt_deep_vit_tiny_patch16_224", num_classes=3, num_prompts=3, **TINY_VIT).eval()
    x = torch.randn(2, 3, 32, 32)
    blocks = [b.block for b in vpt.backbone.blocks]
    with record_attention(blocks, rows=3) as attn:
        logits = vpt(x)
    torch.testing.assert_close(logits, vpt(x), rtol=0, atol=0)  # recording changes nothing
    assert [tuple(a.shape) for a in attn] == [(2, 2, 3, 20)] * 2  # heads 2, 3 prompts, 1 + 16 + 3 keys
    torch.testing.assert_close(attn[0].sum(-1), torch.ones(2, 2, 3))
    assert isinstance(vpt, VPTDeep) and vpt.prompts.shape == (2, 3, 32)
