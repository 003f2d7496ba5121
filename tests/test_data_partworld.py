"""PartWorld: determinism, ground truth, styles, classes, captions, caching and loading."""

from __future__ import annotations

import hashlib

import pytest
import torch
from torch.utils.data import DataLoader
from torchvision.transforms import v2

from visionzoo.data import build_dataset
from visionzoo.data.partworld import PartWorld
from visionzoo.data.partworld_classes import (
    DOWNSTREAM_CLASSES,
    NUM_CLASSES,
    PART_SLOTS,
    PRETRAIN_CLASSES,
    class_table,
)
from visionzoo.data.partworld_styles import SHIFTED_STYLES, SOURCE_STYLE, STYLES

# sha256 of images, keypoints, boxes and part masks of items [0, 37, 101, 159] of
# PartWorld("val", "all", style, image_size=32, images_per_class=1, seed=0). A change here means
# every published PartWorld number changes: only update it on purpose (and say so).
GOLDEN = {
    "clean": "46870ad8bd7159077a22f245e99a88afd357bfb66bc46cf53b0ecc89f58b0868",
    "sketch": "8fdbf13e5d7b1809dd84bd86aeb7b631279121723d5858fe643defedad16eeba",
    "painting": "1f8eeaffe925a771313e608c802a9c3e37b9a4e3991c9ff6dc9745715406ad24",
    "cartoon": "bb312f540e1ae4863c6ce90a869ae544652d77bbc27477b2183cb8d8c45035bd",
    "noisy": "d8821cac75f0599a31cbdaa232e01c5e1ca909e8ac9bfff2622d93b7767f8c73",
    "blurred": "0c8129614b29c1ae204fded095e32acdcc4817df1909ffb513c1eeedc10782a9",
    "colour-shift": "c8ba473959240773ad859ea17bb711ff2d7302b8f9ad96abda1eeec7a1586998",
    "occluded": "bd7c5e4c9a70f8dba2fef9507f920aae3a3efe58c0377829e0a4f30f94c15b17",
}
GOLDEN_ITEMS = [0, 37, 101, 159]
META_KEYS = ("keypoints", "box", "part_masks")


def _digest(batch: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for k in ("image", *META_KEYS):
        h.update(batch[k].contiguous().numpy().tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("style", STYLES)
def test_fixed_sample_bytes_match_the_stored_hash(style):
    ds = PartWorld("val", "all", style=style, image_size=32, images_per_class=1, seed=0)
    assert _digest(ds.generate_batch(GOLDEN_ITEMS)) == GOLDEN[style]


def test_same_seed_same_bytes_other_seed_other_bytes_and_batching_does_not_matter():
    a = PartWorld("train", image_size=48, images_per_class=3, seed=5).generate_batch(range(12))
    b = PartWorld("train", image_size=48, images_per_class=3, seed=5).generate_batch(range(12))
    c = PartWorld("train", image_size=48, images_per_class=3, seed=6).generate_batch(range(12))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["image"], c["image"])
    ds = PartWorld("train", image_size=48, images_per_class=3, seed=5)
    singles = torch.stack([ds.generate_batch([i])["image"][0] for i in (7, 2, 11)])
    assert torch.equal(singles, a["image"][[7, 2, 11]])


def test_splits_and_class_subsets_draw_consistent_instances():
    train = PartWorld("train", "all", image_size=32, images_per_class=2).generate_batch([2 * 70])["image"]
    down = PartWorld("train", "downstream", image_size=32, images_per_class=2).generate_batch([2 * 10])["image"]
    test = PartWorld("test", "all", image_size=32, images_per_class=2).generate_batch([2 * 70])["image"]
    assert torch.equal(train, down)  # world class 70 = downstream class 10, instance 0
    assert not torch.equal(train, test)


def test_keypoints_lie_in_their_visible_part_masks_and_boxes_bound_the_object():
    ds = PartWorld("train", "all", image_size=64, images_per_class=1)
    b = ds.generate_batch(range(0, 160, 3))
    kp, masks = b["keypoints"], b["part_masks"]
    B, P, H, W = masks.shape
    assert P == len(PART_SLOTS) and kp.shape == (B, P, 3)
    vis = kp[..., 2] > 0
    assert vis.float().mean() > 0.9  # parts are visible nearly always in the clean world
    x, y = kp[..., 0].long(), kp[..., 1].long()
    hit = masks[torch.arange(B)[:, None], torch.arange(P)[None], y, x]
    assert bool(hit[vis].all())
    assert not bool((masks.sum((-2, -1)) > 0)[~vis].any())  # invisible means no visible pixel
    assert int(masks.sum(1).max()) <= 1  # visible masks are disjoint
    obj = masks.any(1)
    for i in range(B):
        rows, cols = obj[i].any(1).nonzero(), obj[i].any(0).nonzero()
        assert b["box"][i].tolist() == [cols.min().item(), rows.min().item(), cols.max().item() + 1,
                                        rows.max().item() + 1]


def test_styles_change_pixels_but_not_labels_or_meta():
    clean = PartWorld("val", "downstream", style=SOURCE_STYLE, image_size=32, images_per_class=2)
    ref = clean.generate_batch(range(20))
    for style in SHIFTED_STYLES:
        ds = PartWorld("val", "downstream", style=style, image_size=32, images_per_class=2)
        other = ds.generate_batch(range(20))
        assert torch.equal(other["label"], ref["label"])
        for k in META_KEYS:
            assert torch.equal(other[k], ref[k]), (style, k)
        changed = (other["image"].int() - ref["image"].int()).abs().float().mean()
        assert changed > 3.0, style  # mean absolute change in 0..255 units
    occluded = PartWorld("val", "downstream", style="occluded", image_size=32,
                         images_per_class=2).generate_batch(range(20))
    assert occluded["occluder"].any() and not ref["occluder"].any()


def test_classes_split_names_and_prompts():
    assert NUM_CLASSES >= 160 and len(DOWNSTREAM_CLASSES) >= 100
    assert not set(PRETRAIN_CLASSES) & set(DOWNSTREAM_CLASSES)
    assert set(PRETRAIN_CLASSES) | set(DOWNSTREAM_CLASSES) == set(range(NUM_CLASSES))
    names = class_table().names
    assert len(set(names)) == NUM_CLASSES and all(len(n.split()) == 4 for n in names)
    ds = PartWorld("val", "pretrain", image_size=32, images_per_class=1)
    assert len(ds.classes) == len(PRETRAIN_CLASSES) and ds.classes[0] == names[0]
    assert ds.class_prompts()[3] == f"a photo of a {names[3]}."
    assert ds.class_prompts("itap of a {}.")[0] == f"itap of a {names[0]}."


def test_captions_name_the_class_and_the_style():
    sketch = PartWorld("val", "downstream", style="sketch", image_size=32, images_per_class=2)
    caps = sketch.captions()
    assert len(caps) == len(sketch)
    assert caps[5].startswith("a sketch of a") and sketch.classes[sketch.targets[5]] in caps[5]
    clean = PartWorld("val", "downstream", image_size=32, images_per_class=2)
    assert clean.caption(5).startswith("a photo of") and clean.caption(5)[10:] == caps[5][11:]
    assert len(set(caps)) > len(caps) // 2  # captions also describe per-image draws


@pytest.mark.parametrize("size", [32, 224])
def test_items_are_float_images_with_integer_labels(size):
    ds = PartWorld("test", "downstream", image_size=size, images_per_class=1)
    img, label = ds[13]
    assert img.shape == (3, size, size) and img.dtype == torch.float32
    assert 0.0 <= float(img.min()) and float(img.max()) <= 1.0 and label == 13
    assert len(ds) == 100 and ds.targets[13] == 13


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError):
        PartWorld("train", image_size=16)
    with pytest.raises(ValueError):
        PartWorld("dev")
    with pytest.raises(KeyError):
        PartWorld("train", style="watercolour")
    assert PartWorld("train", style="source").style.name == "clean"


def test_with_meta_follows_a_v2_flip_and_resize():
    tf = v2.Compose([v2.RandomHorizontalFlip(p=1.0), v2.Resize(32)])
    ds = PartWorld("val", "downstream", image_size=64, images_per_class=1, with_meta=True, transform=tf)
    img, label, meta = ds[4]
    assert img.shape == (3, 32, 32) and meta["part_masks"].shape == (5, 32, 32)
    raw = PartWorld("val", "downstream", image_size=64, images_per_class=1, with_meta=True)[4][2]
    # torchvision flips keypoints as x -> W - 1 - x and then scales by 0.5.
    expected_x = (63 - raw["keypoints"][:, 0]) * 0.5
    assert torch.allclose(meta["keypoints"][:, 0], expected_x)
    assert torch.equal(meta["keypoints"][:, 2], raw["keypoints"][:, 2])
    assert torch.allclose(meta["box"], torch.tensor([64 - raw["box"][2], raw["box"][1], 64 - raw["box"][0],
                                                     raw["box"][3]]) * 0.5)


def test_dataloader_fetches_batches_in_one_render_and_in_memory_matches():
    ds = PartWorld("val", "downstream", image_size=32, images_per_class=2, with_meta=True)
    images, labels, meta = next(iter(DataLoader(ds, batch_size=8, shuffle=False)))
    assert images.shape == (8, 3, 32, 32) and labels.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert meta["keypoints"].shape == (8, 5, 3) and meta["part_masks"].dtype == torch.bool
    mem = PartWorld("val", "downstream", image_size=32, images_per_class=2, in_memory=True)
    assert torch.equal(mem[5][0], images[5])
    assert int(mem._filled.sum()) == 64  # the chunk around item 5 was rendered at once
    assert torch.equal(mem[5][0], images[5])


def test_registry_and_disk_cache_roundtrip(tmp_path):
    kwargs = dict(classes=[60, 61, 62], image_size=32, images_per_class=2, with_meta=True)
    live = build_dataset("partworld", split="val", **kwargs)
    cached = build_dataset("partworld", split="val", cache_dir=str(tmp_path), **kwargs)
    assert len(cached) == len(live) == 6 and cached.classes == live.classes
    for i in (0, 5):
        a, b = live[i], cached[i]
        assert torch.equal(a[0], b[0]) and a[1] == b[1]
        for k in META_KEYS:
            assert torch.equal(a[2][k], b[2][k]), k
    assert cached.caption(3) == live.caption(3)
    folders = sorted(p.name for p in next(tmp_path.iterdir()).joinpath("images").iterdir())
    assert folders[0].startswith("000_") and len(folders) == 3
    # The export is an ImageFolder the generic loader reads, in the same label order.
    generic = build_dataset("imagefolder", root=str(next(tmp_path.iterdir()) / "images"), split=None)
    assert generic.targets == cached.targets
    again = build_dataset("partworld", split="val", cache_dir=str(tmp_path), **kwargs)
    assert again.root == cached.root  # found, not rewritten


def test_the_dataset_card_lists_the_generated_classes():
    from visionzoo.data.cards import load_card

    card = load_card("partworld")
    names = class_table().names
    assert card["classes"]["pretrain"] == [names[i] for i in PRETRAIN_CLASSES], \
        "regenerate with: python -m visionzoo.data.partworld_cli classes"
    assert card["classes"]["downstream"] == [names[i] for i in DOWNSTREAM_CLASSES]
    assert card["styles"]["shifted"] == list(SHIFTED_STYLES) and card["styles"]["source"] == SOURCE_STYLE
    assert card["parts"] == list(PART_SLOTS)
