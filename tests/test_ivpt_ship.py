"""``python -m visionzoo.methods.ivpt.ship``: the command lines it runs, per backbone."""

from __future__ import annotations

import pytest

from visionzoo.methods.ivpt.ship import main


def test_dry_run_names_the_chosen_backbone_in_every_command(capsys):
    assert main(["--backbone", "deit_tiny_patch16_224", "--backbone-weights", "w.safetensors", "--out", "runs/x",
                 "--epochs", "3", "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["train_ivpt", "train_vpt", "eval"]
    assert "--model ivpt_deit_tiny_patch16_224 " in lines[0]
    assert "--model vpt_deep_deit_tiny_patch16_224 " in lines[1]
    assert "--model ivpt_deit_tiny_patch16_224 " in lines[2] and "--vpt-checkpoint runs/x/vpt/final" in lines[2]
    assert all("--epochs 3 " in ln and "backbone_pretrained=w.safetensors " in ln for ln in lines[:2])


def test_default_backbone_is_the_supervised_one(capsys):
    assert main(["--dry-run"]) == 0
    assert "--model ivpt_vit_tiny_partworld " in capsys.readouterr().out


def test_shipping_refuses_a_backbone_file_outside_models():
    with pytest.raises(SystemExit):
        main(["--backbone-weights", "runs/x.safetensors", "--ship"])
