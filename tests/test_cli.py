"""train.py / eval.py front ends: help, --config precedence, clear errors, console scripts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from visionzoo.cli import eval_main, parse_args, train_main

from .conftest import TINY_VIT_ARGS

REPO = Path(__file__).resolve().parent.parent


def test_top_level_scripts_and_console_scripts_show_help():
    bin_dir = Path(sys.executable).parent
    commands = {"train": [sys.executable, str(REPO / "train.py")], "eval": [str(bin_dir / "visionzoo-eval")]}
    outputs = {}
    for kind, cmd in commands.items():
        proc = subprocess.run([*cmd, "classify", "--help"], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "--linear-probe" in proc.stdout and "--precision {fp32,bf16,fp16}" in proc.stdout
        outputs[kind] = proc.stdout
    assert "--resume" in outputs["train"] and "--resume" not in outputs["eval"]
    assert (bin_dir / "visionzoo-train").exists()


def test_config_file_supplies_defaults_and_flags_win(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({"model": "classifier_resnet18", "batch-size": 7, "lr": 0.5,
                                   "linear_probe": True, "model-args": {"drop_rate": 0.2}}))
    args = parse_args(["classify", "--config", str(cfg), "--lr", "0.1"], training=True)
    assert args.model == "classifier_resnet18" and args.batch_size == 7
    assert args.lr == 0.1  # the command line wins over the file
    assert args.linear_probe is True and args.model_args == {"drop_rate": 0.2}
    args = parse_args(["classify", "--config", str(cfg), "--no-linear-probe"], training=True)
    assert args.linear_probe is False


def test_config_file_with_unknown_key_is_refused(tmp_path, capsys):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("model: classifier_resnet18\nbatch_sise: 4\n")
    assert train_main(["classify", "--config", str(cfg)]) == 2
    assert "unknown key 'batch_sise'; did you mean ['batch_size']" in capsys.readouterr().err


def test_unknown_model_on_the_command_line(tmp_path, capsys):
    code = train_main(["classify", "--model", "clasifier_resnet18", "--output-dir", str(tmp_path)])
    assert code == 2
    assert "Did you mean: classifier_resnet18" in capsys.readouterr().err


def test_method_flags_come_from_the_config_dataclass():
    from dataclasses import fields

    from visionzoo.cli import build_parser
    from visionzoo.engine import get_task, list_tasks
    parser = build_parser(training=True)
    sub = next(a for a in parser._actions if a.dest == "task")
    for name in list_tasks():
        dests = {a.dest for a in sub.choices[name]._actions}
        assert {f.name for f in fields(get_task(name).Config)} <= dests


def test_train_then_eval_writes_results(tmp_path):
    run = tmp_path / "run"
    assert train_main(["classify", "--model", "classifier_vit_tiny_patch16_224", "--model-args", *TINY_VIT_ARGS,
                       "--epochs", "1", "--batch-size", "16", "--quiet", "--output-dir", str(run)]) == 0
    results = json.loads((run / "results.json").read_text())
    assert Path(results["final"]).is_dir() and results["metrics"]["count"] == 64
    ev = tmp_path / "eval"
    assert eval_main(["classify", "--model", "classifier_vit_tiny_patch16_224", "--pretrained", results["final"],
                      "--quiet", "--output-dir", str(ev)]) == 0
    row = json.loads((ev / "results.json").read_text())["rows"][0]
    assert row["acc1"] == pytest.approx(results["metrics"]["acc1"])
    assert (ev / "results.md").read_text().startswith("| model |")


def test_eval_of_a_linear_probe_checkpoint(tmp_path):
    import timm
    from safetensors.torch import save_file

    net = timm.create_model("vit_tiny_patch16_224", img_size=32, patch_size=8, depth=2, embed_dim=32, num_heads=2)
    weights = tmp_path / "bb.safetensors"
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(weights))
    run = tmp_path / "probe"
    assert train_main(["classify", "--model", "classifier_vit_tiny_patch16_224", "--model-args", *TINY_VIT_ARGS,
                       f"backbone_pretrained={weights}", "--linear-probe", "--epochs", "1", "--batch-size", "32",
                       "--quiet", "--output-dir", str(run)]) == 0
    final = json.loads((run / "results.json").read_text())["final"]
    assert json.loads((Path(final) / "config.json").read_text())["weights"] == "trained"
    assert eval_main(["classify", "--model", "classifier_vit_tiny_patch16_224", "--pretrained", final, "--quiet",
                      "--output-dir", str(tmp_path / "ev")]) == 0


def test_model_args_values_are_yaml_and_scientific_notation_is_a_number():
    from visionzoo.cli import parse_kv

    got = parse_kv(["lr=1e-3", "size=2E4", "name=vit", "ratio=0.5", "flag=true", "depth=2"])
    assert got == {"lr": 0.001, "size": 20000.0, "name": "vit", "ratio": 0.5, "flag": True, "depth": 2}
    assert isinstance(got["lr"], float)
