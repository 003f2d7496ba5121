"""``train.py pretrain --part-loss-weight``: the part-supervised ORACLE pretraining (tiny ViT, few steps)."""

from __future__ import annotations

import json

import pytest
import timm
import torch
import torch.nn.functional as F

import visionzoo
from visionzoo.cli import train_main
from visionzoo.data import build_dataset
from visionzoo.methods.pretrain.part_sup import (
    BACKGROUND,
    PartMaskItems,
    PartSupervised,
    part_loss,
    patch_part_labels,
    pixel_label_map,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TINY = dict(depth=2, embed_dim=32, num_heads=2)


def test_pixel_and_patch_labels_follow_the_majority_rule():
    masks = torch.zeros(5, 16, 16, dtype=torch.bool)
    masks[1, :8, :8] = True  # head fills patch (0, 0)
    masks[2, 8:, :3] = True  # left limb: 3/8 of patch (1, 0) -> background
    masks[0, :8, 8:13] = True  # body 5/8 + tail 1/8 of patch (0, 1) -> body
    masks[4, :8, 13:14] = True
    label_map = pixel_label_map(masks)
    assert label_map.dtype == torch.uint8 and int(label_map[15, 15]) == BACKGROUND and int(label_map[0, 0]) == 1
    assert patch_part_labels(label_map, 8).tolist() == [[1, 0], [BACKGROUND, BACKGROUND]]
    # batched input keeps its leading dimension
    assert patch_part_labels(label_map[None].expand(3, -1, -1), 8).shape == (3, 2, 2)


def test_balanced_part_loss_weighs_each_label_equally():
    target = torch.full((1, 4, 4), BACKGROUND)
    target[0, 0, 0] = 2  # one left-limb patch among 15 background ones
    logits = torch.zeros(1, 6, 4, 4)
    logits[:, BACKGROUND] = 10.0  # sure of background everywhere: right on 15 patches, wrong on the limb
    per = F.cross_entropy(logits, target, reduction="none")
    limb, bg = float(per[0, 0, 0]), float(per[0, 1, 1])
    assert float(part_loss(logits, target, balanced=False)) == pytest.approx((limb + 15 * bg) / 16)
    assert float(part_loss(logits, target)) == pytest.approx((limb + bg) / 2)


def test_training_items_keep_image_and_parts_aligned_and_swap_limbs_on_flip():
    raw = build_dataset("partworld", split="train", classes=[0], image_size=32, images_per_class=4)
    items = PartMaskItems(raw, 32, 8, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), crop_scale=1.0)
    items.crop = lambda image, mask: (image, mask)  # geometry off: labels must equal the rendered ones
    want = patch_part_labels(pixel_label_map(raw.generate_batch([0])["part_masks"][0]), 8)
    flips = {}
    for seed in range(8):
        torch.manual_seed(seed)
        image, label, parts = items[0]
        flipped = not torch.equal(image, raw[0][0])
        flips[flipped] = parts
        assert label == 0 and parts.shape == (4, 4)
    assert set(flips) == {False, True}
    assert torch.equal(flips[False], want)
    mirrored = want.flip(-1).clone()
    left, right = mirrored == 2, mirrored == 3
    mirrored[left], mirrored[right] = 3, 2
    assert torch.equal(flips[True], mirrored)


def test_part_loss_reaches_the_backbone_and_training_exports_a_timm_file(tmp_path):
    model = PartSupervised("vit_tiny_partworld", num_classes=7, **TINY)
    x = torch.rand(2, 3, 64, 64)
    logits, parts = model.forward_with_parts(x)
    assert logits.shape == (2, 7) and parts.shape == (2, 6, 8, 8)
    both = model(x, with_parts=True)  # the training path goes through forward (a DDP wrapper sees it)
    assert torch.equal(both[0], logits) and torch.equal(both[1], parts)
    torch.testing.assert_close(logits, model(x))  # the classifier path is the plain one
    F.cross_entropy(parts, torch.randint(0, 6, (2, 8, 8))).backward()
    assert model.net.blocks[0].attn.qkv.weight.grad.abs().sum() > 0
    assert model.net.head.weight.grad is None  # the part loss does not touch the class head

    out = tmp_path / "run"
    args = ["pretrain", "--model", "vit_tiny_partworld", "--model-args", "depth=2", "embed_dim=32", "num_heads=2",
            "--part-loss-weight", "1.0", "--dataset-args", "images_per_class=1", "--epochs", "1",
            "--batch-size", "30", "--quiet", "--output-dir", str(out), "--export", str(tmp_path / "export")]
    assert train_main(args) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["steps"] == 2
    trained = visionzoo.from_pretrained(results["final"]).eval()
    assert isinstance(trained, PartSupervised)
    net = timm.create_model("vit_tiny_partworld", pretrained=True, num_classes=60, pretrained_cfg_overlay=dict(
        file=str(tmp_path / "export.safetensors")), **TINY).eval()
    with torch.no_grad():
        torch.testing.assert_close(net(x), trained(x))


def test_part_loss_is_only_for_supervised_vits(tmp_path):
    with pytest.raises(ValueError, match="part-loss-weight"):
        train_main(["pretrain", "--objective", "dino", "--part-loss-weight", "1", "--model", "vit_tiny_partworld",
                    "--dataset-args", "images_per_class=1", "--epochs", "1", "--quiet",
                    "--output-dir", str(tmp_path / "d")])
