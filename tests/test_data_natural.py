"""Natural images read from scikit-image and scikit-learn (installed files only)."""

from __future__ import annotations

import pytest
import torch

from visionzoo.data import build_dataset
from visionzoo.data.natural import NATURAL_EVAL, NATURAL_TRAIN, NaturalImages, load_natural_image


def test_splits_are_the_documented_fixed_lists():
    assert NATURAL_TRAIN == ("astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field", "brick", "grass",
                             "gravel", "motorcycle_left", "china")
    assert NATURAL_EVAL == ("camera", "retina", "coins", "moon", "flower")
    assert not set(NATURAL_TRAIN) & set(NATURAL_EVAL)


@pytest.mark.parametrize("name", NATURAL_TRAIN + NATURAL_EVAL)
def test_every_image_reads_offline_from_the_installed_packages(name):
    img = load_natural_image(name)
    assert img.dtype == torch.uint8 and img.shape[0] in (1, 3) and min(img.shape[1:]) >= 256
    assert int(img.max()) - int(img.min()) > 100  # a real picture, not a placeholder


def test_grey_and_colour_modes_and_labels():
    colour = build_dataset("natural", split="train", crop_size=64)
    grey = build_dataset("natural-train", grey=True, crop_size=64)
    assert len(colour) == len(NATURAL_TRAIN) and colour.classes == list(NATURAL_TRAIN)
    img, label = colour[5]  # brick is grey: repeated to three channels
    assert img.shape == (3, 64, 64) and label == 5 and torch.equal(img[0], img[2])
    g, _ = grey[0]
    assert g.shape == (1, 64, 64) and 0.0 <= float(g.min()) and float(g.max()) <= 1.0
    ev = build_dataset("natural", split="eval")
    assert ev.classes == list(NATURAL_EVAL) and build_dataset("natural-eval").classes == list(NATURAL_EVAL)
    with pytest.raises(ValueError):
        build_dataset("natural", split="holdout")


def test_centre_crop_resize_and_seeded_random_crops():
    full = NaturalImages(("astronaut",))[0][0]
    centre = NaturalImages(("astronaut",), crop_size=100)[0][0]
    assert torch.equal(centre, full[:, 206:306, 206:306])
    small = NaturalImages(("chelsea",), resize=150)[0][0]
    assert min(small.shape[1:]) == 150 and small.shape[2] == round(451 * 150 / 300)
    a = NaturalImages(("coffee",), crop_size=48, crop="random", crops_per_image=4, seed=3)
    b = NaturalImages(("coffee",), crop_size=48, crop="random", crops_per_image=4, seed=3)
    assert len(a) == 4 and all(torch.equal(a[i][0], b[i][0]) for i in range(4))
    assert not torch.equal(a[0][0], a[1][0])  # different crops of the same image
    with pytest.raises(ValueError):
        NaturalImages(("coins",), crop_size=1000)
    with pytest.raises(ValueError):
        load_natural_image("horse")  # bundled, but not one of the project's images
