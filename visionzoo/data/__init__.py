"""Datasets, splitters and test-time views."""

from .registry import build_dataset, list_datasets, register_dataset

__all__ = ["build_dataset", "list_datasets", "register_dataset"]
