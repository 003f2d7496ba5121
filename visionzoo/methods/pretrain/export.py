"""Write a pretrained backbone in its library's own format (timm safetensors / open_clip local-dir)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import open_clip
import torch
from safetensors.torch import save_file

from ...checkpoint import from_pretrained
from .clip_model import OpenClip


def export_backbone(checkpoint: str | os.PathLike, target: str | os.PathLike, dtype: torch.dtype | None = None) -> Path:
    """Export the backbone of a ``pretrain`` checkpoint; returns the written file or folder.

    timm: ``target`` (``.safetensors`` added if missing) holds the timm state dict of ``model.net``
    (for ``dino_*`` the EMA teacher, without head), fp32 unless ``dtype`` is given.
    open_clip: ``target/`` holds ``open_clip_config.json`` (model + preprocess config) and
    ``open_clip_model.safetensors`` in fp16 (half the size; loading casts back to fp32).
    """
    model = from_pretrained(checkpoint)
    target = Path(target)
    if isinstance(model, OpenClip):
        target.mkdir(parents=True, exist_ok=True)
        cfg = open_clip.get_model_config(model.backbone_name)
        pp = {k: model.net.visual.preprocess_cfg[k] for k in ("mean", "std", "interpolation", "resize_mode")}
        tmp = target / ".open_clip_config.json.tmp"
        tmp.write_text(json.dumps({"model_cfg": cfg, "preprocess_cfg": pp}, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, target / "open_clip_config.json")
        state = {k: v.detach().to(torch.float16).contiguous() for k, v in model.net.state_dict().items()}
        _save_atomic(state, target / "open_clip_model.safetensors")
        return target
    path = target if target.suffix else target.with_suffix(".safetensors")
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to(dtype or v.dtype).contiguous() for k, v in model.net.state_dict().items()}
    _save_atomic(state, path)
    return path


def _save_atomic(state: dict[str, torch.Tensor], path: Path) -> None:
    tmp = path.with_name("." + path.name + ".tmp")
    save_file(state, str(tmp), metadata={"format": "pt"})
    os.replace(tmp, path)
