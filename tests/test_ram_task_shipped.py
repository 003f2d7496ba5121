"""The shipped ram_tiny checkpoint (models/ram_tiny.yaml + models/ram_tiny_natural/): loads, matches, works."""

from __future__ import annotations

import json

import torch
import yaml
from deepinv.loss.metric import PSNR

import visionzoo
from visionzoo.cards import cards_dir, find_card
from visionzoo.data import build_dataset
from visionzoo.hub import sha256_file
from visionzoo.methods.ram.crops import load_images
from visionzoo.methods.ram.mixture import DEFAULT_OPERATORS
from visionzoo.methods.ram.operators import simulate


def test_shipped_ram_tiny_loads_and_matches_its_card():
    card = find_card("ram_tiny")
    assert card is not None and card.name == "ram_tiny.natural" and card.default
    folder = cards_dir() / "ram_tiny_natural"
    weights = folder / "model.safetensors"
    assert sha256_file(weights) == card.weights["sha256"]
    assert json.loads((folder / "config.json").read_text())["weights_sha256"] == card.weights["sha256"]
    assert weights.stat().st_size < 8 * 2**20  # a few MB
    data = yaml.safe_load((cards_dir() / "ram_tiny.yaml").read_text())
    assert data["trained_on"] == ["natural-train"] and data["recipe"].startswith("OMP_NUM_THREADS=1 python train.py ram")
    assert all("command" in m and "value" in m for m in data["metrics"].values())

    model = visionzoo.create_model("ram_tiny", pretrained=True).eval()
    assert model.visionzoo_cfg["weights"] == "ram_tiny.natural"
    folder_model = visionzoo.load_pretrained(folder)
    for (k, a), b in zip(model.state_dict().items(), folder_model.state_dict().values(), strict=True):
        assert torch.equal(a, b), k


def test_shipped_ram_tiny_beats_the_adjoint_on_every_trained_operator():
    torch.set_num_threads(1)
    model = visionzoo.create_model("ram_tiny", pretrained=True).eval()
    x = next(iter(load_images(build_dataset("natural-eval"), size=64, limit=1).values()))[None]
    psnr = PSNR()
    for op in DEFAULT_OPERATORS:  # its training mixture: blur, inpainting, sr, denoising
        x_op, y, physics = simulate(op, x, seed=0)
        with torch.no_grad():
            ours = psnr(model(y, physics).clamp(0, 1), x_op)
        assert ours > psnr(physics.A_adjoint(y).clamp(0, 1), x_op) + 1.0, op


def test_demo_step_runs_zero_shot_then_finetuning_at_a_tiny_size(tmp_path, monkeypatch):
    """``make demo``'s RAM step end to end with the shipped checkpoint, shrunk to 32 px / 1 image / 1 epoch."""
    import visionzoo.cli as cli
    from visionzoo.methods.ram.demo import UNSEEN_OPERATOR, run_demo

    shrink = {"--image-size": "32", "--eval-images": "1", "--tv-iterations": "2", "--finetune-epochs": "1"}

    def shrunk(main):
        def run(argv):
            argv = [shrink.get(prev, a) for prev, a in zip(["", *argv], argv, strict=False)]
            return main(argv)
        return run

    monkeypatch.setattr(cli, "eval_main", shrunk(cli.eval_main))
    monkeypatch.setattr(cli, "train_main", shrunk(cli.train_main))
    summary = run_demo(tmp_path, quick=True)
    rows = summary["rows"]
    zero_shot = [r for r in rows if r["what"].startswith("zero-shot")]
    assert len(zero_shot) == len(DEFAULT_OPERATORS) and all(r["images"] == 1 for r in zero_shot)
    assert all({"ram_tiny_psnr", "adjoint_psnr", "pinv_psnr", "tv_pgd_psnr"} <= set(r) for r in zero_shot)
    tuned = [r for r in rows if UNSEEN_OPERATOR in r["what"]]
    assert [r["dataset"] for r in tuned] == ["natural-train", "natural-eval"]
    assert all(r["psnr_before"] == r["psnr_before"] and r["psnr_after"] == r["psnr_after"] for r in tuned)
    assert all((tmp_path / step / "figure.png").exists() for step in ("zero-shot", "finetune"))
    assert (tmp_path / "finetune" / "final" / "model.safetensors").exists()
    assert summary["commands"][1].startswith("python train.py ram --finetune")
