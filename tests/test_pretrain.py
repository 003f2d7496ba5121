"""The project's tiny backbones: recipes (a few steps), export formats, shipped files and cards."""

from __future__ import annotations

import json

import open_clip
import timm
import torch

import visionzoo
from visionzoo.backbones.partworld import CLIP_TINY_PARTWORLD_DIR, VIT_TINY_PARTWORLD_FILE
from visionzoo.cards import all_cards
from visionzoo.cli import eval_main, train_main
from visionzoo.hub import sha256_file


def _recipe(tmp_path, model: str) -> dict:
    out = tmp_path / model
    args = ["pretrain", "--model", model, "--dataset-args", "images_per_class=2", "--epochs", "1",
            "--batch-size", "40", "--quiet", "--output-dir", str(out), "--export", str(tmp_path / f"{model}-export")]
    assert train_main(args) == 0
    return json.loads((out / "results.json").read_text())


def test_vit_recipe_runs_and_exports_a_timm_file(tmp_path):
    results = _recipe(tmp_path, "vit_tiny_partworld")
    assert results["steps"] == 3  # 60 classes x 2 images / batch 40
    exported = tmp_path / "vit_tiny_partworld-export.safetensors"
    assert str(exported) in results["exported"]
    # timm loads the export directly, and it is the trained network
    net = timm.create_model("vit_tiny_partworld", pretrained=True,
                            pretrained_cfg_overlay=dict(file=str(exported))).eval()
    trained = visionzoo.from_pretrained(results["final"]).eval()
    x = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(net(x), trained(x))


def test_clip_recipe_runs_and_exports_an_open_clip_folder(tmp_path):
    results = _recipe(tmp_path, "clip_tiny_partworld")
    folder = tmp_path / "clip_tiny_partworld-export"
    model, _, preprocess = open_clip.create_model_and_transforms(f"local-dir:{folder}")
    assert tuple(model.visual.preprocess_cfg["std"]) == (0.25, 0.25, 0.25)
    trained = visionzoo.from_pretrained(results["final"]).eval()
    x = torch.rand(2, 3, 64, 64)
    with torch.no_grad():  # fp16 storage: equal up to half precision
        torch.testing.assert_close(model.eval().encode_image(x), trained.net.encode_image(x), atol=2e-2, rtol=2e-2)


def test_before_adaptation_eval_writes_a_table(tmp_path):
    out = tmp_path / "ev"
    assert eval_main(["pretrain", "--model", "vit_tiny_partworld", "--probe-images-per-class", "3",
                      "--test-images-per-class", "2", "--eval-styles", "clean", "sketch", "--quiet",
                      "--output-dir", str(out)]) == 0
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [r["style"] for r in rows] == ["clean", "sketch", "shifted mean"]
    assert all(0.0 <= r["linear_probe_acc1"] <= 100.0 for r in rows)



def test_shipped_vit_loads_the_same_through_timm_and_visionzoo():
    assert VIT_TINY_PARTWORLD_FILE.exists(), "models/vit_tiny_partworld.safetensors must ship with the repo"
    assert VIT_TINY_PARTWORLD_FILE.stat().st_size <= 10_000_000
    a = timm.create_model("vit_tiny_partworld", pretrained=True, num_classes=0).eval()
    b = timm.create_model("vit_tiny_partworld", pretrained=True, num_classes=0,
                          pretrained_cfg_overlay=dict(file=str(VIT_TINY_PARTWORLD_FILE))).eval()
    c = visionzoo.create_model("classifier_vit_tiny_partworld", backbone_pretrained=True, num_classes=0).eval()
    x = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(a(x), b(x), rtol=0, atol=0)
        torch.testing.assert_close(a(x), c(x), rtol=0, atol=0)
    assert c.base_weights_source == "timm:vit_tiny_partworld"


def test_shipped_clip_loads_the_same_through_open_clip_and_visionzoo():
    weights = CLIP_TINY_PARTWORLD_DIR / "open_clip_model.safetensors"
    assert weights.exists(), "models/clip_tiny_partworld/ must ship with the repo"
    assert weights.stat().st_size <= 10_000_000
    a, _, _ = open_clip.create_model_and_transforms(f"local-dir:{CLIP_TINY_PARTWORLD_DIR}")
    b = visionzoo.create_model("clip_clip_tiny_partworld", backbone_pretrained=True)
    tok = open_clip.get_tokenizer(f"local-dir:{CLIP_TINY_PARTWORLD_DIR}")(["a photo of a thing."])
    x = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(a.eval().encode_image(x), b.eval().net.encode_image(x), rtol=0, atol=0)
        torch.testing.assert_close(a.encode_text(tok), b.net.encode_text(b.tokenize(["a photo of a thing."])),
                                   rtol=0, atol=0)


def test_backbone_cards_match_the_shipped_files():
    cards = {c.architecture: c for c in all_cards().values()}
    for arch, path in (("vit_tiny_partworld", VIT_TINY_PARTWORLD_FILE),
                       ("clip_tiny_partworld", CLIP_TINY_PARTWORLD_DIR / "open_clip_model.safetensors")):
        card = next(c for c in all_cards().values() if c.name.startswith(arch + "."))
        assert card.weights["sha256"] == sha256_file(path)
        assert "recipe" in card.extra and "metrics" in card.extra
    assert cards  # the cards exist
