"""Dataset registry: ``build_dataset(name, root=..., split=..., transform=...)``.

Builders are registered with ``@register_dataset("name")`` and have the signature
``fn(root: str | None, split: str, transform: Callable | None, **kwargs) -> torch.utils.data.Dataset``.

Conventions every builder follows:
* an item is ``(image, label)``; ``image`` is whatever ``transform`` returns (a float tensor
  ``[C, H, W]`` in ``[0, 1]`` when ``transform`` is None);
* the dataset has ``classes: list[str]`` (human-readable class names, usable in prompts);
* a wrong folder layout raises :class:`visionzoo.errors.DatasetLayoutError` naming what was
  expected and what was found.
"""

from __future__ import annotations

from collections.abc import Callable

from torch.utils.data import Dataset

from ..errors import unknown_name

DatasetFn = Callable[..., Dataset]
_DATASETS: dict[str, DatasetFn] = {}


def register_dataset(name: str):
    """Register a dataset builder under ``name``."""

    def wrap(fn: DatasetFn) -> DatasetFn:
        if name in _DATASETS:
            raise ValueError(f"dataset {name!r} is registered twice")
        _DATASETS[name] = fn
        return fn

    return wrap


def _ensure_loaded() -> None:
    from . import builders  # noqa: F401  (runs the @register_dataset decorators)


def list_datasets() -> list[str]:
    """Sorted names of the registered datasets."""
    _ensure_loaded()
    return sorted(_DATASETS)


def build_dataset(name: str, root: str | None = None, split: str = "train",
                  transform: Callable | None = None, **kwargs) -> Dataset:
    """Build dataset ``name`` (see :func:`list_datasets`)."""
    _ensure_loaded()
    if name not in _DATASETS:
        raise unknown_name("dataset", name, _DATASETS, hint="See visionzoo.data.list_datasets().")
    return _DATASETS[name](root=root, split=split, transform=transform, **kwargs)
