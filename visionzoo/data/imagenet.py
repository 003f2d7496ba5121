"""ImageNet and its distribution-shift variants, read from the user's copies.

=================  ==========================================================  ============
dataset            expected layout under ``root``                               labels
=================  ==========================================================  ============
imagenet           ``val/<wnid>/*.JPEG`` (or ``train/``), or Kaggle's flat      1000
                   ``val/*.JPEG`` + ``LOC_val_solution.csv``
imagenet-v2        ``imagenetv2-<variant>-format-val/<0..999>/*.jpeg``          1000
                   (or those integer folders directly under ``root``)
imagenet-sketch    ``sketch/<wnid>/*.JPEG`` (or wnid folders under ``root``)    1000
imagenet-a         ``imagenet-a/<wnid>/*.jpg`` (or wnid folders under ``root``)  200
imagenet-r         ``imagenet-r/<wnid>/*.jpg`` (or wnid folders under ``root``)  200
imagenet-r-cl      as imagenet-r (protocol ``"l2p"``), or ``train/<wnid>`` and     200
                   ``test/<wnid>`` (protocol ``"pilot"``, LAMDA-PILOT's split)
=================  ==========================================================  ============

Labels follow the sorted wnid order of the class list (1000 classes, or the 200 of the A/R subset);
``classes`` are CLIP's prompt names; A/R datasets also have ``imagenet_indices`` (positions of
their 200 classes among the 1000, to slice 1000-way logits). Missing class folders are allowed
(labels stay the full list's) and listed in ``missing_classes``; unknown folders are a layout error.
The OOD sets are test-only: ``split`` must be ``"test"``, ``"val"`` or ``"all"``.
"""

from __future__ import annotations

import csv
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from .folders import ImageList, is_image, layout_error, scan_class_folders
from .imagenet_classes import imagenet_class_names, imagenet_wnids, subset_indices, subset_wnids
from .registry import register_dataset

TEST_SPLITS = ("test", "val", "all")
V2_VARIANTS = ("matched-frequency", "threshold0.7", "top-images")


def _subdir(root: Path, candidates: tuple[str, ...]) -> Path:
    """The first of ``root/<candidate>`` that is a folder, else ``root``."""
    for c in candidates:
        if (root / c).is_dir():
            return root / c
    return root


def _check_test_split(dataset: str, split: str) -> None:
    if split not in TEST_SPLITS:
        raise ValueError(f"{dataset} is a test-only set: use split='test' (got {split!r})"
                         + ("; for a train/test split use 'imagenet-r-cl'" if dataset == "imagenet-r" else ""))


def wnid_folders(dataset: str, top: Path, wnids: list[str], names: list[str],
                 transform: Callable | None, expected: str) -> ImageList:
    """Images in ``top/<wnid>/``, labelled by position in ``wnids``."""
    if not top.is_dir():
        raise layout_error(dataset, expected, top)
    dirs = {d.name for d in top.iterdir() if d.is_dir() and not d.name.startswith(".")}
    unknown = sorted(dirs - set(wnids))
    if unknown or not dirs:
        what = f"folders that are not wnids of this dataset ({unknown[:5]})" if unknown else "no wnid folders"
        raise layout_error(dataset, f"{expected} ({what})", top)
    samples = scan_class_folders(top, {w: i for i, w in enumerate(wnids) if w in dirs})
    if not samples:
        raise layout_error(dataset, f"{expected} with image files inside the wnid folders", top)
    ds = ImageList(samples, names, transform, folders=list(wnids))
    ds.missing_classes = [w for w in wnids if w not in dirs]
    if ds.missing_classes:
        warnings.warn(f"{dataset}: {len(ds.missing_classes)} of {len(wnids)} class folders are missing in {top}",
                      stacklevel=3)
    return ds


def _kaggle_val(dataset: str, top: Path, csv_path: Path, transform: Callable | None) -> ImageList:
    wnids = imagenet_wnids()
    label = {w: i for i, w in enumerate(wnids)}
    samples = []
    with csv_path.open() as f:
        for row in csv.DictReader(f):
            wnid = row["PredictionString"].split()[0]
            path = top / f"{row['ImageId']}.JPEG"
            if path.is_file():
                samples.append((str(path), label[wnid]))
    if not samples:
        raise layout_error(dataset, f"the images named in {csv_path.name} (<ImageId>.JPEG) in {top}", top)
    return ImageList(sorted(samples), imagenet_class_names(), transform, folders=wnids)


@register_dataset("imagenet")
def build_imagenet(root: str | None = None, split: str = "val", transform: Callable | None = None,
                   **kwargs) -> ImageList:
    """ImageNet-1k ``split`` (``"val"``, ``"test"`` = val, or ``"train"``)."""
    if root is None:
        raise ValueError("imagenet needs root=<folder holding val/ (and train/)>")
    base = Path(root)
    sub = "train" if split == "train" else "val"
    top = base / sub if (base / sub).is_dir() else base
    expected = f"{sub}/<wnid>/<image>.JPEG under {base} (or {sub}/*.JPEG with LOC_val_solution.csv)"
    flat = top.is_dir() and any(is_image(p) for p in top.iterdir())
    if flat and sub == "val":
        for cand in (base / "LOC_val_solution.csv", top / "LOC_val_solution.csv"):
            if cand.is_file():
                return _kaggle_val("imagenet", top, cand, transform)
        raise layout_error("imagenet", expected + " (flat images but no LOC_val_solution.csv)", base)
    return wnid_folders("imagenet", top, imagenet_wnids(), imagenet_class_names(), transform, expected)


@register_dataset("imagenet-v2")
def build_imagenet_v2(root: str | None = None, split: str = "test", transform: Callable | None = None,
                      variant: str = "matched-frequency", **kwargs) -> ImageList:
    """ImageNetV2 (``variant`` in :data:`V2_VARIANTS`); folders are the integer class indices."""
    _check_test_split("imagenet-v2", split)
    if root is None or variant not in V2_VARIANTS:
        raise ValueError(f"imagenet-v2 needs root= and variant in {V2_VARIANTS}")
    base = Path(root)
    top = _subdir(base, (f"imagenetv2-{variant}-format-val", f"imagenetv2-{variant}"))
    expected = f"imagenetv2-{variant}-format-val/<class index 0..999>/<image>.jpeg under {base}"
    if not top.is_dir():
        raise layout_error("imagenet-v2", expected, base)
    dirs = [d.name for d in top.iterdir() if d.is_dir()]
    bad = [d for d in dirs if not (d.isdigit() and int(d) < 1000)]
    if bad or not dirs:
        raise layout_error("imagenet-v2", expected + (f" (not class indices: {sorted(bad)[:5]})" if bad else ""), top)
    samples = scan_class_folders(top, {d: int(d) for d in dirs})
    if not samples:
        raise layout_error("imagenet-v2", expected + " with image files", top)
    return ImageList(samples, imagenet_class_names(), transform, folders=imagenet_wnids())


@register_dataset("imagenet-sketch")
def build_imagenet_sketch(root: str | None = None, split: str = "test", transform: Callable | None = None,
                          **kwargs) -> ImageList:
    """ImageNet-Sketch (50 sketches for each of the 1000 classes)."""
    _check_test_split("imagenet-sketch", split)
    if root is None:
        raise ValueError("imagenet-sketch needs root=")
    base = Path(root)
    top = _subdir(base, ("sketch", "imagenet-sketch", "ImageNet-Sketch"))
    return wnid_folders("imagenet-sketch", top, imagenet_wnids(), imagenet_class_names(), transform,
                        f"sketch/<wnid>/<image>.JPEG under {base}")


def _subset(name: str, root: str | None, transform: Callable | None) -> ImageList:
    if root is None:
        raise ValueError(f"{name} needs root=")
    base = Path(root)
    top = _subdir(base, (name,))
    wnids = subset_wnids(name)
    all_names = imagenet_class_names()
    idx = subset_indices(name)
    ds = wnid_folders(name, top, wnids, [all_names[i] for i in idx], transform,
                      f"{name}/<wnid>/<image>.jpg under {base} (200 wnid folders)")
    ds.imagenet_indices = torch.tensor(idx)
    return ds


@register_dataset("imagenet-a")
def build_imagenet_a(root: str | None = None, split: str = "test", transform: Callable | None = None,
                     **kwargs) -> ImageList:
    """ImageNet-A: 200 classes (labels 0..199 in sorted wnid order; ``imagenet_indices`` [200])."""
    _check_test_split("imagenet-a", split)
    return _subset("imagenet-a", root, transform)


@register_dataset("imagenet-r")
def build_imagenet_r(root: str | None = None, split: str = "test", transform: Callable | None = None,
                     **kwargs) -> ImageList:
    """ImageNet-R: 200 classes (labels 0..199 in sorted wnid order; ``imagenet_indices`` [200])."""
    _check_test_split("imagenet-r", split)
    return _subset("imagenet-r", root, transform)


@register_dataset("imagenet-r-cl")
def build_imagenet_r_cl(root: str | None = None, split: str = "train", transform: Callable | None = None,
                        protocol: str = "l2p", train_fraction: float = 0.8, split_seed: int = 0,
                        **kwargs) -> ImageList:
    """ImageNet-R with a train/test split for class-incremental learning.

    ``protocol="l2p"``: the whole set, split per class: the sorted files of each class are shuffled
    with ``split_seed`` and the first ``train_fraction`` go to train (our fixed version of the
    random 80/20 split of L2P/CODA-Prompt). ``protocol="pilot"``: LAMDA-PILOT's pre-split
    ``train/<wnid>`` and ``test/<wnid>`` folders. Report which one a number uses.
    """
    if split not in ("train", "test"):
        raise ValueError(f"imagenet-r-cl split must be 'train' or 'test', got {split!r}")
    if root is None:
        raise ValueError("imagenet-r-cl needs root=")
    base = Path(root)
    if protocol == "pilot":
        top = _subdir(base, ("imagenet-r",))
        ds = _subset("imagenet-r", str(top / split), transform)
        ds.protocol = "pilot"
        return ds
    if protocol != "l2p":
        raise ValueError(f"protocol must be 'l2p' or 'pilot', got {protocol!r}")
    full = _subset("imagenet-r", root, transform)
    by_class: dict[int, list[tuple[str, int]]] = {}
    for s in full.samples:
        by_class.setdefault(s[1], []).append(s)
    keep = []
    for label, items in sorted(by_class.items()):
        g = torch.Generator().manual_seed(split_seed * 1000 + label)
        order = torch.randperm(len(items), generator=g).tolist()
        n_train = int(round(train_fraction * len(items)))
        chosen = order[:n_train] if split == "train" else order[n_train:]
        keep.extend(items[i] for i in sorted(chosen))
    ds = ImageList(keep, full.classes, transform, folders=full.folders)
    ds.imagenet_indices, ds.missing_classes, ds.protocol = full.imagenet_indices, full.missing_classes, "l2p"
    return ds
