"""The tiny backbones as visionzoo architectures, so their model cards load them by name.

``create_model("vit_tiny_partworld", pretrained=True)`` gives the timm model with the shipped
weights (the same file ``timm.create_model("vit_tiny_partworld", pretrained=True)`` reads);
``create_model("clip_tiny_partworld", pretrained=True)`` gives an :class:`OpenClip` wrapper whose
``net`` is the open_clip model (card weights are open_clip state dicts, loaded into ``net``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ...backbones import create_timm_backbone, preprocessing_from_timm
from ...checkpoint import load_state_into
from ...registry import register_model
from .clip_model import OpenClip


class PublishedClip(OpenClip):
    """OpenClip whose published weights are plain open_clip state dicts."""

    def load_pretrained_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        load_state_into(self.net, state_dict, "full", where=f"{self.backbone_name} weights")


@register_model
def vit_tiny_partworld(**kwargs: Any) -> nn.Module:
    """The project's 64 px ViT (timm ``vit_tiny_partworld``); ``num_classes`` defaults to its 60 classes."""
    net, source = create_timm_backbone("vit_tiny_partworld", kwargs.pop("backbone_pretrained", False), **kwargs)
    net.pretrained_cfg = preprocessing_from_timm(net)
    net.backbone_info = {"name": "vit_tiny_partworld", "source": source, "library": "timm"}
    return net


@register_model
def clip_tiny_partworld(**kwargs: Any) -> nn.Module:
    """The project's 64 px CLIP (open_clip config ``clip_tiny_partworld``)."""
    return PublishedClip("clip_tiny_partworld", **kwargs)
