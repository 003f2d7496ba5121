"""The prompt learner: equality with open_clip's encode_text, what trains, what is saved, bad input."""

from __future__ import annotations

import open_clip
import pytest
import torch
from safetensors.torch import load_file, save_file

import visionzoo
from visionzoo.errors import CheckpointError, VisionZooError
from visionzoo.methods.fga.model import PromptCLIP

from .test_fga_helpers import CLASSES, VARIANTS, tiny_clip


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_phrase_context_gives_encode_text_features(variant):
    name = tiny_clip(variant)
    torch.manual_seed(0)
    model = visionzoo.create_model(f"coop_{name}", class_names=CLASSES)
    assert model.ctx.shape == (4, 16)  # "a photo of a" is 4 tokens
    tok = open_clip.get_tokenizer(name)
    with torch.no_grad():
        ours = model.text_features()
        ref = model.clip.encode_text(tok([f"a photo of a {c}." for c in CLASSES]), normalize=True)
        # a different context gives different features (the context really is used)
        other = model.text_features(model.ctx + 0.5 * torch.randn_like(model.ctx))
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)
    assert (other - ref).abs().max() > 1e-3


def test_only_the_context_trains_and_class_specific_contexts():
    name = tiny_clip()
    torch.manual_seed(0)
    model = visionzoo.create_model(f"coop_{name}", class_names=CLASSES)
    assert [n for n, p in model.named_parameters() if p.requires_grad] == ["ctx"]
    logits = model(torch.randn(2, 3, 32, 32))
    assert logits.shape == (2, len(CLASSES))
    logits.logsumexp(1).sum().backward()
    assert model.ctx.grad is not None and model.ctx.grad.abs().sum() > 0
    torch.manual_seed(0)
    csc = visionzoo.create_model(f"coop_{name}", class_names=CLASSES, class_specific=True)
    assert csc.ctx.shape == (len(CLASSES), 4, 16)
    with torch.no_grad():
        torch.testing.assert_close(csc.text_features(), model.text_features())  # same init, same features
    with pytest.raises(VisionZooError, match="one context per class"):
        csc.class_names = CLASSES[:2]
    rnd = visionzoo.create_model(f"coop_{name}", class_names=CLASSES, ctx_init="", n_ctx=6)
    assert rnd.ctx.shape == (6, 16) and rnd.ctx.std() < 0.05


def test_bad_class_names_and_context_overflow():
    name = tiny_clip()
    model = visionzoo.create_model(f"coop_{name}")
    with pytest.raises(VisionZooError, match="no class names"):
        model.text_features()
    for bad, msg in ((None, "no class names"), ([], "empty"), (["cat", ""], "non-empty"), ("cat", "list of strings")):
        with pytest.raises(VisionZooError, match=msg):
            model.class_names = bad
    with pytest.raises(VisionZooError, match="does not fit the text context"):
        visionzoo.create_model(f"coop_{name}", ctx_init="", n_ctx=14)  # context length is 16
    with pytest.raises(VisionZooError, match="n_ctx=3 but ctx_init"):
        visionzoo.create_model(f"coop_{name}", n_ctx=3)
    with pytest.raises(VisionZooError, match="overflow the text context of 16 tokens"):
        model.class_names = ["cat", "a very long class name with many many words in it"]
    with pytest.raises(VisionZooError, match="did you mean|Did you mean"):
        visionzoo.create_model("coop_ViT-B-16-quickgel")


def test_save_pretrained_keeps_only_the_context_and_checks_its_size(tmp_path):
    name = tiny_clip()
    torch.manual_seed(0)
    base = open_clip.create_model(name)
    weights = tmp_path / "clip.safetensors"
    save_file({k: v.contiguous() for k, v in base.state_dict().items()}, str(weights))
    model = visionzoo.create_model(f"fga_{name}", class_names=CLASSES, backbone_pretrained=str(weights))
    with torch.no_grad():
        model.ctx.add_(0.1)
    path = visionzoo.save_pretrained(model, tmp_path / "prompt")
    assert list(load_file(str(path / "model.safetensors"))) == ["ctx"]
    loaded = visionzoo.load_pretrained(path)
    assert isinstance(loaded, PromptCLIP) and loaded.class_names == CLASSES and loaded.config.method == "fga"
    with torch.no_grad():
        torch.testing.assert_close(loaded.text_features(), model.text_features())
    with pytest.raises(CheckpointError, match="ctx"):
        visionzoo.create_model(f"fga_{name}", pretrained=str(path), ctx_init="", n_ctx=6)


def test_shipped_prompts_load_through_their_cards_and_mismatched_contexts_are_refused():
    from visionzoo.methods.fga.demo import COOP_CKPT
    from visionzoo.methods.fga.evaluate import load_context

    sapt = visionzoo.create_model("fga_clip_tiny_partworld", pretrained=True)
    coop = visionzoo.load_pretrained("coop_clip_tiny_partworld.pw16shot")
    assert sapt.config.method == "fga" and coop.config.method == "coop"
    assert len(sapt.class_names) == 100 and sapt.ctx.shape == coop.ctx.shape == (4, 64)
    assert (sapt.ctx - coop.ctx).norm() > 0.1  # two different trainings
    torch.testing.assert_close(load_context(str(COOP_CKPT), sapt, "--coop-pretrained"), coop.ctx.detach())
    wider = visionzoo.create_model("fga_clip_tiny_partworld", backbone_pretrained=True, ctx_init="", n_ctx=6,
                                   class_names=sapt.class_names)
    with pytest.raises(CheckpointError, match="context of size"):
        load_context(str(COOP_CKPT), wider, "--coop-pretrained")
