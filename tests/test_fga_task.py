"""train.py coop / train.py fga (SAPT) and eval.py fga end to end on PartWorld with a tiny random CLIP."""

from __future__ import annotations

import json

import pytest
import yaml
from safetensors.torch import load_file

from visionzoo.cli import eval_main, train_main

from .test_fga_helpers import tiny_clip

DATA = ["--dataset", "partworld", "--dataset-args", "image_size=32", "classes=[60,61,62,63,64,65]",
        "images_per_class=4"]


@pytest.mark.slow
def test_train_coop_and_sapt_then_eval_every_method(tmp_path):
    name = tiny_clip()
    common = ["--clip-weights", "false", "--shots", "2", "--epochs", "1", "--batch-size", "6", "--quiet", *DATA]
    assert train_main(["coop", "--model", f"coop_{name}", "--output-dir", str(tmp_path / "coop"), *common]) == 0
    assert train_main(["fga", "--model", f"fga_{name}", "--output-dir", str(tmp_path / "sapt"), *common]) == 0
    args = yaml.safe_load((tmp_path / "sapt" / "args.yaml").read_text())
    assert args["sam_rho"] == 0.3 and args["shots"] == 2            # SAPT = SAM on the context
    coop = yaml.safe_load((tmp_path / "coop" / "args.yaml").read_text())
    assert coop["sam_rho"] == 0.0
    assert json.loads((tmp_path / "sapt" / "results.json").read_text())["steps"] == 2  # 6 classes x 2 shots / 6
    assert "ctx" in load_file(str(tmp_path / "sapt" / "final" / "model.safetensors"))

    out = tmp_path / "eval"
    code = eval_main(["fga", "--model", f"fga_{name}", "--pretrained", str(tmp_path / "sapt" / "final"),
                      "--coop-pretrained", str(tmp_path / "coop" / "final"), "--views", "8", "--stss-keep", "2",
                      "--eval-sets", "partworld:clean", "partworld:sketch", "--images-per-set", "3",
                      "--figures", "1", "--stss-sweep", "rho=0.2,keep=3", "keep=1", "--output-dir", str(out),
                      "--quiet", *DATA])
    assert code == 0
    res = json.loads((out / "results.json").read_text())
    methods = [r["method"] for r in res["accuracy"]]
    assert methods == ["zeroshot", "zeroshot-ensemble", "coop", "tpt", "zero", "tpt+coop", "zero+coop", "sapt",
                       "stss", "stss+coop", "fga", "fga@rho=0.2,keep=3", "fga@keep=1"]
    for row in res["accuracy"]:
        assert set(row) == {"method", "clean", "sketch", "ood_avg"} and 0 <= row["ood_avg"] <= 100
    assert res["images"] == {"clean": 3, "sketch": 3}
    costs = {r["method"]: r for r in res["costs"]}
    assert costs["fga"]["views"] == "all" and costs["coop"]["views"] == "original"
    assert all(r["s_per_image"] > 0 and r["peak_mem_mb"] > 0 for r in res["costs"])
    assert "| fga |" in (out / "results.md").read_text()
    assert len(res["figures"]) == 1 and (out / "figures").exists()

    # explicit requests for a method whose prompt is missing fail clearly
    code = eval_main(["fga", "--model", f"fga_{name}", "--clip-weights", "false", "--method", "fga",
                      "--output-dir", str(tmp_path / "bad"), "--quiet", *DATA])
    assert code == 2


def test_eval_set_specs_method_resolution_and_mixed_image_sizes():
    import torch

    import visionzoo
    from visionzoo.errors import VisionZooError
    from visionzoo.methods.fga.evaluate import ViewSettings, compare_methods, parse_eval_sets
    from visionzoo.methods.fga.harness import HeadSettings, resolve_methods

    names = [s.name for s in parse_eval_sets(None, "partworld", None)]
    assert names[0] == "clean" and "sketch" in names and len(names) == 8
    sets = parse_eval_sets(["imagenet", "imagenet-a=/d/a", "partworld:sketch"], "imagenet", "/d/in")
    assert [(s.name, s.dataset, s.style, s.root) for s in sets] == [
        ("imagenet", "imagenet", None, "/d/in"), ("imagenet-a", "imagenet-a", None, "/d/a"),
        ("sketch", "partworld", "sketch", None)]
    ctx = torch.zeros(4, 16)
    assert resolve_methods(["all"], {"zeroshot": ctx, "coop": None, "sapt": None}) == [
        "zeroshot", "zeroshot-ensemble", "tpt", "zero", "stss"]
    with pytest.raises(VisionZooError, match="needs a prompt from a SAPT checkpoint"):
        resolve_methods(["fga"], {"zeroshot": ctx, "coop": None, "sapt": None})
    with pytest.raises(VisionZooError, match="unknown method 'fgaa'"):
        resolve_methods(["fgaa"], {"zeroshot": ctx})

    class Mixed(torch.utils.data.Dataset):  # images of different sizes, as ImageNet's are
        classes = ["cat", "dog", "striped red glider"]

        def __len__(self):
            return 3

        def __getitem__(self, i):
            return torch.rand(3, 30 + 7 * i, 41 - 3 * i), i

    torch.manual_seed(0)
    model = visionzoo.create_model(f"fga_{tiny_clip()}", class_names=Mixed.classes)
    res = compare_methods(model, {"zeroshot": model.ctx.detach(), "sapt": model.ctx.detach()},
                          ["zeroshot", "fga", "tpt"], [("mixed", Mixed())], HeadSettings(stss_keep=2),
                          ViewSettings(views=4, image_batch=2), torch.device("cpu"))
    assert res["images"] == {"mixed": 3} and [r["method"] for r in res["accuracy"]] == ["zeroshot", "fga", "tpt"]


def test_demo_arguments_parse(tmp_path):
    from visionzoo.cli import parse_args
    from visionzoo.methods.fga.demo import demo_argv

    args = parse_args(demo_argv(tmp_path, quick=True), training=False)
    assert args.task == "fga" and args.images_per_set == 16 and args.figures == 1 and len(args.eval_sets) == 4
    full = parse_args(demo_argv(tmp_path, quick=False), training=False)
    assert full.images_per_set == 0 and full.eval_sets is None  # every style, every test image
    assert args.coop_pretrained.endswith("coop_clip_tiny_partworld")
