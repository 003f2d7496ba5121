"""CUB-200-2011 and CIFAR-100 loaders on tiny fake copies with the real files and layouts."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from torchvision.transforms import v2

from visionzoo.data import build_dataset
from visionzoo.data.folders import write_image
from visionzoo.errors import DatasetLayoutError

PARTS = ["back", "beak", "belly", "breast", "crown", "forehead", "left eye", "left leg", "left wing", "nape",
         "right eye", "right leg", "right wing", "tail", "throat"]


def make_cub(root: Path) -> Path:
    """3 classes x 2 images (image 1 of each class is train), 40x60 images, boxes and 15 parts."""
    cub = root / "CUB_200_2011"
    classes = ["001.Black_footed_Albatross", "002.Laysan_Albatross", "003.Sooty_Albatross"]
    lines = {k: [] for k in ("images", "labels", "split", "boxes", "locs")}
    img_id = 0
    for c, folder in enumerate(classes):
        for j in range(2):
            img_id += 1
            rel = f"{folder}/{folder.split('.')[1]}_{j:04d}.jpg"
            (cub / "images" / folder).mkdir(parents=True, exist_ok=True)
            pixels = torch.full((3, 40, 60), 40 * c + 10 * j, dtype=torch.uint8)
            pixels[:, 10:30, 20:50] = 250  # the "bird"
            write_image(pixels, cub / "images" / rel)
            lines["images"].append(f"{img_id} {rel}")
            lines["labels"].append(f"{img_id} {c + 1}")
            lines["split"].append(f"{img_id} {1 if j == 0 else 0}")
            lines["boxes"].append(f"{img_id} 20.0 10.0 30.0 20.0")
            for p in range(15):  # part p at (21 + p, 11 + p % 5); part 15 (throat) outside the box, part 14 invisible
                x, y, vis = (21.0 + p, 11.0 + p % 5, 1) if p < 13 else ((5.0, 5.0, 1) if p == 14 else (0.0, 0.0, 0))
                lines["locs"].append(f"{img_id} {p + 1} {x} {y} {vis}")
    (cub / "parts").mkdir()
    files = {"images.txt": "images", "image_class_labels.txt": "labels", "train_test_split.txt": "split",
             "bounding_boxes.txt": "boxes", "parts/part_locs.txt": "locs"}
    for name, key in files.items():
        (cub / name).write_text("\n".join(lines[key]) + "\n")
    (cub / "classes.txt").write_text("".join(f"{i + 1} {c}\n" for i, c in enumerate(classes)))
    (cub / "parts" / "parts.txt").write_text("".join(f"{i + 1} {p}\n" for i, p in enumerate(PARTS)))
    return cub


def test_cub_splits_labels_names_and_boxes(tmp_path):
    make_cub(tmp_path)
    train = build_dataset("cub", root=str(tmp_path), split="train")  # parent of CUB_200_2011 works too
    test = build_dataset("cub", root=str(tmp_path / "CUB_200_2011"), split="test")
    assert len(train) == len(test) == 3 and train.targets == [0, 1, 2]
    assert train.classes[0] == "Black footed Albatross" and train.part_names == PARTS
    img, label = train[1]
    assert img.shape == (3, 40, 60) and label == 1
    assert train.boxes[0].tolist() == [20.0, 10.0, 50.0, 30.0]


def test_cub_keypoints_full_and_cropped(tmp_path):
    make_cub(tmp_path)
    full = build_dataset("cub", root=str(tmp_path), split="train", with_meta=True)
    _, _, meta = full[0]
    kp = meta["keypoints"]
    assert kp.shape == (15, 3) and kp[0].tolist() == [21.0, 11.0, 1.0] and kp[13, 2] == 0
    assert meta["box"].tolist() == [20.0, 10.0, 50.0, 30.0]
    crop = build_dataset("cub-cropped", root=str(tmp_path), split="train", with_meta=True)
    img, _, cmeta = crop[0]
    assert img.shape == (3, 20, 30) and float(img.mean()) > 0.95  # only the bird is left
    assert cmeta["keypoints"][0].tolist() == [1.0, 1.0, 1.0]
    assert cmeta["keypoints"][14, 2] == 0  # the throat at (5, 5) lies outside the box
    tf = v2.Compose([v2.Resize((40, 60))])
    _, _, rmeta = build_dataset("cub", root=str(tmp_path), split="train", with_meta=True, cropped=True,
                                transform=tf)[0]
    assert rmeta["keypoints"][0, :2].tolist() == [2.0, 2.0]  # scaled by 2 with the image


def test_cub_wrong_layout(tmp_path):
    cub = make_cub(tmp_path)
    (cub / "bounding_boxes.txt").unlink()
    with pytest.raises(DatasetLayoutError, match=r"missing: \['bounding_boxes.txt'\]"):
        build_dataset("cub", root=str(tmp_path))
    with pytest.raises(DatasetLayoutError, match=r"expected CUB_200_2011/.*found: .*does not exist"):
        build_dataset("cub", root=str(tmp_path / "elsewhere"))


def make_cifar(root: Path) -> None:
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", 6), ("test", 4)):
        data = {"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), "fine_labels": list(range(n)),
                "coarse_labels": [i % 2 for i in range(n)]}
        (folder / split).write_bytes(pickle.dumps(data))
    meta = {"fine_label_names": [f"class_{i}" for i in range(100)], "coarse_label_names": ["aquatic_mammals", "fish"]}
    (folder / "meta").write_bytes(pickle.dumps(meta))


def test_cifar100_reads_the_python_pickles(tmp_path):
    make_cifar(tmp_path)
    train = build_dataset("cifar100", root=str(tmp_path), split="train")
    assert len(train) == 6 and len(train.classes) == 100 and train.classes[3] == "class 3"
    img, label = train[2]
    raw = pickle.loads((tmp_path / "cifar-100-python" / "train").read_bytes())["data"][2]
    assert img.shape == (3, 32, 32) and label == 2
    assert torch.equal((img * 255).round().byte().flatten(), torch.from_numpy(raw))
    coarse = build_dataset("cifar100", root=str(tmp_path), split="test", label_type="coarse")
    assert coarse.targets == [0, 1, 0, 1] and coarse.classes == ["aquatic mammals", "fish"]


def test_cifar100_missing_files_name_the_download_option(tmp_path):
    with pytest.raises(DatasetLayoutError, match="download=True"):
        build_dataset("cifar100", root=str(tmp_path), split="train")
