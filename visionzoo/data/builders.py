"""Imports every module that registers a dataset (kept as the single place to add one)."""

from . import synthetic  # noqa: F401
