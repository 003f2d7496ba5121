"""Registered RAM-family architectures: ``ram_base`` (deepinv's RAM), ``ram_small``, ``ram_tiny``.

All take ``y`` and a deepinv linear operator: ``model(y, physics)`` -> ``[B, C, H, W]``.

============  =====================  ======  ===========  ===========================
name          widths per scale       blocks  parameters   weights
============  =====================  ======  ===========  ===========================
ram_base      64 / 128 / 256 / 512   4       35.6 M       deepinv's ram.pth.tar (card)
ram_small     32 / 64 / 128 / 256    2       5.1 M        train with the zoo recipe
ram_tiny      16 / 32 / 64 / 128     2       1.5 M        train with the zoo recipe
============  =====================  ======  ===========  ===========================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch

from ...registry import register_model
from .config import RAM_BASE, RAM_SMALL, RAM_TINY, RAMConfig
from .network import RAMNet


def _build(base: RAMConfig, in_channels: Sequence[int] | None, device: torch.device | str | None,
           **overrides) -> RAMNet:
    cfg = base if in_channels is None else replace(base, in_channels=tuple(in_channels))
    if overrides:
        cfg = replace(cfg, **overrides)
    return RAMNet(cfg, device=device)


@register_model
def ram_base(in_channels: Sequence[int] | None = None, device: torch.device | str | None = None,
             **kwargs) -> RAMNet:
    """deepinv's RAM (35.6 M parameters); state-dict compatible with ``deepinv.models.RAM``."""
    return _build(RAM_BASE, in_channels, device, **kwargs)


@register_model
def ram_small(in_channels: Sequence[int] | None = None, device: torch.device | str | None = None,
              **kwargs) -> RAMNet:
    """RAM design at half width and 2 blocks per scale (~5.1 M parameters)."""
    return _build(RAM_SMALL, in_channels, device, **kwargs)


@register_model
def ram_tiny(in_channels: Sequence[int] | None = None, device: torch.device | str | None = None,
             **kwargs) -> RAMNet:
    """RAM design at quarter width and 2 blocks per scale (~1.5 M parameters, fast on CPU)."""
    return _build(RAM_TINY, in_channels, device, **kwargs)
