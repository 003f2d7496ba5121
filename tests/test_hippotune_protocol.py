"""Class-incremental protocol: task splits, class orders and the Acc / AAA / forgetting metrics."""

from __future__ import annotations

import pytest

from visionzoo.methods.hippotune import SplitError, build_protocol, cl_metrics, make_scenario, split_sizes
from visionzoo.methods.hippotune.config import ContinualConfig
from visionzoo.methods.hippotune.metrics import check_matrix


def test_split_sizes_and_splits_that_do_not_cover_the_classes():
    assert split_sizes(100, 10) == (10, 10)
    assert split_sizes(100, 6, init_classes=50) == (50, 10)
    assert split_sizes(7, 1) == (7, 7)
    with pytest.raises(SplitError, match="does not cover the classes: 100 classes do not cut into 7"):
        split_sizes(100, 7)
    with pytest.raises(SplitError, match="leaves 50 of 100"):
        split_sizes(100, 4, init_classes=50)
    with pytest.raises(SplitError, match="one task must hold all"):
        split_sizes(10, 1, init_classes=5)


def test_seeded_and_explicit_class_orders():
    a = make_scenario(100, ContinualConfig())
    b = make_scenario(100, ContinualConfig(class_order_seed=1993))
    assert a.order.tolist() == b.order.tolist() and a.order.tolist() != list(range(100))
    assert a.num_tasks == 10 and sorted(c for t in a.tasks for c in t) == list(range(100))
    order = list(range(9, -1, -1))
    s = make_scenario(10, ContinualConfig(tasks=5, class_order=order))
    assert s.order.tolist() == order and s.tasks[0] == [9, 8] and int(s.label_map[9]) == 0
    with pytest.raises(SplitError, match=r"missing \[9\].*repeated \[0\]"):
        make_scenario(10, ContinualConfig(tasks=5, class_order=[0, 0, 1, 2, 3, 4, 5, 6, 7, 8]))
    with pytest.raises(SplitError, match=r"out of range \[12\]"):
        make_scenario(10, ContinualConfig(tasks=5, class_order=[12, *range(1, 10)]))


def test_protocol_relabels_tasks_and_limits_images_per_class():
    cfg = ContinualConfig(tasks=3, train_per_class=2)
    p = build_protocol("random-blobs", None, {"num_classes": 6, "length": 36}, cfg)
    assert p.num_tasks == 3 and p.bounds == [0, 2, 4, 6] and len(p.train) == 12
    t1 = p.train_set(1)
    assert sorted(set(t1.targets)) == [2, 3] and len(t1) == 4
    assert sorted(set(p.test_set(1).targets)) == [0, 1, 2, 3]
    assert sorted(set(p.train_set(2, cumulative=True).targets)) == list(range(6))
    assert p.task_of_label().tolist() == [0, 0, 1, 1, 2, 2]
    assert p.names_in_order() == [p.classes[c] for c in p.scenario.order.tolist()]
    with pytest.raises(SplitError, match="do not cut into 4"):
        build_protocol("random-blobs", None, {"num_classes": 6, "length": 36}, ContinualConfig(tasks=4))


def test_metrics_from_an_accuracy_matrix():
    matrix = [[90.0], [70.0, 80.0], [60.0, 75.0, 85.0]]
    curve = [90.0, 75.0, 73.0]
    m = cl_metrics(matrix, curve)
    assert m["acc"] == 73.0
    assert m["aaa"] == pytest.approx((90 + 75 + 73) / 3)
    # task 0: best 90 -> 60 (30); task 1: best 80 -> 75 (5)
    assert m["forgetting"] == pytest.approx(17.5)
    joint = cl_metrics([[80.0, 70.0, 60.0]], [70.0])
    assert joint == {"acc": 70.0, "aaa": None, "forgetting": None}
    with pytest.raises(ValueError, match="row 1"):
        check_matrix([[1.0], [1.0]] + [[1.0, 2.0, 3.0]])
