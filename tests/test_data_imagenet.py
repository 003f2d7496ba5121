"""ImageFolder and the ImageNet family on tiny fake copies with the real layouts."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from visionzoo.data import build_dataset
from visionzoo.data.folders import write_image
from visionzoo.data.imagenet_classes import (
    derived_names,
    derived_subset,
    derived_wnids,
    imagenet_class_names,
    imagenet_wnids,
    subset_indices,
    subset_wnids,
)
from visionzoo.errors import DatasetLayoutError

WNIDS = derived_wnids()
A_WNIDS = derived_subset("imagenet-a")
R_WNIDS = derived_subset("imagenet-r")


def write_images(folder: Path, n: int, value: int = 0, ext: str = "JPEG", size: tuple[int, int] = (12, 16)) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        img = torch.full((3, *size), (value * 37 + i * 11) % 256, dtype=torch.uint8)
        write_image(img, folder / f"img_{i:03d}.{ext}")


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def test_cards_hold_the_class_lists_of_the_installed_packages():
    assert imagenet_wnids() == WNIDS and len(WNIDS) == 1000 and WNIDS == sorted(WNIDS)
    assert imagenet_class_names() == derived_names() and imagenet_class_names()[:2] == ["tench", "goldfish"]
    for name in ("imagenet-a", "imagenet-r"):
        wn = subset_wnids(name)
        assert wn == derived_subset(name) and len(wn) == 200 and set(wn) <= set(WNIDS)
        assert [WNIDS[i] for i in subset_indices(name)] == wn
    assert A_WNIDS != R_WNIDS


def test_imagefolder_reads_classes_names_and_splits(tmp_path):
    for c, n in (("b_cat", 2), ("a_dog", 3)):
        write_images(tmp_path / "train" / c, n, ext="png")
    ds = build_dataset("imagefolder", root=str(tmp_path), split="train")
    assert ds.classes == ["a dog", "b cat"] and ds.targets == [0, 0, 0, 1, 1]
    img, label = ds[4]
    assert img.shape == (3, 12, 16) and img.dtype == torch.float32 and label == 1
    (tmp_path / "train" / "classes.txt").write_text("puppy\nkitten\n")
    assert build_dataset("imagefolder", root=str(tmp_path)).classes == ["puppy", "kitten"]
    fixed = build_dataset("imagefolder", root=str(tmp_path), classes=["b_cat", "a_dog"], class_names=["c", "d"])
    assert fixed.targets == [0, 0, 1, 1, 1] and fixed.classes == ["c", "d"]


def test_wrong_layouts_say_what_was_expected_and_what_was_found(tmp_path):
    write_images(tmp_path / "loose", 2)  # images but no class folders
    with pytest.raises(DatasetLayoutError, match=r"expected .*class.*found: .*img_000\.JPEG"):
        build_dataset("imagefolder", root=str(tmp_path / "loose"))
    with pytest.raises(DatasetLayoutError, match="does not exist"):
        build_dataset("imagenet-a", root=str(tmp_path / "nowhere"), split="test")
    write_images(tmp_path / "ina" / "imagenet-a" / "cats", 1)  # not a wnid
    with pytest.raises(DatasetLayoutError, match=r"not wnids.*cats"):
        build_dataset("imagenet-a", root=str(tmp_path / "ina"), split="test")
    write_images(tmp_path / "v2" / "imagenetv2-matched-frequency-format-val" / WNIDS[0], 1)
    with pytest.raises(DatasetLayoutError, match="not class indices"):
        build_dataset("imagenet-v2", root=str(tmp_path / "v2"), split="test")
    with pytest.raises(ValueError, match="test-only"):
        build_dataset("imagenet-r", root=str(tmp_path), split="train")


def test_imagenet_val_in_wnid_folders_and_kaggle_layout(tmp_path):
    for k in (0, 1, 999):
        write_images(tmp_path / "in" / "val" / WNIDS[k], 2, value=k)
    with pytest.warns(UserWarning, match="997 of 1000 class folders are missing"):
        ds = build_dataset("imagenet", root=str(tmp_path / "in"), split="val")
    assert ds.targets == [0, 0, 1, 1, 999, 999] and len(ds.classes) == 1000
    assert ds.classes[999] == derived_names()[999] and len(ds.missing_classes) == 997
    kag = tmp_path / "kaggle"
    rows = [("ILSVRC2012_val_00000002", WNIDS[5]), ("ILSVRC2012_val_00000001", WNIDS[3])]
    (kag / "val").mkdir(parents=True)
    for name, _ in rows:
        write_image(torch.zeros(3, 8, 8, dtype=torch.uint8), kag / "val" / f"{name}.JPEG")
    (kag / "LOC_val_solution.csv").write_text(
        "ImageId,PredictionString\n" + "".join(f"{n},{w} 1 2 3 4 \n" for n, w in rows))
    k = build_dataset("imagenet", root=str(kag), split="val")
    assert [Path(p).name for p, _ in k.samples] == ["ILSVRC2012_val_00000001.JPEG", "ILSVRC2012_val_00000002.JPEG"]
    assert k.targets == [3, 5]


def test_imagenet_v2_and_sketch(tmp_path):
    top = tmp_path / "imagenetv2-matched-frequency-format-val"
    for k in (0, 10, 999):
        write_images(top / str(k), 1, ext="jpeg")
    v2 = build_dataset("imagenet-v2", root=str(tmp_path), split="test")
    assert v2.targets == [0, 10, 999] and v2.classes == derived_names()
    for k in (2, 7):
        write_images(tmp_path / "sk" / "sketch" / WNIDS[k], 2)
    sk = quiet(build_dataset, "imagenet-sketch", root=str(tmp_path / "sk"), split="test")
    assert sk.targets == [2, 2, 7, 7] and sk[3][0].shape == (3, 12, 16)


@pytest.mark.parametrize("name,wnids", [("imagenet-a", A_WNIDS), ("imagenet-r", R_WNIDS)])
def test_imagenet_a_and_r_use_their_200_classes(tmp_path, name, wnids):
    for w in wnids:  # the complete 200-folder layout, one image each
        write_images(tmp_path / name / w, 1)
    ds = build_dataset(name, root=str(tmp_path), split="test")
    assert len(ds.classes) == 200 and ds.targets == list(range(200)) and not ds.missing_classes
    idx = ds.imagenet_indices
    assert idx.shape == (200,) and [WNIDS[i] for i in idx.tolist()] == wnids
    assert ds.classes[7] == derived_names()[int(idx[7])]


def test_imagenet_r_continual_splits(tmp_path):
    for j, w in enumerate(R_WNIDS[:3]):
        write_images(tmp_path / "imagenet-r" / w, 10, value=j)
    kw = dict(root=str(tmp_path), protocol="l2p")
    train = quiet(build_dataset, "imagenet-r-cl", split="train", **kw)
    test = quiet(build_dataset, "imagenet-r-cl", split="test", **kw)
    assert len(train) == 24 and len(test) == 6
    assert not {p for p, _ in train.samples} & {p for p, _ in test.samples}
    assert [p for p, _ in quiet(build_dataset, "imagenet-r-cl", split="train", **kw).samples] == \
        [p for p, _ in train.samples]
    other = quiet(build_dataset, "imagenet-r-cl", split="train", split_seed=1, **kw)
    assert {p for p, _ in other.samples} != {p for p, _ in train.samples}
    pilot = tmp_path / "pilot"
    write_images(pilot / "train" / R_WNIDS[4], 3)
    write_images(pilot / "test" / R_WNIDS[4], 1)
    p_train = quiet(build_dataset, "imagenet-r-cl", root=str(pilot), split="train", protocol="pilot")
    p_test = quiet(build_dataset, "imagenet-r-cl", root=str(pilot), split="test", protocol="pilot")
    assert p_train.targets == [4, 4, 4] and p_test.targets == [4]
