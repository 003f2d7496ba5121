"""Multi-crop augmentation for self-distillation: 2 global crops + ``n`` smaller local crops."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


class MultiCrop:
    """Image ``[3, H, W]`` float in [0, 1] (or PIL) -> list of normalised views.

    Global crops: ``global_size`` px from ``global_scale`` of the area; local crops: ``local_size``
    px from ``local_scale``. All get a flip and colour jitter / grayscale; global crops also
    blur (first view always, second rarely) and solarisation (second view only), as DINO.
    """

    def __init__(self, mean: Sequence[float], std: Sequence[float], global_size: int = 64, local_size: int = 32,
                 n_local: int = 6, global_scale: tuple[float, float] = (0.35, 1.0),
                 local_scale: tuple[float, float] = (0.1, 0.35)):
        from torchvision.transforms import v2 as T

        base = [T.RandomHorizontalFlip(),
                T.RandomApply([T.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=0.8), T.RandomGrayscale(0.2)]
        norm = T.Normalize(list(mean), list(std))
        to_float = [T.ToImage(), T.ToDtype(torch.float32, scale=True)]
        blur = T.GaussianBlur(5, sigma=(0.1, 1.5))

        def crop(size: int, scale: tuple[float, float]):
            return T.RandomResizedCrop(size, scale=scale, ratio=(0.75, 1.33), antialias=True)

        self.global1 = T.Compose([*to_float, crop(global_size, global_scale), *base, T.RandomApply([blur], p=0.8),
                                  norm])
        self.global2 = T.Compose([*to_float, crop(global_size, global_scale), *base, T.RandomApply([blur], p=0.1),
                                  T.RandomSolarize(0.5, p=0.2), norm])
        self.local = T.Compose([*to_float, crop(local_size, local_scale), *base, T.RandomApply([blur], p=0.5), norm])
        self.n_local = n_local

    def __call__(self, image) -> list[Tensor]:
        return [self.global1(image), self.global2(image), *(self.local(image) for _ in range(self.n_local))]
