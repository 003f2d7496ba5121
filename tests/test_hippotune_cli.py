"""``train.py``/``eval.py`` of the class-incremental harness end to end (tiny ViT, tiny data)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from visionzoo.cli import eval_main, train_main

from .conftest import TINY_VIT_ARGS

DATA = ["--dataset", "random-blobs", "--dataset-args", "num_classes=6", "length=24", "--tasks", "3"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _args(task: str, out: Path, *extra: str, model: str = "vit_tiny_partworld") -> list[str]:
    return [task, "--model", model, "--model-args", *TINY_VIT_ARGS, *DATA, "--backbone-pretrained", "false",
            "--epochs", "1", "--batch-size", "8", "--lr", "0.01", "--seed", "1", "--quiet", "--output-dir", str(out),
            *extra]


def _eval_args(out: Path, *extra: str) -> list[str]:
    return ["hippotune", "--model", "hippotune_vit_tiny_partworld", *DATA, "--batch-size", "8", "--quiet",
            "--output-dir", str(out), *extra]


def _results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


def test_hippotune_run_resume_and_eval(tmp_path, capsys):
    run = tmp_path / "run"
    assert train_main(_args("hippotune", run)) == 0
    res = _results(run)
    assert res["model"] == "hippotune_vit_tiny_partworld" and res["classes_seen"] == [2, 4, 6]
    assert [len(r) for r in res["accuracy_matrix"]] == [1, 2, 3]
    assert set(res["metrics"]) == {"acc", "aaa", "forgetting"} and res["metrics"]["forgetting"] is not None
    assert res["flops"]["forward_gflops"] > 0 and res["seconds_per_epoch"] > 0
    for name in ("accuracy_curve.png", "accuracy_matrix.png", "results.md", "cl_state.json"):
        assert (run / name).stat().st_size > 0
    assert (run / "task_02" / "final" / "model.safetensors").exists()
    assert "## Accuracy matrix" in (run / "results.md").read_text()

    # a crash after task 0: --resume continues from task_00/final and reproduces the run
    state = json.loads((run / "cl_state.json").read_text())
    state.update(done=0, matrix=state["matrix"][:1], curve=state["curve"][:1])
    (run / "cl_state.json").write_text(json.dumps(state))
    for d in ("task_01", "task_02"):
        shutil.rmtree(run / d)
    assert train_main(_args("hippotune", run, "--resume", str(run))) == 0
    assert _results(run)["accuracy_matrix"] == res["accuracy_matrix"]
    # resuming under another class order is refused
    assert train_main(_args("hippotune", run, "--resume", str(run), "--class-order-seed", "7")) == 2
    assert "another class order" in capsys.readouterr().err

    ckpt = str(run / "task_02" / "final")
    ev = tmp_path / "eval"
    assert eval_main(_eval_args(ev, "--pretrained", ckpt)) == 0
    row = _results(ev)["rows"][0]
    assert row["classes seen"] == 6 and row["acc1"] == pytest.approx(res["accuracy_curve"][-1])
    assert eval_main(_eval_args(tmp_path / "ev2", "--pretrained", ckpt, "--class-order-seed", "7")) == 2
    assert "another class order" in capsys.readouterr().err


@pytest.mark.parametrize("task", ["simplecil", "l2p", "seqhead", "joint", "seqhead-linear"])
def test_baselines_in_the_same_harness(tmp_path, task):
    extra = []
    if task == "seqhead-linear":  # the classic lower bound: a plain linear head, random rows
        task, extra = "seqhead", ["--head-init", "random"]
    argv = _args(task, tmp_path, *extra)
    if extra:
        argv[argv.index("--model-args") + 1:argv.index("--model-args") + 1] = ["head=linear"]
    assert train_main(argv) == 0
    res = _results(tmp_path)
    assert res["model"].startswith({"joint": "hippotune"}.get(task, task) + "_")
    if task == "joint":
        assert len(res["accuracy_matrix"]) == 1 and len(res["accuracy_matrix"][0]) == 3
        assert res["metrics"]["aaa"] is None
        # one epoch over the training images of all 3 tasks (24 at batch 8), not of the first task only
        final = json.loads((tmp_path / "joint" / "final" / "config.json").read_text())
        assert final["extra"]["steps"] == 3
    else:
        assert [len(r) for r in res["accuracy_matrix"]] == [1, 2, 3]
    if task == "simplecil":
        assert res["flops"] is None and res["trainable_params"] == 0


def test_bad_inputs_give_clear_errors(tmp_path, capsys):
    bad_split = _args("hippotune", tmp_path / "a")
    bad_split[bad_split.index("--tasks") + 1] = "4"
    assert train_main(bad_split) == 2
    assert "does not cover the classes: 6 classes do not cut into 4" in capsys.readouterr().err
    assert train_main(_args("hippotune", tmp_path / "b", "--adapt-blocks", "0", "5")) == 2
    assert "adapted block index 5 is out of range" in capsys.readouterr().err
    assert train_main(_args("hippotune", tmp_path / "c", model="l2p_vit_tiny_partworld")) == 2
    assert "hippotune_*" in capsys.readouterr().err
    order = ["--class-order", "0", "1", "2", "3", "4", "4"]
    assert train_main(_args("hippotune", tmp_path / "d", *order)) == 2
    assert "exactly once" in capsys.readouterr().err


@pytest.mark.slow
def test_partworld_preset_ten_tasks(tmp_path):
    args = ["hippotune", "--model", "vit_tiny_partworld", "--model-args", *TINY_VIT_ARGS, "--dataset", "partworld",
            "--dataset-args", "image_size=32", "--tasks", "10", "--train-per-class", "1", "--test-per-class", "1",
            "--backbone-pretrained", "false", "--epochs", "1", "--batch-size", "16", "--quiet",
            "--output-dir", str(tmp_path)]
    assert train_main(args) == 0
    res = _results(tmp_path)
    assert res["tasks"] == 10 and res["classes_seen"] == list(range(10, 101, 10))
    assert res["class_order_seed"] == 1993 and sorted(res["class_order"]) == list(range(100))


@pytest.mark.slow
def test_demo_quick_with_a_toy_backbone(tmp_path):
    from visionzoo.methods.hippotune.demo import run_demo

    res = run_demo(tmp_path, quick=True, backbone_pretrained="false", model_args=TINY_VIT_ARGS, image_size=32)
    labels = ["hippotune", "hippotune + LDA", "simplecil", "simplecil + LDA", "l2p"]
    assert [r["what"].split(",")[0] for r in res["rows"]] == labels
    assert all(0 <= r["Acc"] <= 100 for r in res["rows"])
    assert Path(res["figure"]).stat().st_size > 0 and (tmp_path / "comparison.md").exists()
    assert set(res["commands"]) == set(labels) and "--classifier lda" in res["commands"]["simplecil + LDA"]
    assert (tmp_path / "simplecil_LDA" / "results.json").exists()


def test_head_rows_start_at_the_class_means_of_the_current_task(tmp_path):
    import torch.nn.functional as F

    from visionzoo.cli import parse_args
    from visionzoo.engine import get_task
    from visionzoo.factory import create_transforms

    args = parse_args(_args("hippotune", tmp_path), training=True)
    task = get_task("hippotune")
    task.setup(args)
    task.enter_stage(1)
    before = task.model.head.weight.detach().clone()
    task.init_head_rows(args)
    after = task.model.head.weight.detach()
    assert torch.equal(after[:2], before[:2]) and torch.equal(after[4:], before[4:])  # other tasks untouched
    tf = create_transforms(task.model, training=False)
    ds = task.protocol.train_set(1)
    task.model.eval()
    with torch.no_grad():
        feats = task.model.embed(torch.stack([tf(ds[i][0]) for i in range(len(ds))]))
    labels = torch.tensor(ds.targets)
    for c in (2, 3):  # the class mean's direction, at norm √d (unit-size coordinates for Adam)
        torch.testing.assert_close(after[c], F.normalize(feats[labels == c].mean(0), dim=0) * 32 ** 0.5)


def test_memory_partitions_keep_earlier_tasks_memories(tmp_path):
    from visionzoo.checkpoint import from_pretrained

    run = tmp_path / "run"
    argv = _args("hippotune", run, "--memory-partitions", "3")
    argv.insert(argv.index("--model-args") + 1, "memory_size=6")
    assert train_main(argv) == 0
    first, last = (from_pretrained(str(run / d / "final")) for d in ("task_00", "task_02"))
    for a, b in zip(first.retrieval_blocks(), last.retrieval_blocks(), strict=True):
        assert torch.equal(a.retrieval.keys[:2], b.retrieval.keys[:2])  # task 0's partition is frozen after it
        assert torch.equal(a.retrieval.values[:2], b.retrieval.values[:2])
        assert not torch.equal(a.retrieval.keys[2:4], b.retrieval.keys[2:4])  # task 1's partition trained
        assert int(b.retrieval.task) == 2 and b.retrieval.active_slots == 6
    ev = tmp_path / "eval"
    assert eval_main(_eval_args(ev, "--pretrained", str(run / "task_02" / "final"))) == 0
    assert _results(ev)["rows"][0]["acc1"] == pytest.approx(_results(run)["accuracy_curve"][-1])


def test_same_seed_same_run(tmp_path):
    """The learner's memories and head are created before the first fit: they must be seeded too."""
    runs = [tmp_path / "a", tmp_path / "b"]
    for run in runs:
        assert train_main(_args("hippotune", run, "--tasks", "2")) == 0
    first, second = (_results(r) for r in runs)
    assert first["accuracy_matrix"] == second["accuracy_matrix"]
    a, b = (torch.load(r / "task_01" / "checkpoints" / "last.pt", weights_only=True)["model"] for r in runs)
    assert all(torch.equal(a[k], b[k]) for k in a)
