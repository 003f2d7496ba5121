"""Dataset cards: ``datasets/<name>.yaml`` at the project root (source, layout, splits, class lists)."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import yaml


def card_dir() -> Path:
    """The folder of dataset cards (``$VISIONZOO_DATASETS`` or ``<project>/datasets``)."""
    env = os.environ.get("VISIONZOO_DATASETS")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "datasets"


@cache
def load_card(name: str) -> dict | None:
    """The parsed card ``name`` (e.g. ``"imagenet-a"``), or None when no card file is installed."""
    path = card_dir() / f"{name}.yaml"
    if not path.is_file():
        return None
    return yaml.safe_load(path.read_text())
