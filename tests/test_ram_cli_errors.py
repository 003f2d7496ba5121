"""The issue's bad inputs through the command line: clear errors (exit code 2), odd sizes work."""

from __future__ import annotations

import json

import pytest

from visionzoo.cli import eval_main, train_main

TINY = ["--model", "ram_tiny", "--model-args", "widths=[8,8,16,16]", "blocks=1"]
EVAL = ["--eval-images", "1", "--baselines", "adjoint"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("main", [train_main, eval_main])
@pytest.mark.parametrize("noise", ["gaussian:-0.1", "poisson:-1", "poisson_gaussian:0.1:-0.05"])
def test_negative_noise_level_is_refused(main, noise, capsys, tmp_path):
    code = main(["ram", *TINY, "--operators", f"denoise:noise={noise}", "--output-dir", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err
    assert "must be a finite number >= 0" in err and noise.split(":")[-1] in err
    assert "noise=none | gaussian:SIGMA" in err  # the accepted noise models are listed


def test_operator_image_size_mismatch_is_refused(capsys, tmp_path):
    code = eval_main(["ram", *TINY, "--operators", "sr:factor=3", "--image-size", "32", *EVAL,
                      "--output-dir", str(tmp_path)])
    assert code == 2
    assert "32x32 is not divisible by the factor 3" in capsys.readouterr().err
    assert not (tmp_path / "results.json").exists()  # it fails before reconstructing anything
    # training crops are checked the same way before the first step
    code = train_main(["ram", *TINY, "--operators", "sr:factor=3", "--crop-size", "32", "--output-dir",
                       str(tmp_path / "train")])
    assert code == 2 and "not divisible by the factor 3" in capsys.readouterr().err


def test_channel_count_without_head_is_refused(capsys, tmp_path):
    # the shipped ram_tiny has an RGB head only: grey images, MRI (2 channels) and CT (grey) have none
    code = eval_main(["ram", "--model", "ram_tiny", "--pretrained", "true", "--channels", "1", "--operators",
                      "sr:factor=2", "--image-size", "32", *EVAL, "--output-dir", str(tmp_path)])
    assert code == 2
    assert "1-channel images but the model only has heads for [3] channels" in capsys.readouterr().err
    code = train_main(["ram", "--finetune", "--model", "ram_tiny", "--pretrained", "true", "--finetune-operator",
                       "mri:accel=4", "--image-size", "32", "--output-dir", str(tmp_path / "ft")])
    assert code == 2
    assert "mri works on 2-channel images" in capsys.readouterr().err


def test_non_finite_measurement_is_refused(monkeypatch, capsys, tmp_path):
    import visionzoo.methods.ram.eval_job as job

    real = job.build_dataset

    def with_nan(*args, **kwargs):
        images = [(img.clone(), label) for img, label in real(*args, **kwargs)]
        images[0][0][:, 5, 7] = float("nan")  # a broken pixel: its measurement is NaN
        return images

    monkeypatch.setattr(job, "build_dataset", with_nan)
    code = eval_main(["ram", *TINY, "--dataset", "random-blobs", "--dataset-args", "length=2", "size=24",
                      "--image-size", "0", "--operators", "denoise:noise=gaussian:0.1", *EVAL,
                      "--output-dir", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err
    assert "the measurement holds 3 NaN and 0 Inf values" in err and "torch.nan_to_num" in err


def test_odd_image_size_works_from_the_cli(tmp_path):
    code = eval_main(["ram", *TINY, "--dataset", "random-blobs", "--dataset-args", "length=1", "size=37",
                      "--image-size", "0", "--operators", "blur:sigma=1,noise=gaussian:0.05", "inpainting:ratio=0.5",
                      "--eval-images", "1", "--baselines", "adjoint", "pinv", "--output-dir", str(tmp_path),
                      "--quiet"])
    assert code == 0
    summary = json.loads((tmp_path / "results.json").read_text())["summary"]
    assert len(summary) == 6 and all(r["images"] == 1 and r["psnr"] == r["psnr"] for r in summary)
