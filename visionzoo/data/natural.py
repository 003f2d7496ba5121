"""Natural images that ship inside scikit-image and scikit-learn (no download), for restoration.

Two fixed splits; nothing else from those packages goes into any training run of the project:

* ``natural-train``: astronaut, chelsea, coffee, rocket, hubble_deep_field, brick, grass, gravel,
  motorcycle_left (scikit-image) and china (scikit-learn);
* ``natural-eval``: camera, retina, coins, moon (scikit-image) and flower (scikit-learn).

Every file is read from the installed packages: ``skimage.data``'s bundled files (motorcycle_left
is the left view of ``skimage.data.stereo_motorcycle()``, bundled too) and
``sklearn.datasets.load_sample_image``. Grey images (brick, grass, gravel, camera, coins, moon) are
repeated to three channels in colour mode; colour images are converted to luma in grey mode.

Items are ``(image, index)``: the "label" is the image's position in its split and ``classes``
holds the image names.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset
from torchvision.transforms.v2 import functional as TF

from .registry import register_dataset

NATURAL_TRAIN: tuple[str, ...] = ("astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field", "brick",
                                  "grass", "gravel", "motorcycle_left", "china")
NATURAL_EVAL: tuple[str, ...] = ("camera", "retina", "coins", "moon", "flower")
SKLEARN_IMAGES = {"china": "china.jpg", "flower": "flower.jpg"}
SPLITS = {"train": NATURAL_TRAIN, "eval": NATURAL_EVAL, "val": NATURAL_EVAL, "test": NATURAL_EVAL}


@cache
def load_natural_image(name: str) -> torch.Tensor:
    """The bundled image ``name`` as uint8 ``[C, H, W]`` (C = 1 for grey images, 3 for colour)."""
    try:
        if name in SKLEARN_IMAGES:
            from sklearn.datasets import load_sample_image

            arr = load_sample_image(SKLEARN_IMAGES[name])
        elif name == "motorcycle_left":
            import skimage.data

            arr = skimage.data.stereo_motorcycle()[0]
        elif name in NATURAL_TRAIN + NATURAL_EVAL:
            import skimage.data

            arr = getattr(skimage.data, name)()
        else:
            raise KeyError(name)
    except KeyError:
        raise ValueError(f"{name!r} is not one of the project's natural images: "
                         f"{NATURAL_TRAIN + NATURAL_EVAL}") from None
    except Exception as e:  # e.g. a scikit-image build that fetches the file with pooch
        raise RuntimeError(f"could not read the bundled image {name!r} from the installed package "
                           f"({type(e).__name__}: {e}); no download is attempted") from e
    t = torch.from_numpy(arr.copy())
    return t[None] if t.ndim == 2 else t.permute(2, 0, 1)[:3].contiguous()


def _to_mode(img: torch.Tensor, grey: bool) -> torch.Tensor:
    if grey:
        return TF.rgb_to_grayscale(img) if img.shape[0] == 3 else img
    return img.expand(3, -1, -1) if img.shape[0] == 1 else img


class NaturalImages(Dataset):
    """Bundled natural images, as float ``[C, H, W]`` in [0, 1].

    Args:
        names: the images (default: the ``natural-train`` split).
        grey: one luma channel instead of RGB.
        resize: if given, first resize so the *short* side has this many pixels (antialiased).
        crop_size: if given, crop ``crop_size x crop_size`` (int) or ``(h, w)``.
        crop: ``"center"`` or ``"random"``.
        crops_per_image: the dataset length is ``len(names) * crops_per_image`` (item ``i`` is
            image ``i % len(names)``), handy for random-crop training.
        seed: random crops are fixed per item when given (reproducible evaluation), drawn from
            torch's global generator at every access otherwise (fresh crops each epoch).
        transform: applied to the float image.
    """

    def __init__(self, names: tuple[str, ...] | list[str] = NATURAL_TRAIN, grey: bool = False,
                 resize: int | None = None, crop_size: int | tuple[int, int] | None = None,
                 crop: str = "center", crops_per_image: int = 1, seed: int | None = None,
                 transform: Callable | None = None):
        if crop not in ("center", "random"):
            raise ValueError(f"crop must be 'center' or 'random', got {crop!r}")
        self.classes = list(names)
        self.grey, self.resize, self.crop, self.seed = grey, resize, crop, seed
        self.crop_size = (crop_size, crop_size) if isinstance(crop_size, int) else crop_size
        self.crops_per_image, self.transform = int(crops_per_image), transform
        self.images = [self._prepare(load_natural_image(n)) for n in self.classes]
        self.targets = [i % len(self.classes) for i in range(len(self))]

    def _prepare(self, img: torch.Tensor) -> torch.Tensor:
        img = _to_mode(img, self.grey).float().div(255.0)
        if self.resize:
            h, w = img.shape[-2:]
            s = self.resize / min(h, w)
            size = (max(1, round(h * s)), max(1, round(w * s)))
            img = F.interpolate(img[None], size=size, mode="bicubic", antialias=True, align_corners=False)[0]
            img = img.clamp(0.0, 1.0)
        if self.crop_size:
            h, w = img.shape[-2:]
            ch, cw = self.crop_size
            if ch > h or cw > w:
                raise ValueError(f"crop {self.crop_size} is larger than an image of {h}x{w}; use resize")
        return img.contiguous()

    def __len__(self) -> int:
        return len(self.classes) * self.crops_per_image

    def __getitem__(self, i: int):
        if not 0 <= i < len(self):
            raise IndexError(i)
        k = i % len(self.classes)
        img = self.images[k]
        if self.crop_size:
            h, w = img.shape[-2:]
            ch, cw = self.crop_size
            if self.crop == "center":
                top, left = (h - ch) // 2, (w - cw) // 2
            else:
                g = torch.Generator().manual_seed(self.seed * 1_000_003 + i) if self.seed is not None else None
                top = int(torch.randint(0, h - ch + 1, (1,), generator=g))
                left = int(torch.randint(0, w - cw + 1, (1,), generator=g))
            img = img[:, top:top + ch, left:left + cw]
        img = img.clone()
        if self.transform is not None:
            img = self.transform(img)
        return img, k


def _names(split: str) -> tuple[str, ...]:
    if split not in SPLITS:
        raise ValueError(f"natural split must be one of {sorted(SPLITS)}, got {split!r}")
    return SPLITS[split]


@register_dataset("natural")
def build_natural(root=None, split: str = "train", transform: Callable | None = None, **kwargs) -> NaturalImages:
    """Natural images of ``split`` (``"train"`` or ``"eval"``; ``"val"``/``"test"`` mean eval)."""
    return NaturalImages(_names(split), transform=transform, **kwargs)


@register_dataset("natural-train")
def build_natural_train(root=None, split: str = "train", transform: Callable | None = None,
                        **kwargs) -> NaturalImages:
    """The ``natural-train`` images (``split`` is ignored: the split is in the name)."""
    return NaturalImages(NATURAL_TRAIN, transform=transform, **kwargs)


@register_dataset("natural-eval")
def build_natural_eval(root=None, split: str = "eval", transform: Callable | None = None,
                       **kwargs) -> NaturalImages:
    """The ``natural-eval`` images (``split`` is ignored: the split is in the name)."""
    return NaturalImages(NATURAL_EVAL, transform=transform, **kwargs)
