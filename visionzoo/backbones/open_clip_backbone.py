"""Build an open_clip model with weights from an open_clip tag or any visionzoo weight source.

``pretrained`` is ``False``, ``True`` (the first pretrained tag open_clip lists for the model), an
open_clip tag (``"openai"``, ``"laion2b_s34b_b88k"``: open_clip downloads it from the Hugging
Face Hub), or a local file / ``hf-hub:org/repo`` (its ``open_clip_model.safetensors``) / URL,
resolved by :mod:`visionzoo.hub` and handed to open_clip as a path.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import open_clip
from torch import nn

from ..errors import HubError, OfflineError, unknown_name
from ..hub import cache_dir, download_url, parse_source, resolve_file


def register_open_clip_config(name: str, config: dict[str, Any], folder: str | os.PathLike | None = None) -> Path:
    """Make ``name`` an open_clip model (``open_clip.add_model_config`` reads configs from JSON files)."""
    folder = Path(folder) if folder else cache_dir() / "open_clip_configs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    text = json.dumps(config, indent=2, sort_keys=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    open_clip.add_model_config(str(path))
    return path


def preprocessing_from_open_clip(model: nn.Module) -> dict[str, Any]:
    """input_size/mean/std/interpolation from open_clip's ``visual.preprocess_cfg``."""
    cfg = dict(getattr(model.visual, "preprocess_cfg", {}) or {})
    size = cfg.get("size", getattr(model.visual, "image_size", 224))
    h, w = (size, size) if isinstance(size, int) else tuple(size)
    return {"input_size": (3, int(h), int(w)), "mean": tuple(cfg.get("mean", open_clip.OPENAI_DATASET_MEAN)),
            "std": tuple(cfg.get("std", open_clip.OPENAI_DATASET_STD)),
            "interpolation": cfg.get("interpolation", "bicubic"), "crop_pct": 1.0,
            "resize_mode": cfg.get("resize_mode", "shortest")}


def create_open_clip_backbone(name: str, pretrained: bool | str | os.PathLike = False,
                              **kwargs: Any) -> tuple[nn.Module, str | None]:
    """Returns ``(model, weight_source)``; ``weight_source`` is None for random init."""
    own = _own_config(name)
    if own is not None:
        folder, preprocess, recipe = own
        kwargs.setdefault("force_preprocess_cfg", dict(preprocess))
        if pretrained is True:
            pretrained = folder / "open_clip_model.safetensors"
            if not pretrained.exists():
                raise HubError(f"{pretrained} is not there: the project's {name} weights ship with the "
                               f"repository; recreate them with `{recipe}`.")
    if name not in open_clip.list_models():
        raise unknown_name("open_clip model", name, open_clip.list_models(),
                           hint="See open_clip.list_models(); add your own with register_open_clip_config().")
    if pretrained is False or pretrained is None:
        logging.disable(logging.WARNING)  # open_clip warns on the root logger that nothing was loaded
        try:
            return open_clip.create_model(name, pretrained=None, **kwargs), None
        finally:
            logging.disable(logging.NOTSET)
    tags = open_clip.list_pretrained_tags_by_model(name)
    if pretrained is True:
        if not tags:
            raise OfflineError(f"open_clip has no pretrained tag for {name!r}; pass a weights file instead.")
        pretrained = tags[0]
    spec = os.fspath(pretrained)
    if spec in tags:
        cfg = open_clip.get_pretrained_cfg(name, spec)
        path = _fetch_tag(name, spec, cfg)
        if cfg.get("quick_gelu"):  # OpenAI weights were trained with QuickGELU
            kwargs.setdefault("force_quick_gelu", True)
        model = open_clip.create_model(name, pretrained=str(path), **kwargs)
        for key in ("mean", "std", "interpolation", "resize_mode"):
            if key in cfg:
                model.visual.preprocess_cfg[key] = cfg[key]
        return model, f"open_clip:{name}:{spec}"
    filename = "open_clip_model.safetensors" if parse_source(spec).kind == "hf-hub" else None
    path = resolve_file(spec, filename)
    return open_clip.create_model(name, pretrained=str(path), **kwargs), spec


def _own_config(name: str) -> tuple[Path, dict[str, Any], str] | None:
    """The project's own open_clip configs: registered on first use, weights shipped in models/."""
    from . import partworld
    if name != "clip_tiny_partworld":
        return None
    partworld.register_clip_tiny_partworld()
    return partworld.CLIP_TINY_PARTWORLD_DIR, partworld.CLIP_TINY_PARTWORLD_PREPROCESS, partworld.CLIP_RECIPE


_HUB_FILES = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")


def _fetch_tag(name: str, tag: str, cfg: dict[str, Any]) -> Path:
    """Download an open_clip tag through visionzoo's hub layer (so offline mode and caches apply)."""
    hub = (cfg.get("hf_hub") or "").strip("/")
    if hub:
        parts = hub.split("/")
        repo, sub = "/".join(parts[:2]), "/".join(parts[2:])
        errors: list[Exception] = []
        for fname in _HUB_FILES:
            try:
                return resolve_file(f"hf-hub:{repo}", f"{sub}/{fname}" if sub else fname)
            except HubError as e:
                errors.append(e)
        offline = [e for e in errors if isinstance(e, OfflineError)]
        raise OfflineError(f"open_clip {name!r} tag {tag!r}: " + str(offline[0] if offline else errors[-1])) from errors[-1]
    if cfg.get("url"):
        return download_url(cfg["url"])
    raise HubError(f"open_clip lists no download location for {name!r} tag {tag!r}.")
