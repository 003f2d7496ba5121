"""Tiny open_clip configurations (random weights) shared by the FGA tests."""

from __future__ import annotations

import copy

from visionzoo.backbones import register_open_clip_config

BASE = {"embed_dim": 16,
        "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 8, "head_width": 16},
        "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 16, "heads": 2, "layers": 1}}
VARIANTS = {
    "fga_test_clip": {},                                                        # CLIP, projection matrix
    "fga_test_custom_linear": {"custom_text": True, "text_cfg": {"proj_bias": True}},  # CustomTextCLIP, Linear
    "fga_test_custom_cls": {"custom_text": True, "text_cfg": {"embed_cls": True}},     # appended class token
}


def tiny_clip(name: str = "fga_test_clip") -> str:
    """Register the tiny open_clip config ``name`` (one of :data:`VARIANTS`) and return its name."""
    cfg = copy.deepcopy(BASE)
    extra = copy.deepcopy(VARIANTS[name])
    cfg["text_cfg"].update(extra.pop("text_cfg", {}))
    cfg.update(extra)
    register_open_clip_config(name, cfg)
    return name


CLASSES = ["striped red glider", "cat", "plain blue boxy skimmer", "dog"]
