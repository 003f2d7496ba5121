"""``train.py ram``, ``train.py ram --finetune`` and ``eval.py ram`` end to end, on tiny models."""

from __future__ import annotations

import json

import pytest
import torch

import visionzoo
from visionzoo.cli import eval_main, train_main
from visionzoo.methods.ram import RAMTask, ram_tiny
from visionzoo.methods.ram.crops import OperatorCrops
from visionzoo.methods.ram.mixture import draw_operator, operator_probabilities, task_weight
from visionzoo.methods.ram.operators import simulate

TINY = ["--model", "ram_tiny", "--model-args", "widths=[8,8,16,16]", "blocks=1"]
OPS = ["blur:sigma=1,noise=gaussian:0.05", "inpainting:ratio=0.5"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_train_few_steps_writes_checkpoint(tmp_path):
    out = tmp_path / "run"
    code = train_main(["ram", *TINY, "--operators", *OPS, "--dataset", "random-blobs", "--dataset-args", "length=8",
                       "--val-split", "images", "--val-fraction", "0.25", "--crop-size", "24", "--resize", "0",
                       "--crops-per-image", "2", "--val-crops", "1", "--batch-size", "3", "--epochs", "1",
                       "--log-every", "1", "--output-dir", str(out), "--quiet"])
    assert code == 0
    res = json.loads((out / "results.json").read_text())
    assert res["steps"] == 4 and res["dataset"] == "random-blobs"  # 6 training images x 2 crops / batch 3
    assert {"psnr", "adjoint_psnr", "psnr_blur", "psnr_inpainting"} <= set(res["metrics"])
    assert res["metrics"]["count"] == 2  # 2 held-out images x 1 crop
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r.get("kind") == "train"]
    assert len(train) == 4 and {r["operator"] for r in train} <= {0.0, 1.0}
    assert all(r["omega"] > 0 and r["l1"] > 0 for r in train)
    model = visionzoo.load_pretrained(out / "final")
    assert tuple(model.in_channels) == (3,)  # a new model gets heads for the operators' channels only
    cfg = json.loads((out / "final" / "config.json").read_text())
    assert cfg["architecture"] == "ram_tiny" and cfg["model_args"]["blocks"] == 1


def test_loss_one_seeded_operator_per_batch_with_task_weight():
    task = RAMTask()
    args = type("A", (), {"operators": OPS, "operator_weights": None, "sigma_floor": 0.01, "task_weighting": True})()
    seen = []

    class Spy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(()))

        def forward(self, y, physics):
            seen.append((y.clone(), physics))
            return physics.A_adjoint(y) * self.w

    x = torch.rand(2, 3, 16, 16)
    picks = set()
    for seed in range(12):
        out = task.loss(Spy(), (x, torch.zeros(2), torch.tensor([seed, 99])), args)
        j = int(out["operator"])
        picks.add(j)
        assert j == draw_operator(seed, operator_probabilities(2, None))
        _, y_ref, physics = simulate(OPS[j], x, seed=seed)
        assert torch.equal(seen[-1][0], y_ref)  # the whole batch is measured with the seeded operator
        omega = task_weight(physics, y_ref, 0.01)
        expected = (omega * (physics.A_adjoint(y_ref) - x).abs().mean((1, 2, 3))).mean()
        torch.testing.assert_close(out["loss"], expected)
    assert picks == {0, 1}
    # only the second operator when the weights say so; noiseless operators use the sigma floor
    assert draw_operator(3, operator_probabilities(2, [0, 1])) == 1
    _, y, physics = simulate("inpainting:ratio=0.5", x, seed=0)
    rms = physics.A_adjoint(y).pow(2).mean((1, 2, 3)).sqrt()
    torch.testing.assert_close(task_weight(physics, y, 0.02), rms / 0.02)


def test_crops_split_training_and_validation_regions():
    cols = torch.arange(200.0).div(200).expand(1, 120, 200)  # pixel value = its column / 200
    base = [(cols, 0)]
    common = dict(crop=32, val_fraction=0.2, resize=0, scale_min=1.0, channels=1, seed=0)
    train = OperatorCrops(base, "train", crops_per_image=20, **common)
    val = OperatorCrops(base, "val", crops_per_image=4, **common)
    boundary = 160 / 200  # the right-most 40 columns (20 %) are the validation strip
    assert all(float(train[i][0].max()) < boundary for i in range(20))
    assert all(float(val[i][0].min()) >= boundary for i in range(4))
    assert torch.equal(val[1][0], val[1][0]) and val[1][2] == val[1][2]  # fixed crops and operator seeds


def test_finetune_single_measurement_never_sees_ground_truth(tmp_path, monkeypatch):
    import visionzoo.methods.ram.finetune_job as job
    import visionzoo.methods.ram.selfsup as selfsup

    torch.manual_seed(0)
    start = visionzoo.create_model("ram_tiny", widths=[8, 8, 16, 16], blocks=1, in_channels=[3])
    visionzoo.save_pretrained(start, tmp_path / "start")
    calls, loss_inputs = [], []
    real_finetune, real_total = job.finetune, selfsup._total_loss

    def spy_finetune(*a, **kw):
        calls.append((a, kw))
        return real_finetune(*a, **kw)

    def spy_total(model, losses, y, physics):
        loss_inputs.append(y.clone())
        return real_total(model, losses, y, physics)

    monkeypatch.setattr(job, "finetune", spy_finetune)
    monkeypatch.setattr(selfsup, "_total_loss", spy_total)
    out = tmp_path / "ft"
    op = "inpainting:ratio=0.6,noise=none"
    code = train_main(["ram", "--finetune", "--model", "ram_tiny", "--pretrained", str(tmp_path / "start"),
                       "--finetune-operator", op, "--finetune-images", "1", "--finetune-epochs", "2",
                       "--finetune-lr", "1e-3", "--image-size", "32", "--eval-images", "1",
                       "--output-dir", str(out), "--quiet"])
    assert code == 0
    (args, kwargs), = calls
    model, physics, y = args  # the model, the operator and the measurement: nothing else
    assert set(kwargs) <= {"epochs", "lr", "patience", "transform", "seed", "log"}
    from visionzoo.data import build_dataset
    from visionzoo.methods.ram.crops import load_images
    truth = next(iter(load_images(build_dataset("natural-train"), size=32, limit=1).values()))[None]
    x_op, y_ref, _ = simulate(op, truth, seed=0)
    assert y.shape == (1, 3, 32, 32) and torch.equal(y, y_ref) and not torch.equal(y, x_op)
    assert loss_inputs and all(torch.equal(t, y_ref) for t in loss_inputs)  # the loss only ever saw y

    res = json.loads((out / "results.json").read_text())
    assert res["mode"] == "finetune" and res["losses"] == ["MCLoss", "EILoss"]
    assert [r["set"] for r in res["rows"]] == ["fine-tuning measurements", "held-out measurements"]
    assert all({"psnr_before", "psnr_after", "ssim_before", "ssim_after"} <= set(r) for r in res["rows"])
    assert res["images"] == {"fine-tuning": ["astronaut"], "held-out": ["camera"]}
    assert (out / "figure.png").read_bytes()[:4] == b"\x89PNG" and "psnr_before" in (out / "results.md").read_text()
    tuned = visionzoo.load_pretrained(out / "final")
    assert any(not torch.equal(a, b) for a, b in zip(tuned.state_dict().values(), start.state_dict().values(),
                                                     strict=True))


def test_eval_writes_tables_with_baselines_and_figure(tmp_path):
    out = tmp_path / "ev"
    code = eval_main(["ram", *TINY, "--operators", "inpainting:ratio=0.5", "sr:factor=2", "--image-size", "32",
                      "--eval-images", "2", "--tv-iterations", "3", "--output-dir", str(out), "--quiet"])
    assert code == 0
    payload = json.loads((out / "results.json").read_text())
    pairs = {(r["operator"].split(":")[0], r["method"]) for r in payload["summary"]}
    assert pairs == {(o, m) for o in ("inpainting", "sr") for m in ("ram_tiny", "adjoint", "pinv", "tv_pgd")}
    assert all(r["images"] == 2 for r in payload["summary"])
    assert payload["meta"]["dataset"] == "natural-eval" and payload["meta"]["images"] == ["camera", "retina"]
    assert "deepinv_ram skipped" in payload["meta"]["notes"]
    assert payload["meta"]["command"].startswith("python eval.py ram --model ram_tiny --model-args "
                                                 "'widths=[8, 8, 16, 16]' blocks=1 --dataset natural-eval --operators")
    md = (out / "results.md").read_text()
    assert "| operator | ram_tiny PSNR / SSIM | adjoint PSNR / SSIM | pinv PSNR / SSIM | tv_pgd PSNR / SSIM |" in md
    assert (out / "figure.png").read_bytes()[:4] == b"\x89PNG"


def test_deepinv_baseline_uses_the_same_weights():
    from visionzoo.methods.ram.eval_job import baseline_methods

    torch.manual_seed(0)
    model = visionzoo.create_model("ram_base").eval()
    methods, notes = baseline_methods(["deepinv_ram", "tv_pgd"], model, tv_iterations=0)
    assert list(methods) == ["deepinv_ram"] and notes == ["tv_pgd skipped: --tv-iterations 0"]
    _, y, physics = simulate("sr:factor=2", torch.rand(1, 3, 20, 18), seed=0)
    with torch.no_grad():
        torch.testing.assert_close(methods["deepinv_ram"](y, physics), model(y, physics), rtol=0, atol=0)
    _, notes = baseline_methods(["deepinv_ram"], ram_tiny(), tv_iterations=0)
    assert "deepinv_ram skipped" in notes[0]


@pytest.mark.parametrize("main", [train_main, eval_main])
def test_bad_operator_string_exits_2_listing_operators(main, capsys, tmp_path):
    assert main(["ram", *TINY, "--operators", "sr:factor=2", "blurr:sigma=2",
                 "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "'blurr:sigma=2'" in err and "Did you mean: blur" in err
    assert all(name in err for name in ("inpainting", "demosaic", "mri", "motion_blur", "noise=none"))
    assert main(["ram", *TINY, "--operators", "blur:sigma=-1", "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "sigma=-1 must be > 0" in err and "demosaic" in err


def test_evaluation_images_are_refused_for_training(capsys, tmp_path):
    assert train_main(["ram", *TINY, "--dataset", "natural-eval", "--output-dir", str(tmp_path)]) == 2
    assert "never used for training" in capsys.readouterr().err
