"""Class-incremental splitter and few-shot sampler."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import Dataset

from visionzoo.data.continual import ClassIncremental, class_incremental, few_shot, few_shot_indices


class Labels(Dataset):
    """Items (index as a tensor, label): cheap and easy to check."""

    def __init__(self, targets):
        self.targets = list(targets)
        self.classes = [f"c{i}" for i in range(max(self.targets) + 1)]

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        return torch.tensor(i), self.targets[i]


def test_seeded_order_tasks_and_relabelling():
    a, b = ClassIncremental(100, 10, 10), ClassIncremental(100, 10, 10, seed=1993)
    assert torch.equal(a.order, b.order) and not torch.equal(a.order, torch.arange(100))
    assert not torch.equal(a.order, ClassIncremental(100, 10, 10, seed=0).order)
    assert a.num_tasks == 10 and sorted(sum(a.tasks, [])) == list(range(100))
    assert all(len(t) == 10 for t in a.tasks)
    assert torch.equal(a.label_map[a.order], torch.arange(100))
    c = ClassIncremental(200, init=20, increment=20, seed=None)
    assert c.tasks[1] == list(range(20, 40)) and c.classes_seen(2) == 60
    uneven = ClassIncremental(60, init=30, increment=10, seed=1)
    assert [len(t) for t in uneven.tasks] == [30, 10, 10, 10]
    with pytest.raises(ValueError):
        ClassIncremental(100, 10, 7)


def test_task_subsets_hold_their_classes_with_prefix_labels():
    ds = Labels([i % 20 for i in range(200)])
    sc = ClassIncremental(20, init=5, increment=5, seed=3)
    t2 = sc.subset(ds, 2)
    assert len(t2) == 50 and set(t2.targets) == set(sc.task_labels(2)) == set(range(10, 15))
    idx, label = t2[7]
    assert int(sc.order[label]) == ds.targets[int(idx)]  # the item's original class, relabelled
    seen = sc.subset(ds, 2, cumulative=True)
    assert len(seen) == 150 and set(seen.targets) == set(range(15))
    assert sc.class_names(ds.classes)[0] == ds.classes[int(sc.order[0])]


def test_few_shot_is_seeded_per_class_and_capped():
    targets = [0] * 30 + [1] * 3 + [2] * 30
    a = few_shot_indices(targets, 16, seed=1)
    assert a == few_shot_indices(targets, 16, seed=1) and a != few_shot_indices(targets, 16, seed=2)
    picked = [targets[i] for i in a]
    assert picked.count(0) == 16 and picked.count(1) == 3 and picked.count(2) == 16 and len(set(a)) == len(a)
    sub = few_shot(Labels(targets), 4, seed=0)
    assert len(sub) == 11 and sorted(set(sub.targets)) == [0, 1, 2]


def test_partworld_preset_gives_ten_tasks_of_ten_downstream_classes():
    scenario, train, test = class_incremental("partworld", image_size=32, images_per_class=2)
    assert scenario.num_tasks == 10 and len(train.classes) == 100 and train.classes == test.classes
    first = scenario.subset(train, 0)
    assert len(first) == 20 and set(first.targets) == set(range(10))
    img, label = first[0]
    assert img.shape == (3, 32, 32) and 0 <= label < 10
