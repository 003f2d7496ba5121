"""Imports every module that registers a dataset (kept as the single place to add one)."""

from . import (  # noqa: F401
    cifar,
    cub,
    folders,
    imagenet,
    natural,
    partworld,
    synthetic,
)
