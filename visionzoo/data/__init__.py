"""Datasets, splitters and test-time views.

Datasets are built by name (:func:`build_dataset`, :func:`list_datasets`). The classes and helpers
below are imported on first use, so ``import visionzoo.data`` stays light.
"""

from importlib import import_module

from .registry import build_dataset, list_datasets, register_dataset

_LAZY = {
    "PartWorld": "partworld",
    "STYLES": "partworld_styles", "SHIFTED_STYLES": "partworld_styles", "SOURCE_STYLE": "partworld_styles",
    "PART_SLOTS": "partworld_classes", "PRETRAIN_CLASSES": "partworld_classes",
    "DOWNSTREAM_CLASSES": "partworld_classes",
    "NaturalImages": "natural", "NATURAL_TRAIN": "natural", "NATURAL_EVAL": "natural",
    "ImageList": "folders", "CUB200": "cub", "CIFAR100": "cifar",
    "ClassIncremental": "continual", "RelabelledSubset": "continual", "few_shot": "continual",
    "few_shot_indices": "continual", "class_incremental": "continual", "CONTINUAL_PRESETS": "continual",
    "TTAViews": "views", "augmix": "views",
    "imagenet_class_names": "imagenet_classes", "imagenet_wnids": "imagenet_classes",
    "subset_wnids": "imagenet_classes", "subset_indices": "imagenet_classes",
}

__all__ = ["build_dataset", "list_datasets", "register_dataset", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
