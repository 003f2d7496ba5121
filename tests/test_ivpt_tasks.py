"""``train.py ivpt`` / ``train.py vpt`` / ``eval.py ivpt`` end to end on a tiny ViT and PartWorld."""

from __future__ import annotations

import json

import pytest

from visionzoo.cli import eval_main, parse_args, train_main
from visionzoo.methods.ivpt.task import PAPER_RECIPE, apply_recipe

from .conftest import TINY_VIT_ARGS

DATA = ["--dataset", "partworld", "--dataset-args", "classes=[60,61]", "images_per_class=3", "image_size=32"]


@pytest.mark.slow
def test_train_both_then_eval_in_one_report(tmp_path):
    common = DATA + ["--epochs", "1", "--batch-size", "3", "--quiet", "--seed", "0"]
    assert train_main(["ivpt", "--model", "ivpt_vit_tiny_patch16_224", "--model-args", *TINY_VIT_ARGS, "n_pro=[5,4,3]",
                       "--output-dir", str(tmp_path / "ivpt"), *common]) == 0
    assert train_main(["vpt", "--model", "vpt_deep_vit_tiny_patch16_224", "--model-args", *TINY_VIT_ARGS,
                       "num_prompts=3", "--output-dir", str(tmp_path / "vpt"), *common]) == 0
    assert eval_main(["ivpt", "--model", "ivpt_vit_tiny_patch16_224", "--pretrained", str(tmp_path / "ivpt" / "final"),
                      "--vpt-checkpoint", str(tmp_path / "vpt" / "final"), "--visualize", "1", "--ivpt-maps", "parts",
                      "--output-dir", str(tmp_path / "eval"), *DATA, "--quiet"]) == 0
    res = json.loads((tmp_path / "eval" / "results.json").read_text())
    rows = {r["method"]: r for r in res["rows"]}
    assert set(rows) == {"IVPT", "VPT-Deep (last)", "VPT-Deep (best)"}
    assert rows["IVPT"]["maps"] == "parts (2/class)" and rows["VPT-Deep (last)"]["maps"] == "layer1 (3/class)"
    assert rows["VPT-Deep (best)"]["consistency"] >= rows["VPT-Deep (last)"]["consistency"]
    for r in rows.values():
        assert 0 <= r["consistency"] <= 100 and 0 <= r["stability"] <= 100 and r["images"] == 6
    assert set(res["details"]["IVPT"]["maps"]) == {"stage0", "stage1", "parts"}
    assert res["figures"] and (tmp_path / "eval" / "figures").is_dir()
    assert "| IVPT |" in (tmp_path / "eval" / "results.md").read_text()


def test_paper_recipe_fills_only_defaults_on_cub():
    args = parse_args(["ivpt", "--model", "m", "--dataset", "cub", "--lr", "0.5"], training=True)
    changed = apply_recipe(args, "auto")
    assert args.lr == 0.5 and "lr" not in changed  # an explicit flag wins
    assert args.opt == PAPER_RECIPE["opt"] and args.epochs == 25 and args.batch_size == 16 and args.clip_grad == 2.0
    assert (args.schedule, args.step_epochs, args.step_gamma) == ("step", 4.0, 0.5)
    args = parse_args(["ivpt", "--model", "m"], training=True)
    assert apply_recipe(args, "auto") == {} and args.opt == "adamw" and args.schedule == "cosine"  # partworld


def test_eval_needs_keypoints(tmp_path, capsys):
    rc = eval_main(["ivpt", "--model", "ivpt_vit_tiny_patch16_224", "--model-args", *TINY_VIT_ARGS, "n_pro=[5,4,3]",
                    "--dataset", "random-blobs", "--output-dir", str(tmp_path), "--quiet"])
    assert rc == 2 and "has no part keypoints" in capsys.readouterr().err
