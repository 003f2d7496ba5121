"""``clip_<open_clip name>``: an open_clip model as a visionzoo architecture (CLIP-style training)."""

from __future__ import annotations

from typing import Any

import open_clip
import torch
from torch import Tensor, nn

from ...backbones import create_open_clip_backbone, preprocessing_from_open_clip
from ...registry import register_family

OWN_OPEN_CLIP = ("clip_tiny_partworld",)

class OpenClip(nn.Module):
    """Wraps an open_clip CLIP; ``forward(images, tokens)`` gives normalised features and the scale."""

    def __init__(self, backbone: str, backbone_pretrained: bool | str = False, class_names: list[str] | None = None,
                 **open_clip_kwargs: Any):
        super().__init__()
        self.net, source = create_open_clip_backbone(backbone, backbone_pretrained, **open_clip_kwargs)
        self.backbone_name = backbone
        self.base_weights_source = source
        self.backbone_info = {"name": backbone, "source": source, "library": "open_clip"}
        self.pretrained_cfg = preprocessing_from_open_clip(self.net)
        self.class_names = class_names

    def tokenize(self, texts: list[str]) -> Tensor:
        """Token ids ``[N, context_length]`` with open_clip's tokenizer for this model."""
        return open_clip.get_tokenizer(self.backbone_name)(texts)

    def forward(self, images: Tensor, tokens: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``images`` [B, 3, H, W], ``tokens`` [B, L] -> (image feats [B, D], text feats [B, D], logit scale)."""
        img = self.net.encode_image(images, normalize=True)
        txt = self.net.encode_text(tokens, normalize=True)
        return img, txt, self.net.logit_scale.exp()

    @torch.no_grad()
    def class_text_features(self, prompts_per_class: list[list[str]]) -> Tensor:
        """Mean of the normalised features of each class's prompts, renormalised: ``[C, D]``."""
        feats = []
        for prompts in prompts_per_class:
            f = self.net.encode_text(self.tokenize(prompts).to(self.net.logit_scale.device), normalize=True)
            f = f.mean(0)
            feats.append(f / f.norm())
        return torch.stack(feats)


def _is_open_clip(name: str) -> bool:
    return name in OWN_OPEN_CLIP or name in open_clip.list_models()


@register_family("clip", default_backbones=["ViT-B-16", "ViT-B-16-quickgelu"], backbone_check=_is_open_clip)
def clip(backbone: str, **kwargs: Any) -> OpenClip:
    return OpenClip(backbone, **kwargs)
