"""The training engine: exact resume, NaN handling, schedule, DDP under torchrun."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from visionzoo.cli import train_main
from visionzoo.engine import register_task
from visionzoo.engine.data import ResumableSampler
from visionzoo.engine.schedule import build_schedule, cosine_with_warmup
from visionzoo.errors import VisionZooError
from visionzoo.methods.classify.task import ClassifyTask

from .conftest import TINY_VIT_ARGS

REPO = Path(__file__).resolve().parent.parent


def _train_args(out: Path, *extra: str) -> list[str]:
    return ["classify", "--model", "classifier_vit_tiny_patch16_224", "--model-args", *TINY_VIT_ARGS,
            "drop_rate=0.1", "--dataset", "random-blobs", "--dataset-args", "length=40",
            "--batch-size", "8", "--epochs", "2", "--lr", "3e-3", "--warmup-steps", "2",
            "--seed", "3", "--quiet", "--output-dir", str(out), *extra]


def test_resume_after_interruption_matches_uninterrupted_run(tmp_path):
    assert train_main(_train_args(tmp_path / "full")) == 0
    # interrupted mid-epoch after 3 of 10 steps, then resumed to the end
    assert train_main(_train_args(tmp_path / "cut", "--max-steps", "3")) == 0
    cut_results = json.loads((tmp_path / "cut" / "results.json").read_text())
    assert cut_results["interrupted"] and cut_results["steps"] == 3
    assert not (tmp_path / "cut" / "final").exists()
    assert train_main(_train_args(tmp_path / "cut", "--resume", str(tmp_path / "cut"))) == 0
    full = load_file(str(tmp_path / "full" / "final" / "model.safetensors"))
    resumed = load_file(str(tmp_path / "cut" / "final" / "model.safetensors"))
    assert full.keys() == resumed.keys()
    for k in full:
        assert torch.equal(full[k], resumed[k]), f"{k} differs after resume"
    # and training did change the weights (the comparison is not between two untouched models)
    first = json.loads((tmp_path / "full" / "metrics.jsonl").read_text().splitlines()[0])
    command = json.loads((tmp_path / "full" / "results.json").read_text())["command"]
    assert command.startswith("python train.py classify --model classifier_vit_tiny_patch16_224")
    assert first["kind"] == "train" and first["loss"] > 0


def test_step_schedule_from_the_command_line(tmp_path):
    args = _train_args(tmp_path / "step", "--schedule", "step", "--step-epochs", "1", "--step-gamma", "0.5",
                       "--warmup-steps", "0", "--log-every", "1")
    assert train_main(args) == 0
    rows = [json.loads(line) for line in (tmp_path / "step" / "metrics.jsonl").read_text().splitlines()]
    lr = {r["epoch"]: r["lr"] for r in rows if r["kind"] == "train"}
    assert lr[2] == pytest.approx(lr[1] * 0.5)


@register_task
class _NanAfterTwoSteps(ClassifyTask):
    """Classification whose loss turns NaN at its 4th step (steps are counted per process)."""

    name = "test-nan"
    calls = 0

    def loss(self, model, batch, args):
        out = super().loss(model, batch, args)
        type(self).calls += 1
        if type(self).calls >= 4:
            out["loss"] = out["loss"] * float("nan")
        return out


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path, capsys):
    out = tmp_path / "nan"
    args = _train_args(out)
    args[0] = "test-nan"
    args += ["--dataset-args", "length=24"]  # 3 steps per epoch: epoch 1 completes and is saved
    _NanAfterTwoSteps.calls = 0
    code = train_main(args)
    assert code == 3
    err = capsys.readouterr().err
    assert "loss became nan at step 4" in err and "last good checkpoint is untouched" in err
    state = torch.load(out / "checkpoints" / "last.pt", weights_only=True)
    assert state["step"] == 3 and state["epoch"] == 1  # the epoch-1 checkpoint, not a NaN one
    assert all(torch.isfinite(v).all() for v in state["model"].values())
    assert not (out / "final").exists()


def test_cosine_schedule_with_warmup():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = cosine_with_warmup(opt, total_steps=10, warmup_steps=2)
    lrs = []
    for _ in range(10):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[0] == pytest.approx(0.5) and lrs[1] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[1:], lrs[2:], strict=False)) and lrs[-1] < 0.05


def test_step_schedule_halves_every_period_after_warmup():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    args = argparse.Namespace(schedule="step", step_epochs=2, step_gamma=0.5, min_lr_ratio=0.0)
    sched = build_schedule(opt, args, steps_per_epoch=3, total_steps=30, warmup_steps=2)
    lrs = []
    for _ in range(14):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[:2] == [0.5, 1.0]  # warm-up
    assert lrs[2:6] == [1.0] * 4 and lrs[6:12] == [0.5] * 6 and lrs[12:] == [0.25] * 2  # ×0.5 every 6 steps
    with pytest.raises(VisionZooError, match="--step-gamma"):
        build_schedule(opt, argparse.Namespace(schedule="step", step_epochs=2, step_gamma=2.0), 3, 30, 0)


def test_sampler_resume_and_rank_split():
    s = ResumableSampler(10, seed=1)
    s.set_epoch(2)
    order = list(s)
    s.set_epoch(2, start=4)
    assert list(s) == order[4:]
    s.set_epoch(3)
    assert list(s) != order and sorted(s) == list(range(10))
    ranks = [list(ResumableSampler(10, seed=1, rank=r, world_size=3)) for r in range(3)]
    assert all(len(r) == 4 for r in ranks)  # padded to equal length for DDP
    assert set(sum(ranks, [])) == set(range(10))


@pytest.mark.slow
def test_torchrun_two_processes_writes_one_checkpoint(tmp_path):
    out = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(REPO / "train.py"), *_train_args(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["world_size"] == 2 and results["steps"] == 6  # 40 images / 2 ranks / batch 8 -> 3 per epoch
    assert sorted(p.name for p in out.iterdir()) == ["args.yaml", "best", "checkpoints", "final", "metrics.jsonl",
                                                    "results.json"]
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["last.pt"]
    assert results["metrics"]["count"] == 40  # evaluation covered every image exactly once over both ranks


def test_bf16_autocast_and_grad_clip_run(tmp_path):
    out = tmp_path / "bf16"
    assert train_main(_train_args(out, "--precision", "bf16", "--clip-grad", "1.0", "--epochs", "1")) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["steps"] == 5 and results["metrics"]["count"] == 40


def test_seeded_items_apply_the_transform_even_for_batch_fetching_datasets():
    from torch.utils.data import DataLoader, Dataset

    from visionzoo.engine.data import SeededItems

    class Batched(Dataset):
        classes = ["a", "b"]

        def __len__(self):
            return 4

        def __getitem__(self, i):
            return torch.zeros(3, 2, 2), i % 2

        def __getitems__(self, idx):  # like PartWorld: one call per batch
            return [self[i] for i in idx]

    items = SeededItems(Batched(), transform=lambda x: x + 1.0)
    images, _ = next(iter(DataLoader(items, batch_size=4)))
    assert torch.equal(images, torch.ones(4, 3, 2, 2)) and items.classes == ["a", "b"]
