"""Thin adapters over timm ViTs and open_clip models."""

from .timm_backbone import create_timm_backbone, preprocessing_from_timm

__all__ = ["create_timm_backbone", "preprocessing_from_timm"]
