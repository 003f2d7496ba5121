"""The project's own tiny backbones, pretrained on PartWorld pretraining classes (issue: tiny backbones).

* ``vit_tiny_partworld``: a timm ``VisionTransformer`` (64 px, patch 8 → 8×8 tokens, 8 blocks,
  width 128, 4 heads, class token). Registered with timm on ``import visionzoo``, with a
  pretrained cfg whose ``file`` is the safetensors shipped in ``models/``, so both
  ``timm.create_model("vit_tiny_partworld", pretrained=True)`` and
  ``timm.create_model("vit_tiny_partworld", pretrained=True, pretrained_cfg_overlay=dict(file=...))``
  work offline.
* ``clip_tiny_partworld``: an open_clip config (ViT image tower as above but 6 blocks, a small
  text tower with open_clip's own tokenizer), registered with ``open_clip.add_model_config``; its
  weights ship as ``models/clip_tiny_partworld/`` (``open_clip_config.json`` +
  ``open_clip_model.safetensors``), so ``open_clip.create_model_and_transforms(
  "local-dir:models/clip_tiny_partworld")`` loads them without visionzoo.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from timm.models import build_model_with_cfg, generate_default_cfgs, register_model
from timm.models.vision_transformer import VisionTransformer, checkpoint_filter_fn

MODELS_DIR = Path(__file__).resolve().parent.parent.parent / "models"
PARTWORLD_MEAN = (0.5, 0.5, 0.5)
PARTWORLD_STD = (0.25, 0.25, 0.25)
VIT_TINY_PARTWORLD_FILE = MODELS_DIR / "vit_tiny_partworld.safetensors"
CLIP_TINY_PARTWORLD_DIR = MODELS_DIR / "clip_tiny_partworld"  # open_clip "local-dir:" layout

VIT_TINY_PARTWORLD_ARGS: dict[str, Any] = dict(img_size=64, patch_size=8, embed_dim=128, depth=8, num_heads=4,
                                               mlp_ratio=4.0)

default_cfgs = generate_default_cfgs({
    "vit_tiny_partworld.pw_sup": {
        "file": str(VIT_TINY_PARTWORLD_FILE),
        "num_classes": 60, "input_size": (3, 64, 64), "pool_size": None, "crop_pct": 1.0,
        "interpolation": "bilinear", "mean": PARTWORLD_MEAN, "std": PARTWORLD_STD,
        "first_conv": "patch_embed.proj", "classifier": "head", "license": "apache-2.0",
    },
})


@register_model
def vit_tiny_partworld(pretrained: bool = False, **kwargs: Any) -> VisionTransformer:
    """ViT for 64 px PartWorld images; weights: ``models/vit_tiny_partworld.safetensors``."""
    args = {**VIT_TINY_PARTWORLD_ARGS, **kwargs}
    return build_model_with_cfg(VisionTransformer, "vit_tiny_partworld", pretrained,
                                pretrained_filter_fn=checkpoint_filter_fn, **args)


CLIP_TINY_PARTWORLD_CONFIG: dict[str, Any] = {
    "embed_dim": 128,
    "vision_cfg": {"image_size": 64, "patch_size": 8, "width": 128, "layers": 6, "head_width": 32,
                   "mlp_ratio": 4.0},
    "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 4},
}
CLIP_TINY_PARTWORLD_PREPROCESS = {"mean": PARTWORLD_MEAN, "std": PARTWORLD_STD, "interpolation": "bilinear",
                                  "resize_mode": "shortest"}
CLIP_RECIPE = "python train.py pretrain --model clip_tiny_partworld --export models/clip_tiny_partworld"
VIT_RECIPE = "python train.py pretrain --model vit_tiny_partworld --export models/vit_tiny_partworld.safetensors"


def register_clip_tiny_partworld() -> str:
    """Register the ``clip_tiny_partworld`` open_clip config (idempotent); returns its name."""
    import open_clip

    from .open_clip_backbone import register_open_clip_config

    if "clip_tiny_partworld" not in open_clip.list_models():
        cfg = {**CLIP_TINY_PARTWORLD_CONFIG,
               "vision_cfg": {**CLIP_TINY_PARTWORLD_CONFIG["vision_cfg"]}}
        register_open_clip_config("clip_tiny_partworld", cfg)
    return "clip_tiny_partworld"
