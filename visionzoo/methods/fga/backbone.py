"""The frozen open_clip model under a prompt: any open_clip name, weights from any visionzoo source,
and the project's shipped tiny CLIP (``models/clip_tiny_partworld/``, open_clip's ``local-dir`` layout)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import open_clip
from torch import nn

from ...backbones import create_open_clip_backbone, preprocessing_from_open_clip
from ...backbones.partworld import register_clip_tiny_partworld
from ...errors import HubError, unknown_name

TINY_CLIP = "clip_tiny_partworld"
_WEIGHT_FILES = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin", "model.safetensors")


def ensure_open_clip_name(name: str) -> None:
    """Raise a 'did you mean' error unless ``name`` is an open_clip model (registers the tiny CLIP)."""
    if name == TINY_CLIP:
        register_clip_tiny_partworld()
    if name not in open_clip.list_models():
        raise unknown_name("open_clip model", name, open_clip.list_models(),
                           hint="coop_<name> / fga_<name> take any open_clip model name (open_clip.list_models()); "
                                "add your own with visionzoo.backbones.register_open_clip_config().")


def _weights_in(folder: Path) -> Path:
    for name in _WEIGHT_FILES:
        if (folder / name).exists():
            return folder / name
    found = sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin"))
    if found:
        return found[0]
    raise HubError(f"{folder} holds no open_clip weights ({', '.join(_WEIGHT_FILES)}).")


def load_clip(name: str, pretrained: bool | str | os.PathLike = False,
              **kwargs: Any) -> tuple[nn.Module, str | None, dict[str, Any]]:
    """``(model, weight source or None, preprocessing dict)`` for open_clip model ``name``.

    ``pretrained``: False (random), True (the shipped weights for the tiny CLIP, else open_clip's
    first tag), an open_clip tag, a weights file, an open_clip ``local-dir`` folder
    (``open_clip_config.json`` + weights), ``hf-hub:org/repo`` or a URL.
    """
    ensure_open_clip_name(name)
    folder_cfg: dict[str, Any] = {}
    if isinstance(pretrained, (str, os.PathLike)) and Path(pretrained).is_dir():
        folder = Path(pretrained)
        if (folder / "open_clip_config.json").exists():
            folder_cfg = json.loads((folder / "open_clip_config.json").read_text()).get("preprocess_cfg", {}) or {}
        pretrained = _weights_in(folder)
    clip, source = create_open_clip_backbone(name, pretrained, **kwargs)
    if folder_cfg:
        clip.visual.preprocess_cfg = {**getattr(clip.visual, "preprocess_cfg", {}), **folder_cfg}
    if name == TINY_CLIP and source is not None and pretrained is True:
        source = f"visionzoo:models/{TINY_CLIP}"  # the shipped weights, wherever the repository lives
    return clip, source, preprocessing_from_open_clip(clip)
