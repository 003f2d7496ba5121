"""CoCoOp (cocoop_<open_clip name>): conditional prompts, what trains, checkpoints, train.py/eval.py, the card."""

from __future__ import annotations

import json

import open_clip
import pytest
import torch
from safetensors.torch import load_file, save_file

import visionzoo
from visionzoo.errors import CheckpointError, VisionZooError
from visionzoo.methods.fga.cocoop import CoCoOpCLIP, conditional_logits, conditional_text_features

from .test_fga_helpers import CLASSES, tiny_clip

pytestmark = pytest.mark.usefixtures("one_torch_thread")
DATA = ["--dataset", "partworld", "--dataset-args", "image_size=32", "classes=[60,61,62,63,64,65]",
        "images_per_class=4"]


def _pair(seed: int = 0, **kwargs):
    """A cocoop and a coop model over the same random tiny CLIP."""
    name = tiny_clip()
    torch.manual_seed(seed)
    cocoop = visionzoo.create_model(f"cocoop_{name}", class_names=CLASSES, **kwargs)
    torch.manual_seed(seed)
    coop = visionzoo.create_model(f"coop_{name}", class_names=CLASSES)
    return cocoop, coop


def _randomise_meta_net(model: CoCoOpCLIP, scale: float = 0.5) -> None:
    """Random Meta-Net weights; hidden biases of 1 keep the ReLUs alive for unit-norm features."""
    with torch.no_grad():
        for p in model.meta_net.parameters():
            p.copy_(torch.randn_like(p) * scale)
        model.meta_net[0].bias.fill_(1.0)


def test_zero_meta_net_gives_coop_text_features_and_logits():
    cocoop, coop = _pair()
    assert isinstance(cocoop, CoCoOpCLIP) and cocoop.config.method == "cocoop"
    assert cocoop.config.meta_hidden == 1 and cocoop.n_ctx == 4  # E = 16 -> 16 // 16; "a photo of a"
    for a, b in zip(cocoop.clip.state_dict().values(), coop.clip.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b)
    with torch.no_grad():
        ctx = coop.ctx + 0.3 * torch.randn_like(coop.ctx)
        cocoop.ctx.copy_(ctx)
        coop.ctx.copy_(ctx)
        images = torch.randn(3, 3, 32, 32)
        feats = cocoop.encode_image(images)
        text = cocoop.conditional_text_features(feats)                  # meta-net output is 0 at init
        assert text.shape == (3, len(CLASSES), 16)
        for b in range(3):
            torch.testing.assert_close(text[b], coop.text_features(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(cocoop(images), coop(images), rtol=1e-5, atol=1e-5)


def test_non_zero_meta_net_gives_each_image_its_own_prompt():
    cocoop, _ = _pair(meta_ratio=4)
    _randomise_meta_net(cocoop)
    with torch.no_grad():
        feats = cocoop.encode_image(torch.randn(3, 3, 32, 32))
        feats = torch.cat([feats, feats[:1]])                            # image 3 = image 0
        text = cocoop.conditional_text_features(feats)
        assert (text[0] - text[1]).abs().max() > 1e-3 and (text[1] - text[2]).abs().max() > 1e-3
        torch.testing.assert_close(text[3], text[0])
        shift = cocoop.meta_net(feats[1])                               # [D], added to every context vector
        torch.testing.assert_close(text[1], cocoop.text_features(cocoop.ctx + shift), rtol=1e-5, atol=1e-6)
        # chunking (whole images per call, or an image's classes split) changes nothing
        for chunk in (1, 3, 4, 9):
            cocoop.text_chunk = chunk
            torch.testing.assert_close(cocoop.conditional_text_features(feats), text, rtol=1e-5, atol=1e-6)
        logits = cocoop(image_features=feats)
        ref = torch.stack([cocoop.logits(feats[b], text[b]) for b in range(4)])
        torch.testing.assert_close(logits, ref, rtol=1e-5, atol=1e-5)


def test_gradients_reach_only_the_context_and_the_meta_net():
    cocoop, _ = _pair()
    trainable = [n for n, p in cocoop.named_parameters() if p.requires_grad]
    assert trainable == ["ctx", "meta_net.0.weight", "meta_net.0.bias", "meta_net.2.weight", "meta_net.2.bias"]
    _randomise_meta_net(cocoop)
    cocoop.train()
    assert not cocoop.clip.training                                   # the frozen CLIP stays in eval mode
    loss = torch.nn.functional.cross_entropy(cocoop(torch.randn(2, 3, 32, 32)), torch.tensor([0, 3]))
    loss.backward()
    for n, p in cocoop.named_parameters():
        if p.requires_grad:
            assert p.grad is not None and p.grad.abs().sum() > 0, n
        else:
            assert p.grad is None, n


def test_bad_configurations_fail_clearly():
    name = tiny_clip()
    with pytest.raises(VisionZooError, match="not CoCoOp"):
        visionzoo.create_model(f"cocoop_{name}", class_names=CLASSES, class_specific=True)
    with pytest.raises(VisionZooError, match="meta_init must be one of"):
        visionzoo.create_model(f"cocoop_{name}", class_names=CLASSES, meta_init="xavier")
    with pytest.raises(VisionZooError, match="meta_ratio"):
        visionzoo.create_model(f"cocoop_{name}", class_names=CLASSES, meta_ratio=0)
    torch.manual_seed(0)
    official = visionzoo.create_model(f"cocoop_{name}", class_names=CLASSES, meta_init="torch", meta_ratio=4)
    assert official.meta_net[0].out_features == 4 and official.meta_net[2].bias.abs().sum() > 0
    with pytest.raises(VisionZooError, match="needs images or image_features"):
        official()


def test_save_load_round_trip_and_harness_loaders(tmp_path):
    from visionzoo.methods.fga.evaluate import load_cocoop, load_context
    from visionzoo.methods.fga.predictors import ConditionalPromptHead

    name = tiny_clip()
    torch.manual_seed(0)
    base = open_clip.create_model(name)
    weights = tmp_path / "clip.safetensors"
    save_file({k: v.contiguous() for k, v in base.state_dict().items()}, str(weights))
    model = visionzoo.create_model(f"cocoop_{name}", class_names=CLASSES, backbone_pretrained=str(weights))
    _randomise_meta_net(model)
    with torch.no_grad():
        model.ctx.add_(0.1)
    path = visionzoo.save_pretrained(model, tmp_path / "cocoop")
    assert sorted(load_file(str(path / "model.safetensors"))) == [
        "ctx", "meta_net.0.bias", "meta_net.0.weight", "meta_net.2.bias", "meta_net.2.weight"]
    config = json.loads((path / "config.json").read_text())
    assert config["architecture"] == f"cocoop_{name}" and config["method_config"]["method"] == "cocoop"
    loaded = visionzoo.load_pretrained(path)
    assert isinstance(loaded, CoCoOpCLIP) and loaded.class_names == CLASSES
    images = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        expected = model(images)
        torch.testing.assert_close(loaded(images), expected, rtol=0, atol=0)

        # the harness runs the checkpoint's context and Meta-Net on another prompt model's frozen CLIP
        host = visionzoo.create_model(f"fga_{name}", class_names=CLASSES, backbone_pretrained=str(weights))
        head = ConditionalPromptHead("cocoop", load_cocoop(str(path), host), chunk=5)
        head.prepare(host)
        feats = host.encode_image(images)[:, None]                       # [B, N=1, E]
        assert torch.equal(head.head(host, feats).pred, expected.argmax(-1))
        text = conditional_text_features(host, head.prompt, feats[:, 0])
        torch.testing.assert_close(conditional_logits(host, feats[:, 0], text), expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(model.ctx, loaded.ctx)                          # predictors copy, never change the model

    coop_path = visionzoo.save_pretrained(host, tmp_path / "sapt")
    with pytest.raises(CheckpointError, match="not a CoCoOp checkpoint"):
        load_cocoop(str(coop_path), host)
    with pytest.raises(CheckpointError, match="is a CoCoOp checkpoint"):
        load_context(str(path), host, "--coop-pretrained")
    wider = visionzoo.create_model(f"fga_{name}", class_names=CLASSES, ctx_init="", n_ctx=6)
    with pytest.raises(CheckpointError, match="context of size"):
        load_cocoop(str(path), wider)
    with pytest.raises(CheckpointError, match="ctx"):
        visionzoo.create_model(f"cocoop_{name}", pretrained=str(path), ctx_init="", n_ctx=6)


@pytest.mark.slow
def test_train_cocoop_then_eval_fga_reads_its_checkpoint(tmp_path):
    from visionzoo.cli import eval_main, train_main

    name = tiny_clip()
    common = ["--clip-weights", "false", "--shots", "2", "--epochs", "1", "--batch-size", "3", "--quiet", *DATA]
    assert train_main(["cocoop", "--model", f"cocoop_{name}", "--opt", "sgd", "--lr", "0.01", "--text-chunk", "7",
                       "--output-dir", str(tmp_path / "cocoop"), *common]) == 0
    res = json.loads((tmp_path / "cocoop" / "results.json").read_text())
    assert res["steps"] == 4 and res["task"] == "cocoop"               # 6 classes x 2 shots / 3
    final = tmp_path / "cocoop" / "final"
    assert "meta_net.2.weight" in load_file(str(final / "model.safetensors"))
    # the trained Meta-Net is no longer zero: images now get their own prompts
    assert visionzoo.load_pretrained(final).meta_net[2].weight.abs().sum() > 0
    assert train_main(["coop", "--model", f"coop_{name}", "--output-dir", str(tmp_path / "coop"), *common]) == 0

    out = tmp_path / "eval"
    code = eval_main(["fga", "--model", f"fga_{name}", "--clip-weights", "false", "--cocoop-pretrained", str(final),
                      "--coop-pretrained", str(tmp_path / "coop" / "final"), "--method", "cocoop", "coop",
                      "--views", "4", "--eval-sets", "partworld:clean", "partworld:sketch", "--images-per-set", "3",
                      "--cocoop-chunk", "5", "--output-dir", str(out), "--quiet", *DATA])
    assert code == 0
    record = json.loads((out / "results.json").read_text())
    assert [r["method"] for r in record["accuracy"]] == ["cocoop", "coop"]
    assert record["cocoop_pretrained"] == str(final) and record["images"] == {"clean": 3, "sketch": 3}
    assert {r["method"]: r["views"] for r in record["costs"]} == {"cocoop": "original", "coop": "original"}
    assert "| cocoop |" in (out / "results.md").read_text()

    # `all` picks cocoop up when its prompt is given; a model under test that is itself cocoop_* works too
    code = eval_main(["fga", "--model", f"cocoop_{name}", "--pretrained", str(final), "--method", "cocoop",
                      "zeroshot", "--views", "2", "--eval-sets", "partworld:clean", "--images-per-set", "2",
                      "--output-dir", str(tmp_path / "own"), "--quiet", *DATA])
    assert code == 0
    # bad requests fail with exit code 2 and a clear message
    assert eval_main(["fga", "--model", f"fga_{name}", "--clip-weights", "false", "--method", "cocoop",
                      "--output-dir", str(tmp_path / "bad"), "--quiet", *DATA]) == 2
    assert train_main(["cocoop", "--model", f"cocoop_{name}", "--class-specific", "--output-dir",
                       str(tmp_path / "csc"), *common]) == 2
    assert train_main(["cocoop", "--model", f"coop_{name}", "--output-dir", str(tmp_path / "nococoop"),
                       *common]) == 2


def test_shipped_cocoop_card_pins_its_checkpoint():
    import yaml

    from visionzoo.cards import cards_dir
    from visionzoo.hub import sha256_file

    card = yaml.safe_load((cards_dir() / "cocoop_clip_tiny_partworld.yaml").read_text())
    folder = cards_dir() / card["weights"]["source"]
    sha = sha256_file(folder / "model.safetensors")
    assert sha == card["weights"]["sha256"] == json.loads((folder / "config.json").read_text())["weights_sha256"]
    model = visionzoo.load_pretrained(card["name"])
    assert isinstance(model, CoCoOpCLIP) and len(model.class_names) == 100
    assert model.ctx.shape == (4, 64) and model.config.meta_hidden == 8
    assert model.meta_net[2].weight.abs().sum() > 0                   # trained, no longer the zero init
