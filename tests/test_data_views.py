"""Test-time views: shapes, the original view, crops, flips, AugMix and seeding."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from visionzoo.data.views import TTAViews, augmix, sample_crops


def image(h: int = 60, w: int = 80) -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.linspace(0, 1, h), torch.linspace(0, 1, w), indexing="ij")
    return torch.stack([xx, yy, xx * yy])  # [3, h, w], every pixel distinct


def test_shapes_order_and_the_original_view():
    x = torch.stack([image(), image().flip(-1)])
    out = TTAViews(n_views=8, size=32, seed=0)(x)
    assert out.shape == (16, 3, 32, 32)
    short = F.interpolate(x, size=(32, round(80 * 32 / 60)), mode="bilinear", antialias=True, align_corners=False)
    left = (short.shape[-1] - 32) // 2
    centre = short[..., left:left + 32]
    assert torch.allclose(out[0], centre[0]) and torch.allclose(out[8], centre[1])
    assert TTAViews(n_views=1, size=32)(image()).shape == (1, 3, 32, 32)


def test_full_crops_are_the_image_or_its_mirror():
    x = image(32, 32)
    out = TTAViews(n_views=32, size=32, scale=(1.0, 1.0), ratio=(1.0, 1.0), seed=1)(x)[1:]
    same = (out - x).abs().amax((1, 2, 3)) < 1e-5
    mirrored = (out - x.flip(-1)).abs().amax((1, 2, 3)) < 1e-5
    assert bool((same | mirrored).all()) and same.any() and mirrored.any()
    unflipped = TTAViews(n_views=8, size=32, scale=(1.0, 1.0), ratio=(1.0, 1.0), flip=False, seed=1)(x)[1:]
    assert torch.allclose(unflipped, x.expand_as(unflipped), atol=1e-5)


def test_crops_follow_torchvision_sampling_rules():
    g = torch.Generator().manual_seed(0)
    boxes = sample_crops(2000, 60, 80, (0.08, 1.0), (3 / 4, 4 / 3), g)
    x0, y0, w, h = boxes.unbind(1)
    assert bool(((x0 >= 0) & (y0 >= 0) & (x0 + w <= 80) & (y0 + h <= 60) & (w > 0) & (h > 0)).all())
    frac = (w * h).float() / (60 * 80)
    assert frac.min() > 0.06 and frac.max() <= 1.0 and frac.std() > 0.1


def test_seeded_views_repeat_and_differ_across_seeds():
    x = image()
    a = TTAViews(n_views=6, size=24, seed=3, augmix=True)(x)
    b = TTAViews(n_views=6, size=24, seed=3, augmix=True)(x)
    c = TTAViews(n_views=6, size=24, seed=4, augmix=True)(x)
    assert torch.equal(a, b) and not torch.equal(a[1:], c[1:]) and torch.equal(a[0], c[0])


def test_augmix_changes_views_but_keeps_them_in_range_and_normalise():
    x = torch.rand(12, 3, 24, 24)
    y = augmix(x, torch.Generator().manual_seed(0), severity=3)
    assert y.shape == x.shape and float(y.min()) >= 0 and float(y.max()) <= 1
    assert (y - x).abs().mean() > 1e-3
    mean, std = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)
    plain = TTAViews(n_views=3, size=16, seed=0)(image())
    normed = TTAViews(n_views=3, size=16, seed=0, mean=mean, std=std)(image())
    assert torch.allclose(normed, (plain - 0.5) / 0.25)
