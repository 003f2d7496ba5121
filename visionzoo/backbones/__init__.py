"""Thin adapters over timm ViTs and open_clip models."""

from . import partworld  # noqa: F401  (timm registration of the project's tiny ViT)
from .open_clip_backbone import (
           create_open_clip_backbone,
           preprocessing_from_open_clip,
           register_open_clip_config,
)
from .timm_backbone import create_timm_backbone, preprocessing_from_timm

__all__ = ["create_timm_backbone", "preprocessing_from_timm", "create_open_clip_backbone",
           "preprocessing_from_open_clip", "register_open_clip_config"]
