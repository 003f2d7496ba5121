"""The shipped tiny IVPT / VPT-Deep checkpoints load from their cards and classify PartWorld images."""

from __future__ import annotations

import torch

import visionzoo
from visionzoo.data import build_dataset
from visionzoo.methods.ivpt import IVPT, VPTDeep
from visionzoo.methods.ivpt.demo import partworld_class_ids
from visionzoo.methods.ivpt.report import interp_transform


def test_shipped_checkpoints_load_and_classify():
    ivpt = visionzoo.create_model("ivpt_vit_tiny_partworld", pretrained=True).eval()
    vpt = visionzoo.create_model("vpt_deep_vit_tiny_partworld", pretrained=True).eval()
    assert isinstance(ivpt, IVPT) and isinstance(vpt, VPTDeep)
    assert ivpt.class_names == vpt.class_names and ivpt.pretrained_cfg["input_size"] == vpt.pretrained_cfg["input_size"]
    side = ivpt.pretrained_cfg["input_size"][-1]
    ids = partworld_class_ids(ivpt.class_names)
    data = build_dataset("partworld", split="test", classes=ids[:4], images_per_class=2, image_size=side)
    tf = interp_transform(ivpt.pretrained_cfg)
    x = torch.stack([tf(data[i][0]) for i in range(len(data))])
    y = torch.tensor([data[i][1] for i in range(len(data))])
    with torch.no_grad():
        for model in (ivpt, vpt):
            logits = model(x)
            assert logits.shape == (8, len(ivpt.class_names))
            assert (logits.argmax(1) == y).float().mean() >= 0.5  # trained: far above chance (5 %)
        assert torch.equal(ivpt(x), ivpt(x))  # deterministic in eval
