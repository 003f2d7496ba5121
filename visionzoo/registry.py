"""Architecture registry (timm style) and model-card lookup.

Architectures are registered by decorated functions. Two kinds exist:

* plain names: ``@register_model`` on ``def ram_tiny(**kwargs) -> nn.Module``;
* families over timm backbones: ``@register_family("ivpt", default_backbones=[...])`` on
  ``def ivpt(backbone: str, **kwargs)``; then ``ivpt_<any timm model name>`` is a valid
  architecture (``ivpt_vit_small_patch16_224``), and ``list_models`` shows the default ones.

Published instances (an architecture plus weights) are model cards: ``models/*.yaml``
(see :mod:`visionzoo.cards`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass, field

from torch import nn

from .errors import unknown_name

ModelFn = Callable[..., nn.Module]


@dataclass
class _Family:
    prefix: str
    fn: ModelFn
    default_backbones: list[str] = field(default_factory=list)
    backbone_check: Callable[[str], bool] | None = None


_MODELS: dict[str, ModelFn] = {}
_FAMILIES: dict[str, _Family] = {}


def register_model(fn: ModelFn | None = None, *, name: str | None = None):
    """Register ``fn`` under ``name`` (default: the function's name)."""

    def wrap(f: ModelFn) -> ModelFn:
        key = name or f.__name__
        if key in _MODELS:
            raise ValueError(f"model {key!r} is registered twice")
        _MODELS[key] = f
        return f

    return wrap(fn) if fn is not None else wrap


def register_family(prefix: str, default_backbones: list[str] | None = None,
                    backbone_check: Callable[[str], bool] | None = None):
    """Register ``fn(backbone, **kwargs)`` as the family ``<prefix>_<backbone>``."""

    def wrap(f: ModelFn) -> ModelFn:
        if prefix in _FAMILIES:
            raise ValueError(f"model family {prefix!r} is registered twice")
        _FAMILIES[prefix] = _Family(prefix, f, list(default_backbones or []), backbone_check)
        return f

    return wrap


def _ensure_loaded() -> None:
    # Importing the methods package runs every @register_* decorator exactly once.
    from . import methods  # noqa: F401


def _split_family(name: str) -> tuple[_Family, str] | None:
    if "." in name:  # "arch.tag" names a published instance (a model card), never an architecture
        return None
    # Longest prefix first so "vpt_deep" wins over a hypothetical "vpt".
    for prefix in sorted(_FAMILIES, key=len, reverse=True):
        if name.startswith(prefix + "_") and len(name) > len(prefix) + 1:
            return _FAMILIES[prefix], name[len(prefix) + 1:]
    return None


def list_models(pattern: str = "*") -> list[str]:
    """Sorted architecture names matching a shell-style ``pattern`` (e.g. ``"ivpt*"``)."""
    _ensure_loaded()
    names = set(_MODELS)
    for fam in _FAMILIES.values():
        names.update(f"{fam.prefix}_{b}" for b in fam.default_backbones)
    return sorted(n for n in names if fnmatch.fnmatch(n, pattern))


def is_model(name: str) -> bool:
    """True if ``name`` is a registered architecture (family members included)."""
    _ensure_loaded()
    if name in _MODELS:
        return True
    hit = _split_family(name)
    return hit is not None and (hit[0].backbone_check is None or hit[0].backbone_check(hit[1]))


def model_entrypoint(name: str) -> ModelFn:
    """The function that builds architecture ``name``; unknown names list close matches."""
    _ensure_loaded()
    if name in _MODELS:
        return _MODELS[name]
    hit = _split_family(name)
    if hit is not None:
        fam, backbone = hit
        if fam.backbone_check is None or fam.backbone_check(backbone):
            def build(**kwargs):
                return fam.fn(backbone=backbone, **kwargs)
            build.__name__ = name
            return build
        raise unknown_name(
            f"backbone for the {fam.prefix}_* family", backbone,
            _timm_names_like(backbone),
            hint=f"'{fam.prefix}_<backbone>' takes any timm model name (timm.list_models()).")
    from .cards import list_pretrained
    raise unknown_name("model", name, list(list_models()) + list_pretrained(),
                       hint="See visionzoo.list_models() and visionzoo.list_pretrained().")


def _timm_names_like(name: str) -> list[str]:
    import timm
    return timm.list_models()
