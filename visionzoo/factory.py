"""``create_model``, ``load_pretrained`` and ``create_transforms``: the one-name entry points."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .cards import ModelCard, find_card, get_card
from .checkpoint import (
    CONFIG_NAME,
    WEIGHTS_NAME,
    from_pretrained,
    load_safetensors,
    load_state_into,
    read_config,
)
from .errors import CheckpointError, VisionZooError
from .hub import parse_source, resolve_file
from .registry import is_model, model_entrypoint


def _is_checkpoint(spec: str) -> bool:
    """True when ``spec`` names a save_pretrained folder (local, hub repo or URL base)."""
    s = parse_source(spec)
    if s.kind == "local":
        return (Path(s.location) / CONFIG_NAME).exists()
    if s.kind == "url":
        return not Path(s.location.split("?")[0]).suffix  # a URL without a file suffix is a folder
    return True  # hub repos published by visionzoo hold config.json + model.safetensors


def create_model(name: str, pretrained: bool | str | os.PathLike = False, **overrides: Any) -> nn.Module:
    """Build an architecture or a published instance by name.

    Args:
        name: an architecture (``list_models()``) or a card name ``arch.tag`` (``list_pretrained()``).
        pretrained: ``False`` (random/base init), ``True`` (the card's weight source), a local
            checkpoint folder or weights file, ``hf-hub:org/repo[@revision]``, or an https URL.
        **overrides: keyword arguments for the architecture (e.g. ``num_classes=200``); they
            override the card's ``model_args``.
    """
    card: ModelCard | None = None
    arch = name
    if not is_model(name):
        card = find_card(name)
        if card is None:
            model_entrypoint(name)  # raises: unknown name, with the closest models and cards
        arch = card.architecture
    elif pretrained is True:
        card = get_card(name)

    if isinstance(pretrained, (str, os.PathLike)) and _is_checkpoint(os.fspath(pretrained)):
        config = read_config(pretrained)
        if config["architecture"] != arch:
            raise CheckpointError(f"{pretrained} holds a {config['architecture']!r} checkpoint, not {arch!r}; "
                                  f"use create_model({config['architecture']!r}, pretrained=...) or "
                                  "visionzoo.load_pretrained(path).")
        return from_pretrained(pretrained, **overrides)

    model_args = {**(card.model_args if card else {}), **overrides}
    model = model_entrypoint(arch)(**model_args)
    model.visionzoo_cfg = {
        "architecture": arch,
        "model_args": model_args,
        "base_weights": getattr(model, "base_weights_source", None),
        "backbone": getattr(model, "backbone_info", None),
    }
    if card is not None and card.preprocessing:
        model.pretrained_cfg = {**getattr(model, "pretrained_cfg", {}), **card.preprocessing}

    if pretrained is True:
        spec, filename, sha = card.weight_source()
        if _is_checkpoint(spec) and not filename:
            loaded = from_pretrained(spec, pinned_sha256=sha, **overrides)
            loaded.visionzoo_cfg["card"] = card.name
            return loaded
        _load_weights_file(model, resolve_file(spec, filename, sha), card.weights.get("format"))
        model.visionzoo_cfg["weights"] = card.name
    elif pretrained:
        _load_weights_file(model, resolve_file(pretrained), None)
        model.visionzoo_cfg["weights"] = os.fspath(pretrained)
    return model


def _load_weights_file(model: nn.Module, path: Path, fmt: str | None) -> None:
    """Load a single weights file (safetensors, or a torch file read with weights_only=True)."""
    fmt = fmt or ("safetensors" if path.suffix == ".safetensors" else "torch")
    if fmt == "safetensors":
        state = load_safetensors(path)
    else:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # pickle errors, truncation, or code that weights_only refuses to run
            raise CheckpointError(f"cannot read {path} as a torch weights file ({type(e).__name__}: {e}). "
                                  "visionzoo reads torch files with weights_only=True and never runs code "
                                  "shipped with weights; use a safetensors file if this one needs pickled "
                                  "objects.") from e
        if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
            state = state["state_dict"]
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} does not hold a state dict.")
    hook = getattr(model, "load_pretrained_weights", None)
    if callable(hook):
        hook(state)
    else:
        load_state_into(model, state, "full", where=str(path))


def load_pretrained(src: str | os.PathLike, **overrides: Any) -> nn.Module:
    """Load a checkpoint folder / hub repo / URL written by ``save_pretrained``, or a card name."""
    if isinstance(src, str) and find_card(src) is not None and not Path(src).exists():
        return create_model(src, pretrained=True, **overrides)
    return from_pretrained(src, **overrides)


_DEFAULT_INTERP = "bicubic"


def preprocessing_of(model_or_src: nn.Module | str | os.PathLike) -> dict[str, Any]:
    """The preprocessing a model was trained with (from the model or from a checkpoint's config)."""
    if isinstance(model_or_src, nn.Module):
        cfg = getattr(getattr(model_or_src, "module", model_or_src), "pretrained_cfg", None)
        where = type(model_or_src).__name__
    else:
        cfg = read_config(model_or_src).get("preprocessing")
        where = os.fspath(model_or_src)
    if not cfg or "input_size" not in cfg or "mean" not in cfg or "std" not in cfg:
        raise VisionZooError(f"{where} records no image preprocessing (input_size, mean, std); refusing to guess "
                             "a default. Image reconstructors (RAM) take raw measurements instead.")
    return dict(cfg)


def create_transforms(model_or_src: nn.Module | str | os.PathLike, training: bool = False):
    """The exact torchvision (v2) preprocessing of a model or checkpoint; accepts PIL or tensors.

    Eval: resize the short side to ``size / crop_pct``, centre-crop ``size``, normalise.
    Training: random resized crop + horizontal flip, normalise.
    """
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms import v2 as T

    cfg = preprocessing_of(model_or_src)
    _, h, w = cfg["input_size"]
    interp = InterpolationMode(cfg.get("interpolation", _DEFAULT_INTERP))
    crop_pct = float(cfg.get("crop_pct", 1.0))
    to_float = [T.ToImage(), T.ToDtype(torch.float32, scale=True)]
    norm = T.Normalize(mean=list(cfg["mean"]), std=list(cfg["std"]))
    if training:
        scale = tuple(cfg.get("train_scale", (0.5, 1.0)))
        return T.Compose(to_float + [T.RandomResizedCrop((h, w), scale=scale, interpolation=interp, antialias=True),
                                     T.RandomHorizontalFlip(), norm])
    resize = (int(h / crop_pct), int(w / crop_pct)) if h != w else int(h / crop_pct)
    return T.Compose(to_float + [T.Resize(resize, interpolation=interp, antialias=True),
                                 T.CenterCrop((h, w)), norm])


__all__ = ["create_model", "load_pretrained", "create_transforms", "preprocessing_of", "WEIGHTS_NAME"]
