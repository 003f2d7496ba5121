"""Backbone pretraining on PartWorld (supervised ViT, contrastive CLIP) and the before-adaptation evals."""

from . import clip_model, dino, part_sup, published, task  # noqa: F401
