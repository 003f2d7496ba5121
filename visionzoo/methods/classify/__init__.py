"""Supervised classification on a timm backbone (full fine-tuning or linear probe)."""

from . import model, task  # noqa: F401
