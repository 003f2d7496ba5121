"""Build a timm backbone with its weights from any visionzoo weight source.

``pretrained`` is ``False``, ``True`` (timm's default pretrained_cfg: its Hugging Face Hub repo,
fetched through visionzoo's hub layer), a local file, ``hf-hub:org/repo[@rev]`` (its ``model.safetensors``), or a URL.
Local/hub/URL files go through :mod:`visionzoo.hub` and reach timm as
``pretrained_cfg_overlay=dict(file=...)`` so timm's own filtering (head removal, position
embedding resampling) applies.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import timm
from torch import nn

from ..errors import HubError, OfflineError, unknown_name
from ..hub import download_url, parse_source, resolve_file


def preprocessing_from_timm(model: nn.Module) -> dict[str, Any]:
    """input_size/mean/std/interpolation/crop_pct from a timm model's pretrained_cfg."""
    cfg = dict(getattr(model, "pretrained_cfg", {}) or {})
    out = {k: cfg[k] for k in ("input_size", "mean", "std", "interpolation", "crop_pct", "crop_mode") if k in cfg}
    img_size = getattr(getattr(model, "patch_embed", None), "img_size", None)
    if img_size is not None:  # the size actually built (img_size= overrides the cfg)
        out["input_size"] = (3, int(img_size[0]), int(img_size[1]))
    out.setdefault("interpolation", "bicubic")
    out.setdefault("crop_pct", 1.0)
    return out


def create_timm_backbone(name: str, pretrained: bool | str | os.PathLike = False,
                         **timm_kwargs: Any) -> tuple[nn.Module, str | None]:
    """Returns ``(model, weight_source)``; ``weight_source`` is None for random init."""
    if not timm.is_model(name):
        raise unknown_name("timm model", name, timm.list_models(), hint="See timm.list_models().")
    if pretrained is False or pretrained is None:
        return timm.create_model(name, pretrained=False, **timm_kwargs), None
    if pretrained is True:
        path = _fetch_default(name)
        model = timm.create_model(name, pretrained=True, pretrained_cfg_overlay=dict(file=str(path)), **timm_kwargs)
        return model, f"timm:{name}"
    spec = os.fspath(pretrained)
    filename = "model.safetensors" if parse_source(spec).kind == "hf-hub" else None
    path = resolve_file(spec, filename)
    model = timm.create_model(name, pretrained=True, pretrained_cfg_overlay=dict(file=str(path)), **timm_kwargs)
    return model, spec


def _fetch_default(name: str) -> Path:
    """timm's default weights for ``name``, through visionzoo's hub layer (offline mode and caches apply)."""
    cfg = timm.models.get_pretrained_cfg(name)
    if cfg is not None and cfg.file:  # weights shipped with a package (the project's own tiny backbones)
        path = Path(cfg.file)
        if not path.exists():
            raise HubError(f"{path} is not there: {name}'s weights ship with the repository; recreate them "
                           f"with `python train.py pretrain --model {name} --export {path}`.")
        return path
    if cfg is None or not (cfg.hf_hub_id or cfg.url):
        raise HubError(f"timm has no pretrained weights for {name!r}; pass a weights file instead.")
    if cfg.hf_hub_id:
        errors: list[Exception] = []
        for fname in ("model.safetensors", "pytorch_model.bin"):
            try:
                return resolve_file(f"hf-hub:{cfg.hf_hub_id}", fname)
            except HubError as e:
                errors.append(e)
        offline = [e for e in errors if isinstance(e, OfflineError)]
        raise (offline[0] if offline else errors[-1])
    return download_url(cfg.url)
