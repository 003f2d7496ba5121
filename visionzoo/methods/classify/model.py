"""``classifier_<timm name>``: a timm model with a fresh head, optionally a frozen backbone."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from ...backbones import create_timm_backbone, preprocessing_from_timm
from ...registry import register_family


class Classifier(nn.Module):
    """Wraps a timm classifier. ``linear_probe=True`` freezes everything but the head."""

    def __init__(self, backbone: str, num_classes: int = 10, backbone_pretrained: bool | str = False,
                 linear_probe: bool = False, class_names: list[str] | None = None, **timm_kwargs: Any):
        super().__init__()
        self.net, source = create_timm_backbone(backbone, backbone_pretrained, num_classes=num_classes, **timm_kwargs)
        self.linear_probe = linear_probe
        if linear_probe:
            for p in self.net.parameters():
                p.requires_grad_(False)
            for p in self.net.get_classifier().parameters():
                p.requires_grad_(True)
        self.base_weights_source = source
        self.backbone_info = {"name": backbone, "source": source, "timm_kwargs": timm_kwargs}
        self.pretrained_cfg = preprocessing_from_timm(self.net)
        self.class_names = class_names

    def forward(self, x: Tensor) -> Tensor:
        """``x`` [B, 3, H, W] normalised -> logits [B, num_classes]."""
        return self.net(x)


@register_family("classifier", default_backbones=["vit_tiny_patch16_224", "vit_small_patch16_224",
                                                   "resnet18", "deit_tiny_patch16_224"],
                 backbone_check=lambda name: __import__("timm").is_model(name))
def classifier(backbone: str, **kwargs: Any) -> Classifier:
    return Classifier(backbone, **kwargs)


